"""Keeping the catalogs current without rescanning on the hot path.

- ``SharedSkills``: the owner's folders (``skills.paths``), scanned once at start; a run
  checks their stamps at most once per ``every`` seconds (a clock is injected) and only a
  folder whose stamp moved is scanned again. With no folder there, that is one stat a second.
- ``WorkspaceSkills``: each workspace's ``skills/``, whose stamp is checked on every run
  (one stat when the folder is missing, one more per skill when it is there) and scanned
  again only when it moved; the catalogs of the last ``size`` workspaces are kept.

Each problem (a folder that is not a skill) is logged once, as a warning naming the file,
when a scan first finds it; a description the input guard flags is logged the same way.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path

from bot.agent.guard import EVENT, GuardMode
from bot.skills.catalog import EMPTY, Catalog, combine
from bot.skills.scan import Scanned, shared_folder, stamp, workspace_folder
from bot.workspace import SKILLS_FOLDER

log = logging.getLogger(__name__)


def announce(before: Catalog, after: Catalog, guard: GuardMode) -> None:
    """Log what ``after`` found that ``before`` had not: problems, and flagged descriptions."""
    known = set(before.problems)
    for problem in after.problems:
        if problem not in known:
            log.warning("skill skipped: %s: %s", problem.path, problem.why)
    flagged = {(s.source, s.flagged) for s in before.skills}
    for skill in after.skills:
        if skill.flagged and (skill.source, skill.flagged) not in flagged:
            log.log(logging.INFO if guard is GuardMode.LOG else logging.WARNING,
                    "%s skill=%s patterns=%s mode=%s: the description of %s looks like prompt injection%s",
                    EVENT, skill.name, ",".join(skill.flagged), guard, skill.source,
                    "; it is withheld from the prompt" if guard is GuardMode.BLOCK else "",
                    extra={"event": EVENT, "patterns": skill.flagged})


class SharedSkills:
    """The owner's folders of skills, as one catalog (the first folder wins on a name)."""

    def __init__(self, folders: Sequence[Path], guard: GuardMode, *, every: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.folders = tuple(folders)
        self._guard = guard
        self._every = every
        self._clock = clock
        self._scanned = [shared_folder(folder, guard) for folder in self.folders]
        self._catalog = combine(s.catalog for s in self._scanned)
        announce(EMPTY, self._catalog, guard)
        if self._catalog.skills:
            log.info("shared skills: %s", ", ".join(s.name for s in self._catalog.skills))
        self._checked = clock()

    def catalog(self) -> Catalog:
        """The catalog now: the folders' stamps are checked when ``every`` seconds have passed."""
        now = self._clock()
        if now - self._checked < self._every:
            return self._catalog
        self._checked = now
        changed = False
        for i, (folder, scanned) in enumerate(zip(self.folders, self._scanned)):
            if stamp(folder, scanned.names, follow=True) != scanned.stamp:
                self._scanned[i] = shared_folder(folder, self._guard)
                changed = True
        if changed:
            before, self._catalog = self._catalog, combine(s.catalog for s in self._scanned)
            announce(before, self._catalog, self._guard)
            log.info("shared skills rescanned: %d found", len(self._catalog.skills))
        return self._catalog


class WorkspaceSkills:
    """The ``skills/`` of each workspace, cached by stamp (LRU of ``size`` workspaces)."""

    def __init__(self, guard: GuardMode, *, size: int = 1024) -> None:
        self._guard = guard
        self._size = size
        self._cache: OrderedDict[Path, Scanned] = OrderedDict()

    def catalog(self, workspace: Path) -> Catalog:
        cached = self._cache.get(workspace)
        if cached is not None and stamp(workspace / SKILLS_FOLDER, cached.names, follow=False) == cached.stamp:
            self._cache.move_to_end(workspace)
            return cached.catalog
        scanned = workspace_folder(workspace, self._guard)
        announce(cached.catalog if cached is not None else EMPTY, scanned.catalog, self._guard)
        self._cache[workspace] = scanned
        self._cache.move_to_end(workspace)
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return scanned.catalog
