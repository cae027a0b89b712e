"""The approvals capability (``tools.approval``, ``tools.approvers`` ...): ``Approvals`` added to
the core's tool gate as its step; its cards' presses (answered at once by whoever may decide:
an approver need not be someone the bot talks to); ``/approve`` and ``/deny``; a line of
``/status`` and a reminder to a message that arrives while a card of its session waits; the
approvals still pending, for the dashboard's Operations page; with
several instances, a decision asked from another instance and the cards of a dead one
expired after every sweep. Always on: a call needs a person only where the rules say so.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.capabilities.spec import CapabilitySpec, Core
from bot.command_spec import CommandCall, CommandSpec, Reply

if TYPE_CHECKING:
    from bot.approvals.ledger import ApprovalRecord
    from bot.approvals.service import Approvals
    from bot.messages import InboundMessage

NOTHING_WAITS = "Nothing waits for approval here."


@dataclass(frozen=True, slots=True)
class Approving:
    """The running capability."""

    approvals: Approvals

    def answers(self, msg: InboundMessage) -> bool:
        if "ap:" not in msg.text:  # every message is asked: most are not a card's press
            return False
        from bot.tools.approval import parse_choice

        return parse_choice(msg.text) is not None

    async def answer(self, msg: InboundMessage) -> None:
        await self.approvals.press(msg)

    def remind(self, session_key: str, spell: Callable[[str], str]) -> str | None:
        return self.approvals.remind(session_key, spell)

    async def status_lines(self, call: CommandCall) -> Sequence[str]:
        line = self.approvals.status_line(call.conversation.session_key)
        return [line] if line else []

    async def decide_here(self, approval_id: str, decision: str, msg: InboundMessage) -> str | None:
        from bot.tools.approval import Decision

        return await self.approvals.decide(approval_id, Decision(decision), msg, here_only=True)

    async def recover(self) -> None:
        await self.approvals.recover()

    async def pending_approvals(self) -> list[ApprovalRecord]:
        """The approvals not ended yet, of every instance (the dashboard's Operations page)."""
        return await self.approvals.pending()

    async def stop(self) -> None:
        self.approvals.closing()


async def _decide(running: Approving, call: CommandCall) -> Reply:
    from bot.tools.approval import Decision

    name = call.command.name
    approval_id, _, how = call.command.args.partition(" ")
    how = "deny" if name == "deny" else (how.strip().lower() or "once")
    if not approval_id or how not in (("deny",) if name == "deny" else ("once", "session", "always")):
        usage = f"{call.spell('approve')} <id> [once|session|always]" if name == "approve" else \
            f"{call.spell('deny')} <id>"
        return Reply(f"Usage: {usage}")
    decision = {"once": Decision.ONCE, "session": Decision.SESSION, "always": Decision.ALWAYS,
                "deny": Decision.DENY}[how]
    refusal = await running.approvals.decide(approval_id, decision, call.msg)
    if refusal is not None:
        return Reply(refusal)
    return Reply("Denied." if decision is Decision.DENY else "Approved.")


@asynccontextmanager
async def open_approvals(core: Core) -> AsyncIterator[Approving]:
    from bot.approvals.service import Approvals, approval_settings
    from bot.tracing import Redactor

    approvals = Approvals(core.store, core.channels, approval_settings(core.config.tools),
                          is_owner=core.access.is_owner_of, mask=Redactor(core.config.secret_values()),
                          elsewhere=core.peers, person_of=core.person_of)
    core.gate.add(approvals)
    core.on_sweep(approvals.recover)  # the cards of an instance that died: expired
    try:
        yield Approving(approvals)
    finally:
        await approvals.aclose()


SPEC = CapabilitySpec("approvals", open_approvals, commands=(
    CommandSpec("approve", _decide, "answer a waiting approval: <id> [once|session|always]", urgent=True,
                capability="approvals", off=NOTHING_WAITS),
    CommandSpec("deny", _decide, "deny a waiting approval: <id>", urgent=True, capability="approvals",
                off=NOTHING_WAITS),
))
