"""The ``.env`` file beside ``config.yaml``: the secrets ``${VAR}`` names, kept out of the file.

``chatgate init`` writes it (mode 600) and the loader reads it at every start; a variable set in
the environment wins over the same one in ``.env``. One ``KEY=value`` a line; blank lines and
lines starting with ``#`` are skipped, ``export KEY=value`` is taken as well, and a value may be
in single quotes (taken as written) or double quotes (``\\"`` and ``\\\\`` inside). ``line`` writes
what ``parse`` reads back, so the two never disagree.
"""

from __future__ import annotations

import re
from pathlib import Path

from bot.errors import ConfigError

_LINE = re.compile(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)")


def parse(text: str, shown: str = ".env") -> dict[str, str]:
    """The variables of a ``.env`` text; a line that is not ``KEY=value`` is a ``ConfigError``
    naming the file and line (never the value)."""
    found: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        m = _LINE.fullmatch(stripped)
        if m is None:
            raise ConfigError(f"{shown} line {number}", "not a KEY=value line", "write NAME=value, one a line")
        value = m.group(2)
        if len(value) >= 2 and value[0] == value[-1] == "'":
            value = value[1:-1]
        elif len(value) >= 2 and value[0] == value[-1] == '"':
            value = re.sub(r"\\([\\\"])", r"\1", value[1:-1])
        else:
            value = value.split(" #", 1)[0].strip()  # an unquoted value ends at a comment
        found[m.group(1)] = value
    return found


def line(name: str, value: str) -> str:
    """``NAME="value"``, quoted so that ``parse`` gives ``value`` back."""
    if "\n" in value or "\r" in value:
        raise ValueError(f"{name}: a value of one line only")
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'{name}="{escaped}"'


def read(path: Path) -> dict[str, str]:
    """The variables of the file at ``path``; none when there is no such file."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return {}
    except (PermissionError, IsADirectoryError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), f"cannot be read ({type(exc).__name__})",
                          "make it a UTF-8 text file the bot's user may read") from None
    return parse(text, str(path))
