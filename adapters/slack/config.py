"""The keys under ``channels.slack`` (one pydantic model; imported at every start, so
pydantic, ``bot.channels`` and the pure ``commands`` only)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field

from adapters.slack import commands
from bot.channels import ChannelConfig, Float, Groups, Int, Secret, Section, Url, secret


class SlackHttp(Section):
    """Where the Events API (``mode: http``) posts: Slack's Request URL is https://<host><path>."""

    listen: str = "0.0.0.0"
    port: Annotated[Int, Field(ge=0, le=65535)] = 3000  # 0 picks a free port (tests)
    path: str = "/slack/events"


class SlackConfig(ChannelConfig):
    """``channels.slack``. Slack calls group chats channels: the allowed ones are listed under
    ``channels`` (read by the core's access code as ``groups``; ``"*"`` allows every channel)."""

    user_id_pattern: ClassVar[str] = r"[UW][A-Z0-9]{2,}"
    user_id_hint: ClassVar[str] = ("Slack member ids look like U012AB3CDE (profile > ⋮ > Copy member ID), "
                                   "not @names")

    mode: Literal["socket", "http"] = "socket"
    bot_token: Secret = secret("SLACK_BOT_TOKEN")  # xoxb-…
    app_token: Secret = secret("SLACK_APP_TOKEN")  # xapp-…, Socket Mode only
    signing_secret: Secret = secret("SLACK_SIGNING_SECRET")  # HTTP mode only
    http: SlackHttp = SlackHttp()
    base_url: Url = "https://slack.com/api/"
    groups: Groups = Field(default=(), alias="channels")  # the core's allowed groups, under Slack's name
    reply_in_thread: bool = True
    thread_participation: bool = True  # follow-ups in a thread the bot answered in (24 h) count as addressed
    streaming: Literal["native", "edit", "off"] = "native"
    command: Annotated[str, AfterValidator(commands.bare)] = commands.APP_COMMAND  # /chatgate <command> [args]
    command_prefix: str = ""  # the commands of their own become /<prefix>stop ... when a workspace has /stop taken
    max_download_mb: Annotated[Float, Field(gt=0, le=1000)] = 20.0

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
