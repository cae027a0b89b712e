"""Slack Web API failures -> the port's ``SendFailed`` (one attempt; delivery retries)."""

from __future__ import annotations

import asyncio

import aiohttp
from slack_sdk.errors import SlackApiError, SlackRequestError

from bot.channels import SendFailed

# Errors that no retry can fix: the message or the chat is wrong. A refused token is not among
# them: the channel stops, and the send waits for the restart with a good token.
PERMANENT = frozenset({
    "msg_too_long", "no_text", "invalid_blocks", "invalid_blocks_format", "too_many_attachments",
    "channel_not_found", "not_in_channel", "is_archived", "cant_update_message", "message_not_found",
    "edit_window_closed", "restricted_action", "restricted_action_read_only_channel", "user_not_found",
    "no_permission", "missing_scope", "not_allowed_token_type", "ekm_access_denied", "invalid_arguments",
    "invalid_thread_ts", "thread_not_found", "file_not_found", "team_access_not_granted",
})


def error_code(exc: SlackApiError) -> str:
    data = exc.response.data if isinstance(exc.response.data, dict) else {}
    return str(data.get("error") or "")


def send_failed(exc: BaseException, what: str) -> SendFailed:
    """The ``SendFailed`` for one failed call; Slack's ``Retry-After`` is honoured."""
    if isinstance(exc, SlackApiError):
        code, status = error_code(exc), exc.response.status_code
        if status == 429 or code == "ratelimited":
            try:
                after = float(exc.response.headers.get("Retry-After", "1"))
            except (TypeError, ValueError):
                after = 1.0
            return SendFailed(f"{what}: rate limited", retry_after=after)
        permanent = code in PERMANENT or (400 <= status < 500 and status not in (408, 429))
        return SendFailed(f"{what}: {code or status}", permanent=permanent)
    if isinstance(exc, (aiohttp.ClientError, asyncio.TimeoutError, SlackRequestError, OSError)):
        return SendFailed(f"{what}: {type(exc).__name__}: {exc}")
    raise exc
