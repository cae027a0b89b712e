"""One line of ``chatgate doctor``: what was checked, how it went, and what to do about it.

A platform's package brings its own live checks (``ChannelSpec.doctor``: its token, what the
platform's settings must allow), and so may a capability (``CapabilitySpec.doctor``); the
doctor prints them all as one table and fails when one of them failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    OK = "ok"
    WARN = "warn"  # works, but not as it should (nothing fails because of it)
    FAIL = "fail"  # the bot will not work as configured: the doctor exits non-zero
    SKIP = "skip"  # not checked here (off, or nothing to check)


@dataclass(frozen=True, slots=True)
class Check:
    name: str  # what was checked: "telegram token", "database"
    outcome: Outcome
    detail: str  # what was found, short; never a secret
    advice: str = ""  # one line: what to do (for warn and fail)

    @classmethod
    def ok(cls, name: str, detail: str) -> Check:
        return cls(name, Outcome.OK, detail)

    @classmethod
    def warn(cls, name: str, detail: str, advice: str) -> Check:
        return cls(name, Outcome.WARN, detail, advice)

    @classmethod
    def fail(cls, name: str, detail: str, advice: str) -> Check:
        return cls(name, Outcome.FAIL, detail, advice)

    @classmethod
    def skip(cls, name: str, detail: str) -> Check:
        return cls(name, Outcome.SKIP, detail)

    @property
    def failed(self) -> bool:
        return self.outcome is Outcome.FAIL
