"""``chatgate dashboard passwd``: a user's password hash written into the config file.

The file is the operator's, comments and all, so it is edited as text, not re-dumped:
``set_user`` finds ``dashboard:`` → ``users:`` → ``NAME:`` in block style and sets
``password_hash:`` (and ``role:`` when given) there, adding what is missing. A layout it
cannot change safely (a flow mapping such as ``dashboard: {…}``, tabs) gives None, and the
command prints the lines to paste instead. The command checks the edited text by loading it
before it replaces the file, so a wrong edit never lands.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from bot.config import edit
from bot.errors import ConfigError


def snippet(user: str, hashed: str, role: str | None) -> str:
    """What to paste under the config's top level when the file could not be edited."""
    return (f"dashboard:\n  users:\n    {user}:\n      role: {role or 'viewer'}\n"
            f'      password_hash: "{hashed}"\n')


def set_user(text: str, user: str, hashed: str, role: str | None) -> str | None:
    """``text`` with ``dashboard.users.<user>.password_hash`` (and ``role``) set; None when the
    layout is one this edit does not change (the caller prints ``snippet`` instead)."""
    if "\t" in text or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", user):
        return None
    lines = text.splitlines()
    quoted = f'"{hashed}"'
    top = edit.find(lines, 0, len(lines), 0, "dashboard")
    if top is None:
        lines += ["", *snippet(user, hashed, role).splitlines()]
        return "\n".join(lines) + "\n"
    if edit.value(lines[top]) not in ("", "{}"):
        return None
    if edit.value(lines[top]) == "{}":
        lines[top] = "dashboard:"
    end = edit.block(lines, top, 0)
    step = edit.child_indent(lines, top, end, 0)
    users = edit.find(lines, top + 1, end, step, "users")
    if users is None:
        lines[top + 1:top + 1] = [f"{' ' * step}users:"]
        users, end = top + 1, end + 1
    value = edit.value(lines[users])
    if value == "{}":
        lines[users] = f"{' ' * step}users:"
    elif value:
        return None
    users_end = edit.block(lines, users, step)
    inner = edit.child_indent(lines, users, users_end, step)
    entry = edit.find(lines, users + 1, users_end, inner, user)
    if entry is None:
        block = [f"{' ' * inner}{user}:", f"{' ' * (inner * 2 - step)}role: {role or 'viewer'}",
                 f"{' ' * (inner * 2 - step)}password_hash: {quoted}"]
        last = max((i for i in range(users, users_end) if edit.is_content(lines[i])), default=users)
        lines[last + 1:last + 1] = block
        return "\n".join(lines) + "\n"
    if edit.value(lines[entry]):
        return None  # `alice: {role: viewer}`: a flow mapping
    entry_end = edit.block(lines, entry, inner)
    field = edit.child_indent(lines, entry, entry_end, inner)
    fields: dict[str, str | None] = {"password_hash": quoted, "role": role}
    for key, setting in fields.items():
        if setting is None:
            continue
        at = edit.find(lines, entry + 1, entry_end, field, key)
        if at is None:  # after the user's last line
            last = max((i for i in range(entry, entry_end) if edit.is_content(lines[i])), default=entry)
            lines.insert(last + 1, f"{' ' * field}{key}: {setting}")
            entry_end += 1
        else:
            comment = re.search(r"\s+#.*$", lines[at].split(":", 1)[1])
            lines[at] = f"{' ' * field}{key}: {setting}{comment.group(0) if comment else ''}"
    return "\n".join(lines) + "\n"


def passwd_command(path: str | None, user: str, role: str | None, *, generate: bool) -> int:
    """`chatgate dashboard passwd NAME`: hash a password (or a new token) into the config file."""
    import getpass

    from bot.config.loading import DEFAULT_PATH
    from bot.dashboard.config import DashboardConfig
    from bot.settings import load_config
    from bot.web import passwords

    file = Path(path) if path else DEFAULT_PATH
    if not file.is_file():
        print(f"chatgate: no config file at {file} (copy config.example.yaml to it, or give -c)", file=sys.stderr)
        return 2
    if generate:
        secret = passwords.new_token()
    elif sys.stdin.isatty():
        secret = getpass.getpass(f"Password for {user}: ")
        if secret and getpass.getpass("Again: ") != secret:
            print("chatgate: the two passwords differ; nothing changed", file=sys.stderr)
            return 1
    else:  # a script: one line of stdin
        secret = sys.stdin.readline().rstrip("\r\n")
    if not secret:
        print("chatgate: an empty password is never accepted; nothing changed", file=sys.stderr)
        return 1
    hashed = passwords.hash_password(secret)
    original = file.read_text(encoding="utf-8")
    edited = set_user(original, user, hashed, role)
    if edited is not None:
        trial = file.with_name(f".{file.name}.passwd-{os.getpid()}")
        try:
            trial.write_text(edited, encoding="utf-8")
            os.chmod(trial, file.stat().st_mode & 0o777)
            try:
                config = load_config(trial, require_secrets=False)
            except ConfigError as exc:
                print(f"chatgate: the edited config would not load ({exc}); nothing changed", file=sys.stderr)
                edited = None
            else:
                stored = config.section("dashboard", DashboardConfig).users.get(user)
                if stored is None or stored.password_hash is None or \
                        not passwords.verify(secret, stored.password_hash.get_secret_value()):
                    edited = None
            if edited is not None:
                os.replace(trial, file)
        finally:
            trial.unlink(missing_ok=True)
    if edited is None:
        print(f"chatgate: could not edit {file} safely (a flow mapping or tabs?); add these lines yourself:\n\n"
              f"{snippet(user, hashed, role)}", file=sys.stderr)
        return 1
    print(f"set the password of dashboard user {user!r} in {file}")
    if generate:
        print(f"token (shown once, not stored anywhere): {secret}")
    return 0
