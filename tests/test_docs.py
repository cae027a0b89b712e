"""The documentation: every link of README.md and of docs/ resolves (a file that exists, and a
heading for an anchor), the README stays a front page, and the site builds with
`mkdocs build --strict` (where the docs extra is installed; .ci/run installs it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").rglob("*.md"))
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*```")


def links(path: Path) -> list[str]:
    found, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            found += LINK.findall(re.sub(r"`[^`]*`", "", line))
    return found


def anchors(path: Path) -> set[str]:
    """The ids MkDocs gives the page's headings (lower case, punctuation dropped, spaces as -)."""
    out, fenced = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6} (.*)", line)):
            text = re.sub(r"[`*_]", "", m.group(1)).strip().lower()
            out.add(re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", text)))
    return out


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(page: Path) -> None:
    broken = []
    for link in links(page):
        if re.match(r"[a-z]+:", link):  # https:, mailto: ...
            continue
        target, _, anchor = link.partition("#")
        where = (page.parent / target).resolve() if target else page
        if not where.exists():
            broken.append(f"{link}: no such file")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            broken.append(f"{link}: no heading #{anchor}")
    assert broken == []


def test_the_readme_is_a_front_page() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) < 150


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    mkdocs = shutil.which("mkdocs", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    if mkdocs is None:
        pytest.skip("mkdocs not installed (pip install -e '.[docs]'): the site is not built here")
    done = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
