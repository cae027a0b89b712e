"""How a log record is written: a line of text (``logging.format: text``, the default) or one JSON
object per line (``json``), for log shippers (Loki, Elasticsearch, CloudWatch...).

A JSON line has ``time`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger`` and
``message``; then ``run`` and ``session`` while a run is being computed (``about_run``, set by
the agent around each run: a context variable, so every task the run starts inherits it),
``instance`` (this process: ``cluster.instance``, else host-pid), and ``exception`` / ``stack``
when the record has them. The ``RedactingFilter`` (``bot.tracing``) has scrubbed the record
before any formatter sees it, so the JSON carries no secret the text would not.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timezone

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_RUN: ContextVar[tuple[str, str] | None] = ContextVar("chatgate_run", default=None)


@contextmanager
def about_run(run_id: str, session_key: str) -> Iterator[None]:
    """Records logged inside (and in the tasks started inside) name this run and session."""
    token = _RUN.set((run_id, session_key))
    try:
        yield
    finally:
        _RUN.reset(token)


def this_instance(configured: str | None) -> str:
    """The name of this process in logs: ``cluster.instance`` when set, else host-pid (as the cluster names it)."""
    return configured or f"{socket.gethostname()}-{os.getpid()}"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines inside are escaped by JSON)."""

    def __init__(self, instance: str) -> None:
        super().__init__()
        self.instance = instance

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if (run := _RUN.get()) is not None:
            line["run"], line["session"] = run
        line["instance"] = self.instance
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = record.stack_info
        return json.dumps(line, ensure_ascii=False, default=str)
