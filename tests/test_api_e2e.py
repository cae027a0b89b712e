"""The OpenAI-compatible API through the official ``openai`` SDK against ``chatgate run`` (a real
process) with the fake LLM: models, a plain and a streamed completion with usage, a Responses
stream continued by ``previous_response_id``, a resent history continuing its session, keys
(none, revoked) refused, client-side tools refused, the rate limit's 429 with ``Retry-After``,
a budget counting API turns, a disconnect stopping the run (the fake LLM's stream closed), and
two people who never see each other's workspace."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.fakes.llm_server import FakeLLM, Reply, Tokens

pytestmark = pytest.mark.timeout(90)
ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Bot:
    """``chatgate run`` with the API on, and its keys made by ``chatgate api key create``."""

    def __init__(self, tmp: Path, llm: FakeLLM) -> None:
        self.tmp, self.llm = tmp, llm
        self.port = free_port()
        self.log = tmp / "bot.log"
        self.proc: asyncio.subprocess.Process | None = None
        self.path = tmp / "config.yaml"

    def write(self, limits: dict[str, Any] | None = None, extra: dict[str, Any] | None = None) -> None:
        config = {
            "agent": {"model": "fake-model", "identity_links": {"alice": ["telegram:42"], "bob": ["telegram:43"]},
                      "dm_scope": "linked"},
            "providers": {"openai": {"api_key": "test-key", "base_url": self.llm.openai_base_url}},
            "storage": {"path": str(self.tmp / "chatgate.db")},
            "workspace": {"root": str(self.tmp / "workspaces")},
            "logging": {"level": "INFO"},
            "channels": {"console": {"enabled": False},
                         "telegram": {"enabled": False, "dm_policy": "allowlist", "allow_from": [42, 43]}},
            "limits": limits or {"messages_per_minute": None},
            "api": {"enabled": True, "bind": f"127.0.0.1:{self.port}"},
            **(extra or {}),
        }
        self.path.write_text(json.dumps(config, indent=2))

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL", "_TOKEN"))}
        env["PYTHONPATH"] = str(ROOT)
        return env

    async def cli(self, *args: str) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot", *args, "-c", str(self.path),
                                                    cwd=self.tmp, env=self.env(), stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
        assert proc.returncode is not None
        return proc.returncode, out.decode()

    async def key(self, person: str) -> str:
        code, out = await self.cli("api", "key", "create", person, "--name", "test")
        assert code == 0, out
        return out.strip().splitlines()[-1]

    async def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot", "run", "-c", str(self.path), cwd=self.tmp, env=self.env(),
                stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + START_TIMEOUT
        while not await self._listening():
            if self.proc.returncode is not None or time.monotonic() > deadline:
                raise AssertionError(f"the API did not listen (exit {self.proc.returncode}):\n{self.tail()}")
            await asyncio.sleep(0.05)

    async def _listening(self) -> bool:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", self.port)
        except OSError:
            return False
        writer.close()
        return True

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def client(self, key: str, **kw: Any) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(api_key=key, base_url=self.base_url, max_retries=0, timeout=20, **kw)

    async def close(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as fake:
        yield fake


@pytest.fixture
async def bot(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[Bot]:
    b = Bot(tmp_path, llm)
    b.write()
    try:
        yield b
    finally:
        await b.close()


def user_texts(llm: FakeLLM, index: int) -> list[str]:
    body = llm.requests[index].body
    return [m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
            for m in body["messages"] if m["role"] == "user"]


async def test_models_plain_and_streamed_completions_with_usage(bot: Bot, llm: FakeLLM) -> None:
    key = await bot.key("alice")
    await bot.start()
    client = bot.client(key)
    models = await client.models.list()
    assert [m.id for m in models.data] == ["chatgate"]

    llm.script(Reply.text("Hello **Alice**.", usage=Tokens(input=120, output=7)))
    plain = await client.chat.completions.create(model="chatgate", messages=[
        {"role": "system", "content": "the client's own prompt"}, {"role": "user", "content": "hi there"}])
    assert plain.choices[0].message.content == "Hello **Alice**."
    assert plain.choices[0].finish_reason == "stop"
    assert plain.usage is not None and (plain.usage.prompt_tokens, plain.usage.completion_tokens) == (120, 7)
    assert "hi there" in user_texts(llm, 0)[-1]

    # the client resends the whole history: the same session (the model sees the first exchange once)
    llm.script(Reply.text("Fine, thanks", chunk_size=3, delay=0.05, usage=Tokens(input=200, output=4)))
    stream = await client.chat.completions.create(model="chatgate", stream=True,
                                                  stream_options={"include_usage": True}, messages=[
        {"role": "user", "content": "hi there"}, {"role": "assistant", "content": "Hello **Alice**."},
        {"role": "user", "content": "how are you?"}])
    pieces, usage, finish = [], None, None
    async for chunk in stream:
        if chunk.choices:
            pieces.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage is not None:
            usage = chunk.usage
    assert "".join(pieces) == "Fine, thanks" and finish == "stop"
    assert len([p for p in pieces if p]) >= 2  # it streamed, in pieces
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (200, 4)
    second = llm.requests[-1].body["messages"]
    said = [m.get("content") for m in second if m["role"] in ("user", "assistant")]
    assert any("hi there" in str(s) for s in said) and said[-1] and "how are you?" in str(said[-1])
    assert sum("hi there" in str(s) for s in said) == 1

    # a history that does not match starts a new session: the model does not see the first one
    llm.script(Reply.text("New here"))
    await client.chat.completions.create(model="chatgate", messages=[
        {"role": "user", "content": "something else"}, {"role": "assistant", "content": "never said"},
        {"role": "user", "content": "next"}])
    assert not any("hi there" in str(m.get("content")) for m in llm.requests[-1].body["messages"])


async def test_a_responses_stream_continued_by_previous_response_id(bot: Bot, llm: FakeLLM) -> None:
    key = await bot.key("alice")
    await bot.start()
    client = bot.client(key)
    llm.script(Reply.text("The code word is PLUM.", chunk_size=4, delay=0.05, usage=Tokens(input=90, output=6)))
    events = []
    async with client.responses.stream(model="chatgate", input="remember the code word") as stream:
        async for event in stream:
            events.append(event.type)
        final = await stream.get_final_response()
    assert events[0] == "response.created" and events[-1] == "response.completed"
    assert events.count("response.output_text.delta") >= 2
    assert final.output_text == "The code word is PLUM."
    assert final.usage is not None and (final.usage.input_tokens, final.usage.output_tokens) == (90, 6)

    llm.script(Reply.text("It was PLUM."))
    follow = await client.responses.create(model="chatgate", input="what was it?", previous_response_id=final.id)
    assert follow.output_text == "It was PLUM."
    assert any("remember the code word" in str(m.get("content")) for m in llm.requests[-1].body["messages"])

    with pytest.raises(openai.NotFoundError):
        await client.responses.create(model="chatgate", input="x", previous_response_id="resp_unknown")


async def test_keys_missing_revoked_and_client_tools_refused(bot: Bot, llm: FakeLLM) -> None:
    key = await bot.key("telegram:42")
    await bot.start()
    with pytest.raises(openai.AuthenticationError) as missing:
        await bot.client("cg-not-a-real-key-at-all-0000").models.list()
    assert missing.value.status_code == 401 and "not valid" in str(missing.value)
    client = bot.client(key)
    with pytest.raises(openai.BadRequestError) as tools:
        await client.chat.completions.create(model="chatgate", messages=[{"role": "user", "content": "x"}],
                                             tools=[{"type": "function", "function": {"name": "f",
                                                                                      "parameters": {}}}])
    assert tools.value.status_code == 400 and tools.value.body["param"] == "tools"  # type: ignore[index]
    with pytest.raises(openai.NotFoundError):
        await client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert len(llm.requests) == 0
    code, out = await bot.cli("api", "key", "list")
    key_id = re.search(r"^\s*(\d+)\s+telegram:42", out, re.M)
    assert code == 0 and key_id is not None and key not in out
    code, _ = await bot.cli("api", "key", "revoke", key_id.group(1))
    assert code == 0
    with pytest.raises(openai.AuthenticationError):
        await client.models.list()


async def test_rate_limit_429_with_retry_after_and_budget_counts_api_turns(tmp_path: Path, llm: FakeLLM) -> None:
    b = Bot(tmp_path, llm)
    b.write(limits={"messages_per_minute": 2, "daily_tokens": 1000})
    try:
        key = await b.key("bob")
        await b.start()
        client = b.client(key)
        llm.script(Reply.text("one", usage=Tokens(input=700, output=400)))
        await client.chat.completions.create(model="chatgate", messages=[{"role": "user", "content": "first"}])
        with pytest.raises(openai.RateLimitError) as budget:  # 1100 tokens of 1000 used: today's budget is spent
            await client.chat.completions.create(model="chatgate", messages=[{"role": "user", "content": "second"}])
        assert budget.value.response.headers["retry-after"].isdigit()
        assert "budget" in str(budget.value)
        assert len(llm.requests) == 1
    finally:
        await b.close()

    b2 = Bot(tmp_path / "rate", llm)
    (tmp_path / "rate").mkdir()
    b2.write(limits={"messages_per_minute": 1})
    try:
        key = await b2.key("bob")
        await b2.start()
        client = b2.client(key)
        await client.chat.completions.create(model="chatgate", messages=[{"role": "user", "content": "first"}])
        with pytest.raises(openai.RateLimitError) as rate:
            await client.chat.completions.create(model="chatgate", messages=[{"role": "user", "content": "again"}])
        assert rate.value.status_code == 429
        assert rate.value.response.headers["retry-after"] == "60"
    finally:
        await b2.close()


async def test_a_client_that_disconnects_stops_the_run(bot: Bot, llm: FakeLLM) -> None:
    key = await bot.key("alice")
    await bot.start()
    llm.script(Reply.text("word " * 400, chunk_size=5, delay=0.05))
    async with httpx.AsyncClient(timeout=20) as http:
        async with http.stream("POST", f"{bot.base_url}/chat/completions",
                               headers={"Authorization": f"Bearer {key}"},
                               json={"model": "chatgate", "stream": True,
                                     "messages": [{"role": "user", "content": "talk a lot"}]}) as response:
            assert response.status_code == 200
            seen = 0
            async for line in response.aiter_lines():
                if line.startswith("data:") and "word" in line:
                    seen += 1
                    if seen >= 3:
                        break
    # the client is gone: the run stops and the fake LLM's stream is closed (not run to its end)
    disconnected = llm.requests[0].disconnected
    await asyncio.wait_for(disconnected.wait(), 5)
    llm.script(Reply.text("still here"))
    again = await bot.client(key).chat.completions.create(model="chatgate",
                                                          messages=[{"role": "user", "content": "hello?"}])
    assert again.choices[0].message.content == "still here"


async def test_two_peoples_keys_never_see_each_others_workspace(bot: Bot, llm: FakeLLM) -> None:
    alice, bob = await bot.key("alice"), await bot.key("bob")
    await bot.start()
    secret = "alice-secret-7731"
    llm.script(Reply.tool_calls([_write("notes.txt", secret)]), Reply.text("saved"))
    await bot.client(alice).chat.completions.create(model="chatgate", messages=[
        {"role": "user", "content": "save my note"}], extra_headers={"X-Chatgate-Session": "notes"})
    llm.script(Reply.tool_calls([_read("notes.txt")]), Reply.text("nothing"))
    await bot.client(bob).chat.completions.create(model="chatgate", messages=[
        {"role": "user", "content": "read the note"}], extra_headers={"X-Chatgate-Session": "notes"})
    assert (bot.tmp / "workspaces" / "alice" / "notes.txt").read_text() == secret
    assert not (bot.tmp / "workspaces" / "bob" / "notes.txt").exists()
    bob_bodies = json.dumps([r.body for r in llm.requests[2:]])
    assert secret not in bob_bodies and "save my note" not in bob_bodies


def _write(path: str, content: str) -> Any:
    from tests.fakes.llm_server import Call

    return Call("write_file", {"path": path, "content": content}, id="call_w")


def _read(path: str) -> Any:
    from tests.fakes.llm_server import Call

    return Call("read_file", {"path": path}, id="call_r")
