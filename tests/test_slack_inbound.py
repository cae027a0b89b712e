"""Slack inbound mapping and config, as tables: no event loop, no SDK."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from adapters.slack import commands
from adapters.slack.config import SlackConfig, check
from adapters.slack.inbound import (
    Me,
    Options,
    command_of,
    is_ignored,
    may_be_heard,
    readable,
    stop_button_of,
    to_inbound,
)
from bot.channels import COMMAND_MENU, COMMAND_NAMES
from bot.messages import AttachmentKind, ChatType

ME = Me("UBOT", "BBOT", "T1")
NAMES = {"U2": "Bob"}


def ev(channel: str = "C1", text: str = "hi", *, user: str = "U1", ts: str = "100.000001", kind: str = "message",
       **extra: object) -> dict[str, object]:
    return {"type": kind, "channel": channel, "user": user, "text": text, "ts": ts, **extra}


@pytest.mark.parametrize(("wire", "seen"), [
    ("<@UBOT> hello", "hello"),
    ("hey <@UBOT>, look", "hey , look"),
    ("ask <@U2> and <@U3|carol>", "ask @Bob and @carol"),
    ("<@U9>", "@U9"),
    ("in <#C5|general> now", "in #general now"),
    ("<!here> up", "@here up"),
    ("<!subteam^S1|@devs> ping", "@devs ping"),
    ("see <https://x.io/a?b=1&amp;c=2|the doc>", "see the doc (https://x.io/a?b=1&c=2)"),
    ("<https://x.io>", "https://x.io"),
    ("<mailto:a@b.c|a@b.c>", "a@b.c"),
    ("a &lt;b&gt; &amp;&amp; c", "a <b> && c"),
    ("&amp;lt;", "&lt;"),
])
def test_readable_text(wire: str, seen: str) -> None:
    assert readable(wire, "UBOT", NAMES) == seen


@pytest.mark.parametrize(("event", "ignored"), [
    (ev(), False),
    (ev(subtype="file_share"), False),
    (ev(subtype="thread_broadcast"), False),
    (ev(user="UBOT"), True),  # our own message
    (ev(bot_id="BBOT", user="UX"), True),  # our own, by bot id
    (ev(subtype="message_changed"), True),
    (ev(subtype="message_deleted"), True),
    (ev(subtype="channel_join"), True),
    (ev(subtype="bot_message", bot_id="B2"), True),
    (ev(user="UOTHERBOT", bot_id="B2"), True),  # another bot, not allowed
    (ev(user=""), True),
    (ev(hidden=True), True),
])
def test_ignored(event: dict[str, object], ignored: bool) -> None:
    assert is_ignored(event, ME, Options()) is ignored


@pytest.mark.parametrize(("keys", "channel", "heard"), [
    ({}, "C1", False),  # allowlist, nothing listed
    ({"channels": ["C1"]}, "C1", True),
    ({"channels": ["C1"]}, "G2", False),
    ({"channels": ["*"]}, "G2", True),
    ({"group_policy": "open"}, "C9", True),
    ({"group_policy": "disabled", "channels": ["*"]}, "C1", False),
    ({}, "D1", True),  # dm allowlist: a stranger may have been approved by pairing
    ({"dm_policy": "disabled"}, "D1", False),
])
def test_may_be_heard(keys: dict[str, object], channel: str, heard: bool) -> None:
    assert may_be_heard(ev(channel), SlackConfig.model_validate(keys)) is heard


def test_allowed_bot_is_kept_and_marked() -> None:
    msg = to_inbound(ev("D1", user="UOB", bot_id="B2"), ME, names={}, participating=False,
                     options=Options(allowed_bots=frozenset({"UOB"})))
    assert msg is not None and msg.sender.is_bot


@pytest.mark.parametrize(("event", "participating", "running", "addressed", "thread", "text"), [
    # DMs are always addressed; top-level DMs have no thread, DM threads are their own session
    (ev("D1", "hello"), False, False, True, None, "hello"),
    (ev("D1", "more", thread_ts="50.1"), False, False, True, "50.1", "more"),
    # a top-level channel mention opens its own thread (the ts) ...
    (ev("C1", "<@UBOT> hi", kind="app_mention"), False, False, True, "100.000001", "hi"),
    # ... whether it came as app_mention or as message
    (ev("C1", "<@UBOT> hi"), False, False, True, "100.000001", "hi"),
    # a channel message that does not mention the bot: context, no thread
    (ev("C1", "chatter"), False, False, False, None, "chatter"),
    # a thread follow-up without a mention: addressed while the bot participates
    (ev("C1", "and then?", thread_ts="90.1"), True, False, True, "90.1", "and then?"),
    (ev("C1", "and then?", thread_ts="90.1"), False, False, False, "90.1", "and then?"),
    # bare stop in a thread the bot is in, or where a run lives
    (ev("C1", "stop", thread_ts="90.1"), True, False, True, "90.1", "/stop"),
    (ev("C1", "Stop!", thread_ts="90.1"), False, True, True, "90.1", "/stop"),
    (ev("C1", "stop", thread_ts="90.1"), False, False, False, "90.1", "stop"),
    (ev("C1", "stop"), True, True, False, None, "stop"),  # not in a thread: just a word
    (ev("C1", "don't stop", thread_ts="90.1"), True, False, True, "90.1", "don't stop"),
    # group DMs (G…) behave like channels
    (ev("G1", "<@UBOT> yo"), False, False, True, "100.000001", "yo"),
])
def test_addressing_and_threads(event: dict[str, object], participating: bool, running: bool, addressed: bool,
                                thread: str | None, text: str) -> None:
    msg = to_inbound(event, ME, names=NAMES, participating=participating, running=running)
    assert msg is not None
    assert (msg.addressed, msg.thread_id, msg.text) == (addressed, thread, text)
    assert msg.message_id == event["ts"]


def test_no_thread_when_replies_go_to_the_channel() -> None:
    msg = to_inbound(ev("C1", "<@UBOT> hi"), ME, names={}, participating=False,
                     options=Options(reply_in_thread=False))
    assert msg is not None and msg.thread_id is None and msg.chat_type is ChatType.GROUP


def test_app_mention_and_message_of_one_ts_are_the_same_message() -> None:
    base = ev("C1", "<@UBOT> what is <@U2> doing &amp; why", ts="123.456", thread_ts="120.0")
    one = to_inbound({**base, "type": "app_mention"}, ME, names=NAMES, participating=False)
    two = to_inbound({**base, "channel_type": "channel"}, ME, names=NAMES, participating=False)
    assert one == two and one is not None and one.text == "what is @Bob doing & why"


def test_files_are_metadata_only() -> None:
    files = [{"id": "F1", "name": "a.png", "mimetype": "image/png", "size": 10,
              "url_private": "https://files.slack.com/a"},
             {"id": "F2", "name": "b.pdf", "mimetype": "application/pdf", "size": 20,
              "url_private": "https://files.slack.com/b", "url_private_download": "https://files.slack.com/b?dl"},
             {"id": "F3", "mode": "tombstone"}]
    msg = to_inbound(ev("D1", "", subtype="file_share", files=files), ME, names={}, participating=False)
    assert msg is not None
    assert [(a.kind, a.name, a.size, a.platform_file_id, a.data) for a in msg.attachments] == [
        (AttachmentKind.IMAGE, "a.png", 10, "https://files.slack.com/a", None),
        (AttachmentKind.DOCUMENT, "b.pdf", 20, "https://files.slack.com/b?dl", None)]


def test_slash_command_and_stop_button() -> None:
    cmd = command_of({"channel_id": "C1", "user_id": "U1", "text": " now ", "trigger_id": "7.8"}, ME,
                     name="stop", thread_id="90.1")
    assert (cmd.text, cmd.thread_id, cmd.addressed, cmd.message_id, cmd.chat_type) == (
        "/stop now", "90.1", True, "cmd:7.8", ChatType.GROUP)
    click = {"type": "block_actions", "user": {"id": "U1"}, "channel": {"id": "D1"},
             "container": {"channel_id": "D1", "message_ts": "5.5", "thread_ts": "4.4"},
             "actions": [{"action_id": "chatgate_stop", "value": "", "action_ts": "9.9"}]}
    stop = stop_button_of(click, ME)
    assert stop is not None and (stop.text, stop.thread_id, stop.chat_type, stop.message_id) == (
        "/stop", "4.4", ChatType.DM, "action:9.9")
    assert stop_button_of({**click, "actions": [{"action_id": "other"}]}, ME) is None


# ------------------------------------------------------------------------ config


def test_required_secrets_follow_the_mode() -> None:
    assert SlackConfig().required_secrets() == ("bot_token", "app_token")
    assert SlackConfig(mode="http").required_secrets() == ("bot_token", "signing_secret")


def test_config_channels_key_is_read_as_groups() -> None:
    config = SlackConfig.model_validate({"channels": ["C1", "*"]})
    assert [g.id for g in config.groups] == ["C1", "*"] and config.channels == ("C1", "*")
    with pytest.raises(ValueError, match="groups"):
        SlackConfig.model_validate({"groups": ["C1"]})


@pytest.mark.parametrize(("keys", "lines"), [
    ({"enabled": False}, []),
    ({"enabled": True, "bot_token": "xoxb-1", "app_token": "xapp-1"}, []),
    ({"enabled": True, "app_token": "xapp-1"}, ["channels.slack.bot_token: missing ("]),
    ({"enabled": True, "bot_token": "xoxb-1"}, ["channels.slack.app_token: required for mode: socket ("]),
    ({"enabled": True, "mode": "http", "bot_token": "xoxb-1"},
     ["channels.slack.signing_secret: required for mode: http ("]),
    ({"enabled": True, "mode": "http", "bot_token": "xoxb-1", "signing_secret": "s"}, []),
    ({"enabled": True, "bot_token": "xoxp-1", "app_token": "xoxb-2"},
     ["channels.slack.bot_token: expected a token starting with xoxb-",
      "channels.slack.app_token: expected a token starting with xapp-"]),
    ({"enabled": True, "mode": "http", "bot_token": "xoxb-1", "signing_secret": "s", "http": {"path": "x"}},
     ['channels.slack.http.path: must start with "/"']),
    ({"enabled": True, "bot_token": "xoxb-1", "app_token": "xapp-1", "command": "/mybot"}, []),
    ({"enabled": True, "bot_token": "xoxb-1", "app_token": "xapp-1", "command": "status"},
     ["channels.slack.command: Slack keeps /status for itself"]),
    ({"enabled": True, "bot_token": "xoxb-1", "app_token": "xapp-1", "command": "stop"},
     ["channels.slack.command: /stop is already one of chatgate's own commands"]),
    ({"enabled": True, "bot_token": "xoxb-1", "app_token": "xapp-1", "command": "cg-stop", "command_prefix": "cg-"},
     ["channels.slack.command: /cg-stop is already one of chatgate's own commands"]),
    ({"enabled": True, "bot_token": "xoxb-1", "app_token": "xapp-1", "command": "My Bot"},
     ['channels.slack.command: "/my bot" is not a Slack command name']),
])
def test_check_lines(keys: dict[str, object], lines: list[str]) -> None:
    found = check(SlackConfig.model_validate(keys))
    assert len(found) == len(lines) and all(f.startswith(line) for f, line in zip(found, lines, strict=True))
    assert not any("xoxb-1" in f or "xapp-1" in f for f in found)  # never a secret in the lines


# ------------------------------------------------------------------------ slash commands


@pytest.mark.parametrize(("slash", "text", "routed"), [
    ("/chatgate", "stop", ("stop", "")),
    ("/chatgate", " Stop  right now ", ("stop", "right now")),
    ("/chatgate", "/new fresh", ("new", "fresh")),
    ("/chatgate", "status", ("status", "")),
    ("/chatgate", "stopall", ("stopall", "")),  # every command, not only the menu's
    ("/chatgate", "", ("help", "")),
    ("/chatgate", "   ", ("help", "")),
    ("/chatgate", "bogus stop", ("help", "")),
    ("/stop", " now ", ("stop", "now")),
    ("/new", "", ("new", "")),
])
def test_route(slash: str, text: str, routed: tuple[str, str]) -> None:
    assert commands.route(slash, text) == routed


def test_route_with_a_custom_name_and_a_prefix() -> None:
    assert commands.route("/mybot", "stop", command="mybot", prefix="cg-") == ("stop", "")
    assert commands.route("/cg-status", "", command="mybot", prefix="cg-") == ("status", "")


def test_the_app_command_name_takes_an_optional_slash() -> None:
    assert SlackConfig().command == "chatgate"
    assert SlackConfig.model_validate({"command": " /MyBot"}).command == "mybot"


def test_commands_of_their_own_skip_the_names_slack_keeps() -> None:
    assert "status" in commands.RESERVED and "help" in commands.RESERVED
    assert set(commands.direct()) == set(COMMAND_NAMES) - commands.RESERVED >= {"stop", "new", "compact", "whoami"}
    assert set(commands.direct("cg-")) == {f"cg-{name}" for name in COMMAND_NAMES}  # prefixed: Slack's are free


def readme_manifest() -> dict[str, object]:
    readme = (Path(__file__).resolve().parent.parent / "docs" / "platforms" / "slack.md").read_text()
    [block] = [b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if "slash_commands:" in b]
    return yaml.safe_load(block)


def test_the_readme_manifest_registers_what_the_channel_answers() -> None:
    listed = readme_manifest()["features"]["slash_commands"]  # type: ignore[index]
    names = [entry["command"] for entry in listed]
    assert names[0] == "/chatgate" and not {n.removeprefix("/") for n in names} & commands.RESERVED
    menu = {name for name, _ in COMMAND_MENU}
    direct = {n.removeprefix("/") for n in names[1:]}
    assert direct <= menu and direct == menu - commands.RESERVED  # every menu command Slack leaves free
    assert all(commands.route("/chatgate", name) == (name, "") for name in menu)  # and all through /chatgate
    assert [(e["command"], e["description"], e.get("usage_hint", "")) for e in listed] == list(commands.manifest())


def test_spec_imports_no_sdk() -> None:
    code = ("import sys, adapters.slack as s; assert s.SPEC.name == 'slack' and s.SPEC.display == 'Slack'; "
            "print(sorted(m for m in sys.modules if m.startswith(('slack_bolt', 'slack_sdk'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.strip() == "[]"


def test_build_gives_a_channel_with_the_mrkdwn_dialect() -> None:
    import adapters.slack as slack
    from adapters.slack.dialect import SLACK

    config = SlackConfig.model_validate({"enabled": True, "bot_token": "xoxb-1", "app_token": "xapp-1"})
    channel = slack.SPEC.build(config)
    assert channel.dialect is SLACK and channel.name == "slack"
    assert (channel.shape.chunk, channel.shape.measure) == (4000, "chars")


def test_chatgate_check_names_the_slack_problems(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "config.yaml"
    path.write_text("providers: {openai: {api_key: k}}\n"
                    "channels: {slack: {enabled: true, mode: http, bot_token: xoxp-user-token, signing_secret: s, "
                    "http: {path: events}}}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    out = subprocess.run([sys.executable, "-m", "bot", "check", "-c", str(path)], capture_output=True, text=True,
                         timeout=30, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "warning: channels.slack.bot_token: expected a token starting with xoxb- (check SLACK_BOT_TOKEN)" \
        in out.stderr.splitlines()
    assert 'warning: channels.slack.http.path: must start with "/", got "events"' in out.stderr.splitlines()
    assert "xoxp-user-token" not in out.stderr + out.stdout
    path.write_text("providers: {openai: {api_key: k}}\nchannels: {slack: {enabled: true, bot_token: xoxb-1}}\n")
    out = subprocess.run([sys.executable, "-m", "bot", "check", "-c", str(path)], capture_output=True, text=True,
                         timeout=30, env=env, cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip() == "chatgate: channels.slack.app_token: missing (set SLACK_APP_TOKEN)"
