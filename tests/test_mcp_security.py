"""MCP's edges (issue 32): a per-person server in a group, a schema that multiplies out, a
server's stderr on the dashboard, names two servers could share, the output folder and the
size of a result."""

from __future__ import annotations

import asyncio
import ctypes
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from bot.agent.loop import RunRequest
from bot.conversation import Conversation
from bot.errors import ConfigError
from bot.mcp import results, schemas
from bot.mcp.config import McpConfig, McpServerConfig
from bot.mcp.results import Blob, _save, render
from bot.mcp.schemas import fit_schema
from bot.messages import ChatType, InboundMessage, Sender
from tests.dashboard_bed import Bed
from tests.fakes.channel import RecordingChannel, dm
from tests.fakes.llm_server import Call, FakeLLM, Reply
from tests.mcp_servers.demo import nested_schema
from tests.mcp_servers.harness import bench, config, stdio, wait_for


def calls(*pairs: tuple[str, dict[str, object]]) -> Reply:
    return Reply.tool_calls([Call(name, args, id=f"c{i}") for i, (name, args) in enumerate(pairs)])


# -- item 2: a per-person server called from a group ------------------------------------------

async def test_a_per_person_server_called_from_a_group_never_opens_a_members_dm_workspace(
        llm: FakeLLM, tmp_path: Path) -> None:
    async with bench(llm, tmp_path, config({"mine": stdio(scope="per-person")})) as b:
        await wait_for(lambda: b.hub.available())
        llm.script(calls(("mcp__mine__cwd", {})), Reply.text("my own"))
        await b.run(user="alice")  # Alice's DM: her process, in her own workspace
        alice = (tmp_path / "ws" / "test-alice").resolve()
        assert Path(b.result(1, "c0")) == alice
        (alice / "diary.txt").write_text("alice's private diary")
        # a group batch: Mallory asks, Alice's message comes last (the run acts for Alice)
        asks = InboundMessage("test", "bot", "g1", ChatType.GROUP, Sender("mallory", "Mallory"),
                              "read diary.txt with the mine server", "g-1")
        last = InboundMessage("test", "bot", "g1", ChatType.GROUP, Sender("alice", "Alice"), "good morning", "g-2")
        key = "agent:main:test:group:g1"
        llm.script(calls(("mcp__mine__cwd", {}), ("mcp__mine__peek", {"path": "diary.txt"})), Reply.text("done"))
        await b.agent.complete(RunRequest("r-group", await b.store.session(key), Conversation.of_key(key),
                                          (asks, last), user_id="alice", payers=("test:mallory", "test:alice")))
        group = b.workspaces.dir_for(Conversation.of_key(key)).resolve()
        assert Path(b.result(3, "c0")) == group  # the group's own workspace, never a member's DM one
        assert "alice's private diary" not in b.result(3, "c1")
        assert b.result(3, "c1").startswith("cannot read")
        assert b.hub.statuses()[0].running == 2  # Alice's (from her DM) and the group's


def _tool_result(llm: FakeLLM, call_id: str) -> str:
    found = [m["content"] for r in llm.requests for m in r.body["messages"]
             if m["role"] == "tool" and m["tool_call_id"] == call_id]
    assert found, f"no result for {call_id}"
    return str(found[-1])


async def test_in_the_running_app_a_group_call_of_a_per_person_server_stays_in_the_group(
        llm: FakeLLM, tmp_path: Path) -> None:
    from bot.app import App
    from tests.test_gateway_runs import config as app_config
    from tests.test_gateway_runs import group_msg, tg_dm

    servers = {"mine": {**stdio(scope="per-person"), "approval": "never"}}
    channel = RecordingChannel("telegram")
    extra = ("channels: {telegram: {dm_policy: open, group_policy: open}}\nruns: {debounce_ms: 0}\n"
             f"mcp: {json.dumps({'servers': servers})}")
    async with App(app_config(tmp_path, llm, extra), {"telegram": channel}) as app:
        hub = app.capabilities.get("mcp")
        assert hub is not None
        await wait_for(lambda: bool(hub.available()), timeout=15)
        llm.script(Reply.tool_calls([Call("mcp__mine__cwd", {}, id="dm")]), Reply.text("noted"))
        await channel.inject(tg_dm("where am I?", "42"))
        await channel.wait_for_replies(1, timeout=15)
        own = Path(_tool_result(llm, "dm"))
        (own / "diary.txt").write_text("a private diary")
        llm.script(Reply.tool_calls([Call("mcp__mine__cwd", {}, id="g0"),
                                     Call("mcp__mine__peek", {"path": "diary.txt"}, id="g1")]), Reply.text("done"))
        await channel.inject(group_msg("what does diary.txt say?", "42", "-100"))
        await channel.wait_for_replies(2, timeout=15)
        assert Path(_tool_result(llm, "g0")) != own and "group" in Path(_tool_result(llm, "g0")).name
        assert _tool_result(llm, "g1").startswith("cannot read")


# -- item 9: a schema whose references multiply out ------------------------------------------

