"""Slack: Socket Mode or the Events API in, mrkdwn out (``adapters.slack.channel``).

Importing this package loads only the config model: slack-bolt and slack_sdk are imported
by ``build``, when the channel is enabled."""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.slack.config import SlackConfig, check
from bot.channels import ChannelSpec

if TYPE_CHECKING:
    from adapters.slack.channel import SlackChannel

HINTS = ("Slack shows your answer as Slack mrkdwn converted from your Markdown: use short paragraphs, "
         "bullet lists, **bold**, `code` and fenced code blocks; headings become bold lines and tables "
         "become code blocks. Mention a person as <@USER_ID>.")


def build(config: SlackConfig) -> SlackChannel:
    from adapters.slack.channel import SlackChannel
    from adapters.slack.dialect import SLACK

    return SlackChannel(config, SLACK)


SPEC = ChannelSpec("slack", SlackConfig, build, hints=HINTS, display="Slack", check=check)
