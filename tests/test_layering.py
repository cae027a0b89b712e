"""The layering rules of DESIGN section 1, checked on the source with ``ast``.

- The core (``bot/``) imports no platform package (``adapters``) and no platform SDK.
- A platform package imports nothing of the core but the port: ``bot.channels`` (and
  ``bot.messages``, ``bot.errors``). Every import counts, ``TYPE_CHECKING`` ones too.
- No import cycle among the modules of ``bot/`` and ``adapters/``. Only runtime imports
  count here (a function's own imports included: a lazy import is still a runtime edge;
  what sits under ``if TYPE_CHECKING:`` is not). Importing ``a.b.c`` runs ``a/__init__``
  and ``a/b/__init__`` too, so those are edges as well, except the packages the importer
  itself lives in (they are already being imported when it runs).
- No two packages of the core import each other. A package is the first two dotted parts
  of a module's name (``bot.channels``, ``bot.agent``); a top-level module
  (``bot.gateway``) is a package of its own. Here every import counts, ``TYPE_CHECKING``
  ones too: two packages that need each other only for types are still one idea split in
  two, or a port in the wrong place.

Imports made by name with ``importlib`` (the channel and provider registries, the lazy
names of ``bot.config``) are not seen: they are lookups by design, not dependencies.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SDKS = ("telegram", "discord", "slack_bolt", "slack_sdk")
CHANNEL_MAY_IMPORT = ("bot.channels", "bot.messages", "bot.errors")


@dataclass(frozen=True, slots=True)
class Import:
    target: str  # the module named by the statement (``from a.b import c``: a.b, and a.b.c when c is a module)
    runtime: bool  # False under ``if TYPE_CHECKING:``


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def sources(*packages: str) -> dict[str, Path]:
    """Every module of ``packages`` by its dotted name."""
    return {module_name(path): path for package in packages for path in sorted((ROOT / package).rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, runtime: bool = True) -> Iterator[tuple[ast.AST, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for inner in child.body:
                yield inner, False
                yield from _walk(inner, False)
            for inner in child.orelse:
                yield inner, runtime
                yield from _walk(inner, runtime)
            continue
        yield child, runtime
        yield from _walk(child, runtime)


def imports_in(name: str, source: str, *, package: bool, modules: Collection[str]) -> list[Import]:
    """The imports of module ``name`` (a package's ``__init__`` when ``package``), with
    ``from a import b`` naming ``a.b`` too when that is one of ``modules``."""
    home = name if package else name.rpartition(".")[0]
    found: list[Import] = []
    for node, runtime in _walk(ast.parse(source, name)):
        if isinstance(node, ast.Import):
            found += [Import(alias.name, runtime) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from its own package up
                anchor = home.split(".")[: len(home.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.append(Import(base, runtime))
            found += [Import(f"{base}.{alias.name}", runtime) for alias in node.names
                      if f"{base}.{alias.name}" in modules]
    return found


MODULES = sources("bot", "adapters")
PACKAGES = frozenset(name for name, path in MODULES.items() if path.name == "__init__.py")
IMPORTS = {name: imports_in(name, path.read_text(), package=name in PACKAGES, modules=MODULES)
           for name, path in MODULES.items()}


def imports(path: Path) -> list[str]:
    return [i.target for i in IMPORTS[module_name(path)]]


def runtime_edges(imports: Mapping[str, list[Import]], packages: Collection[str]) -> dict[str, set[str]]:
    """Module -> the modules of ours that importing it runs (a target's packages included,
    but not the packages the importer lives in: they are being imported already)."""
    edges: dict[str, set[str]] = {name: set() for name in imports}
    for name, found in imports.items():
        own = {".".join(name.split(".")[:n]) for n in range(1, name.count(".") + 2)}
        if name not in packages:
            own.discard(name)
        for one in found:
            if not one.runtime:
                continue
            parts = one.target.split(".")
            for n in range(1, len(parts) + 1):
                target = ".".join(parts[:n])
                if target in imports and target not in own and target != name:
                    edges[name].add(target)
    return edges


def cycles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def package_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


def package_pairs(imports: Mapping[str, list[Import]]) -> list[tuple[str, str, list[str]]]:
    """Pairs of core packages that import each other, for types too: (a, b, the imports)."""
    uses: dict[tuple[str, str], list[str]] = {}
    for name, found in imports.items():
        if name.split(".")[0] != "bot":
            continue
        for one in found:
            if one.target.split(".")[0] != "bot" or one.target not in imports:
                continue
            a, b = package_of(name), package_of(one.target)
            if a != b:
                uses.setdefault((a, b), []).append(f"{name} -> {one.target}")
    return sorted((a, b, sorted(set(uses[a, b] + uses[b, a]))) for a, b in uses if a < b and (b, a) in uses)


@pytest.mark.parametrize("path", sorted(p for n, p in MODULES.items() if n.startswith("bot")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_the_core_imports_no_platform_package_and_no_platform_sdk(path: Path) -> None:
    bad = [n for n in imports(path) if n.split(".")[0] == "adapters" or n.split(".")[0] in SDKS]
    assert bad == []


@pytest.mark.parametrize("path", sorted(p for n, p in MODULES.items() if n.startswith("adapters")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_platform_packages_import_only_the_port_from_the_core(path: Path) -> None:
    core = [n for n in imports(path) if n.split(".")[0] == "bot"]
    assert [n for n in core if not any(n == ok or n.startswith(ok + ".") for ok in CHANNEL_MAY_IMPORT)] == []


def test_no_import_cycle_among_modules() -> None:
    assert cycles(runtime_edges(IMPORTS, PACKAGES)) == []


def test_no_two_core_packages_import_each_other() -> None:
    assert package_pairs(IMPORTS) == []


def test_the_checks_see_cycles_and_pairs() -> None:
    """The checks themselves, on made-up modules: what the old ``bot/channels`` did (the
    splitter and the walker importing each other lazily; the port and the config each
    importing the other), and what does not count."""
    made_up = {
        "bot.channels": ("from bot.config.types import ChannelConfig", True),
        "bot.channels.split": ("def f():\n    from bot.channels.markdown import render\n", False),
        "bot.channels.markdown": ("from bot.channels.split import Atom\n", False),
        "bot.config": ("", True),
        "bot.config.types": ("", False),
        "bot.config.schema": ("from bot.channels import registry\n", False),
        "bot.channels.registry": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                  "    from bot.config.schema import Config\n", False),
        "bot.gateway": ("from . import channels\n", False),
    }
    found = {name: imports_in(name, source, package=package, modules=made_up)
             for name, (source, package) in made_up.items()}
    assert cycles(runtime_edges(found, {n for n, (_, p) in made_up.items() if p})) == [
        ["bot.channels.markdown", "bot.channels.split"]]  # the registry's import is for types only
    assert [(a, b) for a, b, _ in package_pairs(found)] == [("bot.channels", "bot.config")]
    assert Import("bot.channels", True) in found["bot.gateway"]  # relative imports are resolved
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert package_of("bot.channels.split") == "bot.channels" and package_of("bot.gateway") == "bot.gateway"


@pytest.mark.parametrize("package", sorted(p.name for p in (ROOT / "adapters").iterdir()
                                           if (p / "__init__.py").is_file()))
def test_importing_a_platform_package_loads_no_sdk(package: str) -> None:
    """A spec is looked up at every start (the config is built from them); its SDK loads only
    when the channel is built."""
    code = (f"import sys; import adapters.{package}; from bot.settings import Config; Config(); "
            f"print([m for m in {SDKS!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
