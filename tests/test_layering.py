"""The layering rules of DESIGN section 1, checked on the source: the core knows no platform,
and a platform package knows only the port."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SDKS = ("telegram", "discord", "slack_bolt", "slack_sdk")
ADAPTER_MAY_IMPORT = ("bot.channels", "bot.messages", "bot.errors")


def imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", modules("bot"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_core_imports_no_adapter_and_no_platform_sdk(path: Path) -> None:
    bad = [n for n in imports(path) if n.split(".")[0] == "adapters" or n.split(".")[0] in SDKS]
    assert bad == []


@pytest.mark.parametrize("path", modules("adapters"), ids=lambda p: str(p.relative_to(ROOT)))
def test_adapters_import_only_the_port_from_the_core(path: Path) -> None:
    core = [n for n in imports(path) if n.split(".")[0] == "bot"]
    assert [n for n in core if not n.startswith(ADAPTER_MAY_IMPORT)] == []


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
