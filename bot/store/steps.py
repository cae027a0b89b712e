"""A capability package's own tables and operations on the one store, written once.

A capability declares its tables as migrations named ``<capability>/NNNN_what``
(``CapabilitySpec.migrations``) and its port as operations (``bot.store.op``: statements
yielded, rows received) that it runs with ``read`` and ``write``, so that a package brings
its SQL with it and neither driver knows of it. ``apply_steps`` applies the migrations a
database lacks, by name (a package's are independent of the core's numbering and of the other
packages'), each recorded in ``capability_migrations``; a name of the package that this
chatgate does not know means a newer chatgate wrote the database, which refuses to start.
Reading first, so that a runtime role with data rights only starts when nothing is missing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TypeVar

from bot.errors import SchemaTooNewError, StoreError
from bot.store.engine import Engine
from bot.store.op import Driven, Op, execute, rows
from bot.store.schema_steps import Migration, render, split_statements

T = TypeVar("T")

MIGRATE_HINT = "run `chatgate migrate` as a role that may create tables, then start again"


def _applied(owner: str) -> Op[set[str]]:
    found = yield from rows("SELECT name FROM capability_migrations WHERE name LIKE ?", f"{owner}/%")
    return {str(r[0]) for r in found}


def pending(owner: str, steps: Sequence[Migration], applied: set[str], where: str) -> list[Migration]:
    """The steps not yet applied; ``SchemaTooNewError`` when the database has one this chatgate
    does not know (a newer chatgate wrote it)."""
    known = {m.name for m in steps}
    unknown = sorted(applied - known)
    if unknown:
        raise SchemaTooNewError(f"{where} has {owner}'s migration {unknown[-1]}, written by a newer chatgate: "
                                "upgrade chatgate or use another database")
    return [m for m in steps if m.name not in applied]


def _apply(owner: str, steps: Sequence[Migration], engine: Engine, where: str) -> Op[int]:
    if engine.xact_lock:  # two instances starting at once: one applies, the other then finds nothing to do
        yield from execute(engine.xact_lock, f"migrations:{owner}")
    todo = pending(owner, steps, (yield from _applied(owner)), where)
    for step in todo:
        for statement in split_statements(render(step, engine)):
            yield from execute(statement)
        yield from execute("INSERT INTO capability_migrations (name, applied_at) VALUES (?, ?)", step.name, time.time())
    return len(todo)


class StepOps(Driven):
    """``read``/``write`` for a capability's own operations, and its migrations."""

    async def read(self, operation: Op[T], *, snapshot: bool = False) -> T:
        """A capability's read, outside a transaction; ``snapshot``: its statements see one moment."""
        return await self._read(operation, snapshot=snapshot)

    async def write(self, operation: Op[T]) -> T:
        """A capability's write: one transaction, run to its end even when its caller is cancelled."""
        return await self._write(operation)

    async def apply_steps(self, owner: str, steps: Sequence[Migration]) -> int:
        """Apply ``owner``'s migrations the database lacks; how many were applied now."""
        wrong = [m.name for m in steps if not m.name.startswith(f"{owner}/")]
        if wrong:
            raise ValueError(f"{owner}'s migrations must be named {owner}/NNNN_what, not {wrong[0]!r}")
        if not pending(owner, steps, await self._read(_applied(owner)), self.where):
            return 0
        try:
            return await self._write(_apply(owner, steps, self.engine, self.where))
        except (SchemaTooNewError, StoreError):
            raise
        except Exception as exc:  # a role with data rights only; a statement the database refuses
            raise StoreError(f"{self.where}: cannot apply {owner}'s migrations ({exc}); {MIGRATE_HINT}") from exc
