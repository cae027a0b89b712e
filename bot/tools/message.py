"""message: an extra message to the chat a run is serving, while the run goes on.

For progress on long tasks ("Found 3 files, reading them now"). The tool has no target
argument: the turn runner's ``Messenger`` knows which chat each active run serves and sends
there, through the outbound pipeline and the delivery ledger like any answer (so it is
rendered, split, delivered once and counted against the limits). Another chat or user
cannot be named, and a run the messenger does not know (a sub-agent's) cannot send.

The text is sanitized like a final answer (leaked tool markup, thinking tags ...), at
most ``max_chars`` long, and at most ``max_per_run`` messages go out per run. The tool
never retries a send: retries belong to delivery, which knows what was delivered.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Protocol

from bot.text.sanitize import sanitize
from bot.text.silence import is_silent, strip_no_reply
from bot.tools.base import Tool, ToolCategory, ToolContext, ToolError, tool

log = logging.getLogger(__name__)

MAX_PER_RUN = 5
MAX_CHARS = 4000
_RUNS_REMEMBERED = 4096


class Messenger(Protocol):
    async def send(self, run_id: str, text: str) -> None:
        """Deliver ``text`` (Markdown) to the chat run ``run_id`` serves, through the outbound
        pipeline. Raises ``LookupError`` when ``run_id`` is not a run it knows."""


def message_tool(messenger: Messenger, *, max_per_run: int = MAX_PER_RUN, max_chars: int = MAX_CHARS) -> Tool:
    """The ``message`` tool sending through ``messenger``."""
    sent: OrderedDict[str, int] = OrderedDict()  # run id -> messages sent

    @tool(category=ToolCategory.OTHER, name="message")
    async def message(ctx: ToolContext, text: str) -> str:
        """Send a short message to this chat right away, while you keep working: progress on a
        long task, or a question you need answered. Your final answer is still sent as usual;
        do not repeat it here.

        Args:
            text: The message, in Markdown.
        """
        clean = sanitize(text).strip()
        if not clean or is_silent(clean):
            raise ToolError("the message is empty; nothing was sent")
        clean = strip_no_reply(clean).strip()
        if len(clean) > max_chars:
            raise ToolError(f"the message is {len(clean):,} characters; keep it under {max_chars:,} "
                            "(long results go in the final answer)")
        count = sent.get(ctx.run_id, 0)
        if count >= max_per_run:
            raise ToolError(f"already sent {max_per_run} messages in this request; put the rest in the final answer")
        try:
            await messenger.send(ctx.run_id, clean)
        except LookupError:
            raise ToolError("message is not available here (only the run that serves a chat can message it)") from None
        except PermissionError as exc:  # the person's limits: the message counts like one of theirs
            raise ToolError(f"not sent: {exc}; put it in the final answer instead") from None
        sent[ctx.run_id] = count + 1
        sent.move_to_end(ctx.run_id)
        while len(sent) > _RUNS_REMEMBERED:
            sent.popitem(last=False)
        log.info("message sent (%d chars) session=%s run=%s", len(clean), ctx.session_key, ctx.run_id)
        return f"sent ({count + 1} of at most {max_per_run} in this request)"

    return message
