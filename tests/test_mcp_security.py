"""MCP's edges (issue 32): names two servers could share, the output folder and the size of a
result."""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from bot.errors import ConfigError
from bot.mcp import results
from bot.mcp.config import McpConfig
from bot.mcp.results import Blob, _save, render
from tests.fakes.llm_server import Call, FakeLLM, Reply
from tests.mcp_servers.harness import bench, config, stdio, wait_for


def calls(*pairs: tuple[str, dict[str, object]]) -> Reply:
    return Reply.tool_calls([Call(name, args, id=f"c{i}") for i, (name, args) in enumerate(pairs)])


# -- item 14: names two servers could share ---------------------------------------------------

@pytest.mark.parametrize("name", ["git__hub", "git_", "a__", "x___y"])
def test_a_server_name_that_could_run_into_anothers_tools_is_a_config_error(name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        McpConfig.model_validate({"servers": {name: {"command": "x"}}})
    assert caught.value.key == f"mcp.servers.{name}" and "__" in caught.value.problem
    McpConfig.model_validate({"servers": {"git_hub": {"command": "x"}, "git-hub": {"command": "x"}}})


# -- also looked at: the output folder and the size of a result -------------------------------

def _exchange() -> Any:
    """``renameat2(RENAME_EXCHANGE)``: two names swapped at once, as a racing command would."""
    libc = ctypes.CDLL(None, use_errno=True)
    call = libc.renameat2
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]

    def exchange(a: Path, b: Path) -> None:
        if call(-100, os.fsencode(a), -100, os.fsencode(b), 2) != 0:  # AT_FDCWD, RENAME_EXCHANGE
            raise OSError(ctypes.get_errno(), "renameat2")

    return exchange


def test_a_link_swapped_in_for_the_output_folder_never_leads_a_write_out(tmp_path: Path) -> None:
    """A command in the workspace swaps ``mcp-output`` with a link to a folder outside, over and
    over, while results are saved: nothing may land outside."""
    exchange = _exchange()
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    folder, link = workspace / "mcp-output", workspace / "link"
    folder.mkdir()
    link.symlink_to(outside)
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            exchange(folder, link)

    racer = threading.Thread(target=swap)
    racer.start()
    saved = 0
    try:
        deadline = time.monotonic() + 2.0
        n = 0
        while time.monotonic() < deadline and not any(outside.iterdir()):
            n += 1
            saved += _save(workspace, f"r{n}.txt", b"result").startswith("saved")
    finally:
        stop.set()
        racer.join()
    assert not list(outside.iterdir()), f"a write followed the link out of the workspace (after {n} saves)"
    assert saved > 0  # the folder was there part of the time, and used


def test_a_results_parts_are_capped_before_they_are_joined(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(results, "MAX_RESULT_BYTES", 1_000, raising=False)
    text = types.TextContent(type="text", text="a" * 600)
    image = types.ImageContent(type="image", data="aGk=" * 100, mime_type="image/png")  # 300 bytes
    rendered = render(types.CallToolResult(content=[text, text, image, text]))
    kept = [p for p in rendered.pieces if isinstance(p, str)]
    assert sum(len(p) for p in kept if not p.startswith("[")) <= 1_000
    assert not any(isinstance(p, Blob) for p in rendered.pieces)  # past the cap: left out
    assert rendered.cut > 0 and "cut" in kept[-1]


async def test_an_oversized_result_is_cut_before_it_is_saved(llm: FakeLLM, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "bot.mcp")
    monkeypatch.setattr(results, "MAX_RESULT_BYTES", 100_000, raising=False)
    async with bench(llm, tmp_path, config({"demo": stdio()})) as b:
        await wait_for(lambda: b.hub.state("demo").usable)
        llm.script(calls(("mcp__demo__big", {"chars": 300_000})), Reply.text("done"))
        await b.run()
        said = b.result(1, "c0")
        assert "is saved in the workspace as mcp-output/" in said
        [saved] = (tmp_path / "ws" / "test-u1" / "mcp-output").iterdir()
        whole = saved.read_text()
        assert len(whole) < 101_000 and "cut" in whole.splitlines()[-1]
    assert any("cut" in r.getMessage() and "demo" in r.getMessage() for r in caplog.records)
