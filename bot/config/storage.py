"""``storage:`` and ``cluster:``, where the bot keeps everything: SQLite for one process, or
PostgreSQL for one or several instances (their leases and take-over times)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field, SecretStr
from pydantic_core import PydanticCustomError

from bot.config.types import Float, Int, Secret, Section, secret


class RetentionConfig(Section):
    context: Annotated[Float, Field(gt=0)] = Field(default=7.0, description="days a group message that did not "
        "address the bot (kept only as context for its next answer there) stays stored, text and all; then it is "
        "deleted (checked at start and every hour)")


def _database_url(value: SecretStr | None) -> SecretStr | None:
    if value is not None and not re.match(r"postgres(ql)?://", value.get_secret_value()):
        raise PydanticCustomError("database_url", "not a postgresql:// URL")
    return value


class StorageConfig(Section):
    """SQLite at ``path`` (one process), or PostgreSQL at ``url`` (one or several instances)."""

    path: Annotated[Path, BeforeValidator(lambda v: v or None)] = Field(default=Path("data/chatgate.db"), description=(
        "SQLite file; relative paths start at the working directory. It holds the conversations, every message "
        "received (refused and ignored ones as their id and time only, for 7 days), the answers still owed, usage, "
        "traces and pairing approvals. In Docker: /srv/chatgate/data, mount it as a volume."))
    url: Annotated[Secret, AfterValidator(_database_url)] = secret("CHATGATE_DATABASE_URL", description="PostgreSQL "
        "instead of the SQLite file (or CHATGATE_DATABASE_URL): what several instances of one bot share (see "
        "docs/operations/several-instances.md). `chatgate migrate --from data/chatgate.db --to URL` copies an "
        "existing SQLite database into an empty one.", examples=["postgresql://chatgate:${PGPASSWORD}@db.internal:5432/chatgate"])
    pool_size: Annotated[Int, Field(ge=1, le=100)] = Field(default=10, description="PostgreSQL connections of this "
        "instance")
    backups: Annotated[Int, Field(ge=0, le=1000)] = Field(default=3, description="SQLite: before migrations change "
        "the file (an upgrade), a copy is kept beside it (chatgate.db.v<schema>-<UTC time>.bak, made with SQLite's "
        "online backup API); the newest 3 stay; 0: none")
    retention: RetentionConfig = RetentionConfig()

    @property
    def database_url(self) -> str | None:
        return self.url.get_secret_value() if self.url is not None else None

    @property
    def shown(self) -> str:
        """Where the store is, for people: the file, or the URL without its password."""
        if self.url is None:
            return str(self.path)
        parts = urlsplit(self.url.get_secret_value())
        host = f"{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
        return f"postgresql://{parts.username + '@' if parts.username else ''}{host}{parts.path}"


class ClusterConfig(Section):
    """Several instances on one PostgreSQL database (``storage.url``); unused on SQLite."""

    lease_seconds: Annotated[Float, Field(ge=1, le=600)] = Field(default=15.0, description="what a dead instance "
        "owned (sessions, the Telegram poller, answers to send) is taken over this long after its last heartbeat")
    instance: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,62}$")] | None = Field(
        default=None, description="this instance's name in `chatgate status` (default: host-pid)", examples=["bot-a"])
