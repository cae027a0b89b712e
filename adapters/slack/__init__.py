"""Slack: Socket Mode or the Events API in, mrkdwn out (``adapters.slack.channel``).

Importing this package loads only the config model: slack-bolt and slack_sdk are imported
by ``build``, when the channel is enabled."""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.slack.config import SlackConfig, check
from adapters.slack.doctor import doctor
from adapters.slack.setup import SETUP
from bot.channels import ChannelSpec

if TYPE_CHECKING:
    from adapters.slack.channel import SlackChannel

HINTS = ("Slack shows your Markdown as Slack mrkdwn: **bold**, _italic_, ~~strike~~, `code`, code blocks, "
         "links, lists and > quotes. No tables (they become code blocks) and no headings (use a bold line); keep "
         "paragraphs short. Mention a person as <@USER_ID>; @channel and @here never ping anyone.")


def build(config: SlackConfig) -> SlackChannel:
    from adapters.slack.channel import SlackChannel
    from adapters.slack.dialect import SLACK

    return SlackChannel(config, SLACK)


SPEC = ChannelSpec("slack", SlackConfig, build, hints=HINTS, display="Slack", check=check, doctor=doctor, setup=SETUP)
