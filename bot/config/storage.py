"""``storage:`` and ``cluster:``, where the bot keeps everything: SQLite for one process, or
PostgreSQL for one or several instances (their leases and take-over times)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field, SecretStr
from pydantic_core import PydanticCustomError

from bot.config.types import Float, Int, Secret, Section
from bot.config.types import secret as _secret


class RetentionConfig(Section):
    # days a group message that did not address the bot is kept (text and all) after the
    # bot saw it; the context it gave is in memory only, so this is the audit trail
    context: Annotated[Float, Field(gt=0)] = 7.0


def _database_url(value: SecretStr | None) -> SecretStr | None:
    if value is not None and not re.match(r"postgres(ql)?://", value.get_secret_value()):
        raise PydanticCustomError("database_url", "not a postgresql:// URL")
    return value


class StorageConfig(Section):
    """SQLite at ``path`` (one process), or PostgreSQL at ``url`` (one or several instances)."""

    path: Annotated[Path, BeforeValidator(lambda v: v or None)] = Path("data/chatgate.db")
    url: Annotated[Secret, AfterValidator(_database_url)] = _secret("CHATGATE_DATABASE_URL")  # postgresql://...
    pool_size: Annotated[Int, Field(ge=1, le=100)] = 10  # PostgreSQL connections of this instance
    backups: Annotated[Int, Field(ge=0, le=1000)] = 3  # SQLite: copies kept beside it before migrations (0: none)
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

    lease_seconds: Annotated[Float, Field(ge=1, le=600)] = 15.0  # what an instance owns expires this long after it died
    instance: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,62}$")] | None = None  # default host-pid
