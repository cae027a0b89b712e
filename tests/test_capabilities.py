"""The capability registry (issue 33): a capability is one package found through one line.

Every registered spec loads and names itself; its commands are in the one table (menus and
/help); the hubs of the message flow name no capability package that has moved behind the
registry; a capability that is switched off loads nothing and its command answers one sentence.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from bot.capabilities import registry
from bot.commands import BY_NAME, MENU, NAMES, help_text, parse_command
from tests.fakes.channel import dm
from tests.fakes.llm_server import FakeLLM
from tests.test_gateway_runs import Running, running  # noqa: F401,F811 - the fixture

ROOT = Path(__file__).resolve().parents[1]
HUBS = ("bot/intake/flow.py", "bot/turns.py", "bot/commands.py", "bot/agent/loop.py")


def _capability_packages() -> tuple[str, ...]:
    """The packages of the registered capabilities (``bot.mcp`` of ``bot.mcp.capability:SPEC``)."""
    return tuple(".".join(path.partition(":")[0].split(".")[:2]) for path in registry.BUILTIN.values())


MOVED = _capability_packages()


def test_every_registered_spec_loads_under_its_name() -> None:
    for name in registry.BUILTIN:
        assert registry.spec(name).name == name


def test_a_capabilitys_commands_are_in_the_one_table() -> None:
    for spec in registry.specs():
        for command in spec.commands:
            assert BY_NAME[command.name] is command and command.capability == spec.name
            assert parse_command(f"/{command.name} x") is not None
    assert {"model", "remind", "tasks", "tz", "mcp"} <= set(NAMES)
    assert ("model", "Show or change this chat's model") in MENU
    assert "/remind – a reminder" in help_text()
    assert len(NAMES) == len(set(NAMES))


def _named(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    named = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    return named | {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}


@pytest.mark.parametrize("path", HUBS)
def test_the_hubs_name_no_capability_package(path: str) -> None:
    """No hub imports a capability that has moved behind the registry, not even for types."""
    assert sorted(n for n in _named(ROOT / path) if n.startswith(MOVED)) == []


def test_no_module_outside_a_capability_imports_it_by_name() -> None:
    """Only the registry's line names a capability package: no module of bot/ or adapters/
    outside it imports it, not even for types."""
    found = []
    for path in sorted((*ROOT.glob("bot/**/*.py"), *ROOT.glob("adapters/**/*.py"))):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for package in MOVED:
            if module == package or module.startswith(package + "."):
                continue
            found += [f"{module} imports {n}" for n in _named(path) if n == package or n.startswith(package + ".")]
    assert found == []


def test_a_capability_that_is_off_loads_nothing(tmp_path: Path) -> None:
    """Without mcp.servers the app's start-up path never imports the hub (nor the SDK)."""
    code = ("import sys, bot.app, bot.commands; bot.commands.help_text(); "
            "print([m for m in ('bot.mcp.hub', 'mcp', 'bot.schedules.scheduler') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


async def test_a_command_of_a_capability_that_is_off_answers_one_sentence(running: Running, llm: FakeLLM) -> None:
    _, channel = await running.start("channels: {telegram: {owners: ['42']}}")
    await channel.inject(dm("/mcp", "42", platform="telegram"))
    [reply] = await channel.wait_for_replies(1)
    assert reply.text == "No MCP servers are configured."
    assert not llm.requests


def test_a_capability_brings_its_section_table_and_subcommand(tmp_path: Path) -> None:
    """One registry line: its section under ``tools:``, its table, its subcommand (in a child
    process, so that the registry of this one stays as it is)."""
    config = tmp_path / "config.yaml"
    config.write_text(f"storage:\n  path: {tmp_path}/db.sqlite\ntools:\n  demo:\n    enabled: true\n"
                      "    greeting: hello there\n")
    script = (
        "import sys\n"
        "from bot.capabilities import registry\n"
        "registry.BUILTIN['demo'] = 'tests.capability_demo:SPEC'\n"
        "from bot.cli import main\n"
        "from bot.settings import load_config\n"
        f"c = load_config({str(config)!r}, require_secrets=False)\n"
        "print(c.tools.demo.greeting, c.tools.exec.enabled, sorted(c.capability_sections()))\n"
        "print(c.describe())\n"
        f"sys.exit(main(['demo-hello', '-c', {str(config)!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parent.parent)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("hello there False [") and "'demo'" in lines[0]
    assert "demo       says hello there" in lines
    assert lines[-1] == "hello there"
    bad = tmp_path / "bad.yaml"
    bad.write_text("tools:\n  demo:\n    greting: x\n")
    wrong = subprocess.run([sys.executable, "-c", script.replace(str(config), str(bad))], capture_output=True,
                           text=True, timeout=60, cwd=Path(__file__).parent.parent)
    assert "tools.demo.greting" in wrong.stderr
