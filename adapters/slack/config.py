"""The keys under ``channels.slack`` (one pydantic model; imported at every start, so
pydantic, ``bot.channels`` and the pure ``commands`` only)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, ConfigDict, Field

from adapters.slack import commands
from bot.channels import ChannelConfig, Float, Groups, Int, Secret, Section, Url, secret


class SlackHttp(Section):
    """Where the Events API (``mode: http``) posts: Slack's Request URL is https://<host><path>."""

    listen: str = Field(default="0.0.0.0", description="address and port the bot's HTTP server binds")
    port: Annotated[Int, Field(ge=0, le=65535)] = Field(default=3000, description="(put a TLS proxy in front: Slack "
        "posts to https only)")
    path: str = Field(default="/slack/events", description="Slack's Request URL is https://<your host><path>")


class SlackConfig(ChannelConfig):
    """``channels.slack``. Slack calls group chats channels: the allowed ones are listed under
    ``channels`` (read by the core's access code as ``groups``; ``"*"`` allows every channel)."""

    model_config = ConfigDict(json_schema_extra={"descriptions": {
        "allow_from": "member ids (U…); a bot's user id here lets that bot talk to chatgate (with the bot-loop guard)",
        "group_policy": "allowlist: only the channels below | open | disabled",
        "require_mention": "in channels, answer only when mentioned (or in a followed thread)",
        "owners": "member ids (U…) that may use admin commands (/stopall), get tools.owners_only tools, and are "
                  "exempt from limits"}})

    user_id_pattern: ClassVar[str] = r"[UW][A-Z0-9]{2,}"
    user_id_hint: ClassVar[str] = ("Slack member ids look like U012AB3CDE (profile > ⋮ > Copy member ID), "
                                   "not @names")

    mode: Literal["socket", "http"] = Field(default="socket", description="socket (Socket Mode: no public URL) | "
        "http (Events API)")
    bot_token: Secret = secret("SLACK_BOT_TOKEN", description="required when enabled: the Bot User OAuth Token, "
        "xoxb-…")
    app_token: Secret = secret("SLACK_APP_TOKEN", description="required for mode: socket: app-level token (xapp-…, "
        "connections:write)")
    signing_secret: Secret = secret("SLACK_SIGNING_SECRET", description="required for mode: http: every request's "
        "signature and timestamp are checked with it")
    http: SlackHttp = Field(default=SlackHttp(), description="used when mode: http")
    base_url: Url = Field(default="https://slack.com/api/", description="the Web API root (Socket Mode connects "
        "through it too)")
    groups: Groups = Field(default=(), alias="channels", description="channel ids (C…, G…) the bot answers in, or "
        "[\"*\"]")
    reply_in_thread: bool = Field(default=True, description="in channels, answer in a thread under the message that "
        "asked")
    thread_participation: bool = Field(default=True, description="after answering in a thread, follow-ups there "
        "need no mention for 24 h")
    streaming: Literal["native", "edit", "off"] = Field(default="native", description="native (Slack's streaming "
        "messages) | edit (one message edited at most once a second, with a Stop button) | off")
    command: Annotated[str, AfterValidator(commands.bare)] = Field(default=commands.APP_COMMAND, description="the "
        "app command carrying every command: /chatgate status, /chatgate help, /chatgate stop … (Slack keeps "
        "/status and /help for itself); another name for a second chatgate app in the same workspace (a leading "
        "slash is optional)")
    command_prefix: str = Field(default="", description="e.g. \"cg-\": /cg-stop /cg-new … instead of /stop /new …")
    max_download_mb: Annotated[Float, Field(gt=0, le=1000)] = Field(default=20.0, description="larger files users "
        "share are refused")

    def required_secrets(self) -> tuple[str, ...]:
        """The secrets this mode needs (the core's loader asks when the channel is enabled)."""
        return ("bot_token", "app_token") if self.mode == "socket" else ("bot_token", "signing_secret")

    @property
    def channels(self) -> tuple[str, ...]:
        """The allowed channel ids, as written under ``channels.slack.channels``."""
        return tuple(g.id for g in self.groups)


def check(config: SlackConfig) -> list[str]:
    """What ``chatgate check`` reports for an enabled Slack channel, one dotted-key line each."""
    if not config.enabled:
        return []
    problems: list[str] = []
    wanted = [("bot_token", "SLACK_BOT_TOKEN", "xoxb-", "the Bot User OAuth Token from OAuth & Permissions")]
    if config.mode == "socket":
        wanted.append(("app_token", "SLACK_APP_TOKEN", "xapp-",
                       "an app-level token with connections:write, from Basic Information > App-Level Tokens"))
    else:
        wanted.append(("signing_secret", "SLACK_SIGNING_SECRET", "",
                       "the Signing Secret from Basic Information > App Credentials"))
    for key, env, prefix, where in wanted:
        value = getattr(config, key)
        required = f"required for mode: {config.mode}" if key != "bot_token" else "missing"
        if value is None:
            problems.append(f"channels.slack.{key}: {required} ({where}; set {env})")
        elif prefix and not value.get_secret_value().startswith(prefix):
            problems.append(f"channels.slack.{key}: expected a token starting with {prefix} (check {env})")
    if not config.http.path.startswith("/"):
        problems.append(f'channels.slack.http.path: must start with "/", got "{config.http.path}"')
    if config.command_prefix and not config.command_prefix.replace("-", "").replace("_", "").isalnum():
        problems.append("channels.slack.command_prefix: may contain only letters, digits, '-' and '_'")
    return problems + commands.problems(config.command, config.command_prefix)
