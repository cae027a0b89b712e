"""Dashboard passwords: hashed with scrypt (``hashlib.scrypt``), checked in constant time.

A stored hash is one line, the parameters beside the salt, so a stronger default later still
reads the hashes made before it::

    scrypt$n=131072,r=8,p=1$<salt, base64>$<key, base64>

Why scrypt: it is in the standard library (OpenSSL's), memory-hard (128 MiB a guess with
these parameters, which is what makes GPU cracking of a stolen config expensive) and on
OWASP's list of password hashes; argon2id would need a compiled dependency for a login that
happens a few times a day. The parameters are OWASP's first scrypt recommendation (N=2^17,
r=8, p=1). A hash with weaker parameters than ``MIN_N``/``MIN_R`` is refused, as is anything
that is not a hash: a config can never hold a password in clear text by mistake.

An empty password is never hashed and never matches (``verify`` returns False before any
work), and a user without a hash cannot log in. Nothing here imports the rest of chatgate:
the config's validation checks the shape of a hash with ``problem``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets

N, R, P = 2**17, 8, 1  # what ``hash_password`` uses: ~0.1-0.7 s and 128 MiB per hash
MIN_N, MIN_R = 2**14, 8  # the weakest parameters a stored hash may have
MAX_N = 2**20  # a hash that would take seconds and a GiB to check is refused, not tried
KEY_BYTES = 32
SALT_BYTES = 16
_SHAPE = re.compile(r"scrypt\$n=(\d{1,8}),r=(\d{1,3}),p=(\d{1,2})\$([A-Za-z0-9+/]+={0,2})\$([A-Za-z0-9+/]+={0,2})")


def hash_password(password: str, *, n: int = N) -> str:
    """The stored form of ``password`` (a new random salt each time); ValueError when it is empty."""
    if not password:
        raise ValueError("an empty password is never stored")
    salt = secrets.token_bytes(SALT_BYTES)
    key = _derive(password, salt, n, R, P)
    return f"scrypt$n={n},r={R},p={P}${_b64(salt)}${_b64(key)}"


def verify(password: str, stored: str | None) -> bool:
    """True when ``password`` is the one ``stored`` was made from. An empty password, a missing
    or malformed hash: False, always."""
    if not password or not stored:
        return False
    try:
        n, r, p, salt, key = _parse(stored)
    except ValueError:
        return False
    return hmac.compare_digest(_derive(password, salt, n, r, p), key)


def waste_time(password: str) -> None:
    """As long as a ``verify`` against a real hash: a login for an unknown user takes the same time."""
    _derive(password or "-", b"\0" * SALT_BYTES, N, R, P)


def problem(stored: str) -> str | None:
    """Why ``stored`` is not a usable hash, or None when it is."""
    try:
        _parse(stored)
    except ValueError as exc:
        return str(exc)
    return None


def new_token() -> str:
    """A random login token (32 characters of base64url) for ``chatgate dashboard passwd --generate``."""
    return secrets.token_urlsafe(24)


def _parse(stored: str) -> tuple[int, int, int, bytes, bytes]:
    """(n, r, p, salt, key) of a usable hash; ValueError saying why when it is not one."""
    match = _SHAPE.fullmatch(stored)
    if match is None:
        raise ValueError("not a password hash (it must look like scrypt$n=…,r=…,p=…$…$…); make one with "
                         "`chatgate dashboard passwd`, never write the password itself here")
    n, r, p = (int(match.group(i)) for i in (1, 2, 3))
    if not (MIN_N <= n <= MAX_N and n & (n - 1) == 0 and MIN_R <= r <= 32 and 1 <= p <= 16):
        raise ValueError(f"scrypt parameters out of bounds (n a power of two from {MIN_N} to {MAX_N}, r {MIN_R} to "
                         "32, p 1 to 16)")
    try:
        salt, key = base64.b64decode(match.group(4), validate=True), base64.b64decode(match.group(5), validate=True)
    except binascii.Error:
        salt = key = b""
    if len(salt) < 8 or len(key) < 16:
        raise ValueError("the salt or the key of the hash is not valid base64")
    return n, r, p, salt, key


def _derive(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(password.encode("utf-8", "surrogatepass"), salt=salt, n=n, r=r, p=p,
                          maxmem=256 * r * n + (1 << 20), dklen=KEY_BYTES)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