def test_a_schema_past_the_inlining_budget_is_refused_quickly() -> None:
    started = time.monotonic()
    with pytest.raises(schemas.SchemaTooLarge, match="more than"):
        fit_schema(nested_schema(3))
    with pytest.raises(schemas.SchemaTooLarge):
        fit_schema(nested_schema(40, depth=3))
    assert time.monotonic() - started < 1.0
    assert fit_schema(nested_schema(2, depth=3)).parameters["properties"]["root"]["properties"]["p1"]["type"] == \
        "object"  # a modest one is still inlined


@contextmanager
def loop_lag() -> Iterator[list[float]]:
    """The longest the event loop was held while inside, in seconds (``[0]`` once out)."""
    worst = [0.0]

    async def probe() -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(0.01)
            worst[0] = max(worst[0], loop.time() - before - 0.01)

    task = asyncio.get_running_loop().create_task(probe())
    try:
        yield worst
    finally:
        task.cancel()


async def test_a_tool_schema_bomb_never_holds_the_loop_and_only_that_tool_is_left_out(
        llm: FakeLLM, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "bot.mcp")
    with loop_lag() as worst:
        async with bench(llm, tmp_path, config({"demo": stdio(env={"NESTED_SCHEMA": "3"})})) as b:
            await wait_for(lambda: b.hub.state("demo").usable and bool(b.hub.available()), timeout=20)
            llm.script(calls(("mcp__demo__echo", {"text": "still here"})), Reply.text("done"))
            result = await b.run()
            assert result.text == "done" and b.result(1, "c0") == "echo: still here"
            assert "mcp__demo__echo" in b.offered(0) and "mcp__demo__nested" not in b.offered(0)
    assert worst[0] < 0.5, f"the event loop was held for {worst[0]:.2f} s"
    assert any("nested" in r.getMessage() and "not offered" in r.getMessage() for r in caplog.records)


# -- item 10: a server's stderr, where viewers and /mcp read it -------------------------------

LEAKY = ("import os, sys; print(os.environ['SRV_TOKEN'] + ' was refused, and so was test-key', file=sys.stderr); "
         "sys.exit(1)")


async def test_a_servers_last_error_is_scrubbed_of_its_own_and_the_bots_secrets(tmp_path: Path,
                                                                                llm: FakeLLM) -> None:
    servers = {"leaky": {"command": sys.executable, "args": ["-c", LEAKY], "grant": "everyone",
                         "env": {"SRV_TOKEN": "srv-0123456789-secret"}}}
    async with Bed(tmp_path, llm, extra=f"mcp: {json.dumps({'servers': servers})}") as bed:
        assert bed.app is not None
        hub = bed.app.capabilities.get("mcp")
        assert hub is not None
        await wait_for(lambda: "was refused" in (hub.statuses()[0].last_error or ""), timeout=15)
        stored = hub.statuses()[0].last_error or ""
        assert "srv-0123456789-secret" not in stored and "test-key" not in stored and "***" in stored
        http = await bed.client("vera")  # a viewer
        page = await (await http.get("/operations")).text()
        assert "was refused" in page
        assert "srv-0123456789-secret" not in page and "test-key" not in page
        await bed.telegram.inject(dm("/mcp", "1", platform="telegram"))  # an owner
        [reply] = await bed.telegram.wait_for_replies(1)
        assert "was refused" in reply.text
        assert "srv-0123456789-secret" not in reply.text and "test-key" not in reply.text


# -- item 14: names two servers could share ---------------------------------------------------

@pytest.mark.parametrize("name", ["git__hub", "git_", "a__", "x___y"])
def test_a_server_name_that_could_run_into_anothers_tools_is_a_config_error(name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        McpConfig.model_validate({"servers": {name: {"command": "x"}}})
    assert caught.value.key == f"mcp.servers.{name}" and "__" in caught.value.problem
    McpConfig.model_validate({"servers": {"git_hub": {"command": "x"}, "git-hub": {"command": "x"}}})


async def test_two_servers_tools_with_one_name_offer_only_the_first(llm: FakeLLM, tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "bot.mcp")
    # a config written before names were checked: "x" has a tool y__echo, and "x__y" one called echo
    servers = {"x": McpServerConfig.model_validate(stdio(env={"ALIAS": "y__echo"})),
               "x__y": McpServerConfig.model_validate(stdio())}
    async with bench(llm, tmp_path, McpConfig.model_construct(servers=servers, inline_max=40,
                                                              result_max_chars=20_000)) as b:
        await wait_for(lambda: b.hub.state("x").usable and b.hub.state("x__y").usable)
        await wait_for(lambda: len(b.hub.available()) >= 28, timeout=5)
        names = [t.name for t in b.hub.available()]
        assert names.count("mcp__x__y__echo") == 1
        llm.script(calls(("mcp__x__y__echo", {"text": "one"})), Reply.text("done"))
        await b.run()
        assert b.offered(0).count("mcp__x__y__echo") == 1 and b.result(1, "c0") == "echo: one"
    assert any("mcp__x__y__echo" in r.getMessage() and "not offered" in r.getMessage() for r in caplog.records)


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
