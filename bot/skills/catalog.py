"""The skills a run may use: the nouns, and the pure choices made on them.

A ``Catalog`` is what one folder of skills held when it was scanned (``bot.skills.scan``):
its valid ``Skill``s and, for the rest, a ``Problem`` each. ``merge`` puts a workspace's
own skills over the shared ones (the workspace's wins for that workspace, and says so);
``search`` ranks skills by the words of a query. No I/O here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from bot.skills.format import SkillInfo


class Origin(StrEnum):
    SHARED = "shared"  # a folder of the owner's (``skills.paths``): read-only to every chat
    WORKSPACE = "workspace"  # the ``skills/`` folder of the run's own workspace


@dataclass(frozen=True, slots=True)
class Skill:
    """One valid skill as found. Its files are read inside ``base`` (the fence), under ``prefix``:
    a shared skill's fence is its own folder (``prefix`` ``"."``), a workspace skill's the
    workspace (``prefix`` ``"skills/<name>"``), walked from the workspace without leaving it."""

    info: SkillInfo
    origin: Origin
    base: Path
    prefix: str
    source: Path  # its SKILL.md as found, for logs and ``chatgate check`` (never shown to the model)
    flagged: tuple[str, ...] = ()  # the input guard's patterns its description matched
    overrides: bool = False  # a workspace's skill hiding a shared one of the same name

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def description(self) -> str:
        return self.info.description


@dataclass(frozen=True, slots=True)
class Problem:
    """A folder that looks like a skill and is not one, and why (one sentence)."""

    path: Path  # the SKILL.md, or the folder, at fault
    why: str


@dataclass(frozen=True, slots=True)
class Catalog:
    skills: tuple[Skill, ...] = ()  # sorted by name, names unique
    problems: tuple[Problem, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.skills or self.problems)


EMPTY = Catalog()


def combine(catalogs: Iterable[Catalog]) -> Catalog:
    """Several shared folders as one: on a name found twice the first folder's skill wins and
    the other is a problem."""
    seen: dict[str, Skill] = {}
    problems: list[Problem] = []
    for catalog in catalogs:
        problems += catalog.problems
        for skill in catalog.skills:
            first = seen.setdefault(skill.name, skill)
            if first is not skill:
                problems.append(Problem(skill.source, f"skill {skill.name!r} is also in {first.source.parent.parent}, "
                                                      "which comes first in skills.paths; this one is ignored"))
    if not seen and not problems:
        return EMPTY
    return Catalog(tuple(sorted(seen.values(), key=lambda s: s.name)), tuple(problems))


def merge(shared: Catalog, own: Catalog) -> tuple[Skill, ...]:
    """The skills of a run, by name: the shared ones, and the workspace's own over them."""
    by_name = {s.name: s for s in shared.skills}
    for skill in own.skills:
        by_name[skill.name] = skill if skill.name not in by_name else _overriding(skill)
    return tuple(by_name[name] for name in sorted(by_name))


def _overriding(skill: Skill) -> Skill:
    return Skill(skill.info, skill.origin, skill.base, skill.prefix, skill.source, skill.flagged, overrides=True)


def find(skills: Sequence[Skill], name: str) -> Skill | None:
    wanted = name.strip().casefold()
    return next((s for s in skills if s.name == wanted), None)


_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an and are as at be by can do for from how i in is it me my of on or please the this to "
                  "use using want what when with you your".split())


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.casefold()) if w not in _STOP]


def _like(query: str, word: str) -> bool:
    """The same word, or one the other starts with when the shorter has 4 letters or more
    (invoice, invoices, invoicing)."""
    if query == word:
        return True
    short, long = sorted((query, word), key=len)
    return len(short) >= 4 and long.startswith(short)


def search(skills: Sequence[Skill], query: str, *, limit: int = 10, hide_flagged: bool = False) -> list[Skill]:
    """The skills that match words of ``query``, best first: a word of the name counts 3, of
    the description 1 (with ``hide_flagged``, a flagged description is not searched: block
    mode withholds it). Ties go by name."""
    wanted = words(query)
    scored: list[tuple[int, str, Skill]] = []
    for skill in skills:
        name_words = skill.name.split("-")
        text_words = set() if hide_flagged and skill.flagged else set(words(skill.description))
        score = 0
        for w in wanted:
            if any(_like(w, n) for n in name_words):
                score += 3
            elif any(_like(w, t) for t in text_words):
                score += 1
        if score:
            scored.append((-score, skill.name, skill))
    return [skill for _, _, skill in sorted(scored, key=lambda t: (t[0], t[1]))[:limit]]
