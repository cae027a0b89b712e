"""Every store port's operations, written once: a driver is this class and its plumbing
(``SQLiteStore``, ``PostgresStore``). A new port is one more module with its statements, its
operations and their mixin (``bot.store.op``), and one more base here."""

from __future__ import annotations

from bot.store.answers import AnswerOps
from bot.store.history import HistoryOps
from bot.store.inbound import InboundOps
from bot.store.models import ModelOps
from bot.store.notes import NoteOps
from bot.store.pairing import PairingOps
from bot.store.steps import StepOps


class Operations(InboundOps, HistoryOps, AnswerOps, PairingOps, ModelOps, NoteOps, StepOps):
    """The ``AppStore`` ports on a driver's ``_read`` and ``_write``."""
