"""api: the OpenAI-compatible API beside Telegram, in one bot process: the bot's CPU per message
through each, and how much later than the fake LLM's own first token a streamed answer's first
content reaches an API client."""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import sys
import time

import aiohttp

from bench.common import JSON, Stack, running_stack
from bench.report import Figure, Goal
from tests.fakes.llm_server import Reply

NAME = "api"
HOW = ("The bot runs Telegram and the API (api.enabled) at once; the fake LLM answers at once (an echo). CPU: "
       "N messages one at a time (N = 200, quick: 50) after a warm-up per chat, spread over 20 Telegram DMs "
       "(push to sendMessage) and then over 20 API sessions (named by 'user', one person's key, POST "
       "/v1/chat/completions without streaming, over one kept-alive connection); figure = the bot process's "
       "user+system time over the messages / N. First byte: streamed completions (stream: true), 20 (quick: 5), "
       "one at a time in the warmed API sessions, the fake LLM streaming 40 chunks 10 ms apart; the fake's own "
       "first token = its request arriving to its first content chunk written; the API's = the client's request "
       "sent to the first SSE line with content read; the overhead = that line read minus the fake writing its "
       "first chunk (one monotonic clock).")
PERSON = "telegram:4242"
FIRST_CHAT = 6000
CHATS = 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def run(quick: bool) -> list[Figure]:
    messages, streams = (50, 5) if quick else (200, 20)
    port = _free_port()
    extra: JSON = {"api": {"enabled": True, "bind": f"127.0.0.1:{port}"}, "logging": {"level": "WARNING"}}
    async with running_stack() as stack:
        key = await _key(stack, extra)
        bot = await stack.start_bot(extra=extra)
        base = f"http://127.0.0.1:{port}/v1"
        headers = {"Authorization": f"Bearer {key}"}
        async with aiohttp.ClientSession(headers=headers, timeout=aiohttp.ClientTimeout(total=30)) as http:
            await _listening(http, base)
            chats = [FIRST_CHAT + i for i in range(CHATS)]
            await asyncio.gather(*(stack.ask(c, "warm up") for c in chats))
            for n in range(CHATS):
                await _complete(http, base, f"bench-{n}", "warm up")

            cpu = bot.cpu_seconds()
            wrong = 0
            for i in range(messages):
                _, reply = await stack.ask(chats[i % CHATS], f"tg {i}")
                wrong += reply["plain"] != f"echo: tg {i}"
            telegram_cpu = (bot.cpu_seconds() - cpu) / messages

            cpu = bot.cpu_seconds()
            for i in range(messages):
                wrong += await _complete(http, base, f"bench-{i % CHATS}", f"api {i}") != f"echo: api {i}"
            api_cpu = (bot.cpu_seconds() - cpu) / messages

            own, api, over = [], [], []
            for i in range(streams):
                index = len(stack.llm.reports)
                await stack.llm.script(Reply.text("word " * 40, chunk_size=5, delay=0.01))
                sent_at, first_at = await _first_content(http, base, f"bench-{i % CHATS}", f"stream {i}")
                requested, first_token = await stack.llm.request(index), await stack.llm.first_token(index)
                own.append(first_token - requested)
                api.append(first_at - sent_at)
                over.append(first_at - first_token)
    figures = [
        Figure(NAME, f"Telegram: bot CPU per message ({messages} msgs)", telegram_cpu * 1000, "ms", Goal("<", 3)),
        Figure(NAME, f"API: bot CPU per message ({messages} msgs)", api_cpu * 1000, "ms", Goal("<", 3)),
        Figure(NAME, f"fake LLM's own first token, median ({streams} streams)", statistics.median(own) * 1000, "ms"),
        Figure(NAME, "API first streamed content (request to first SSE content), median",
               statistics.median(api) * 1000, "ms"),
        Figure(NAME, "API first content after the fake's first token, median", statistics.median(over) * 1000, "ms",
               Goal("<", 50)),
        Figure(NAME, "API first content after the fake's first token, worst", max(over) * 1000, "ms",
               Goal("<", 100)),
    ]
    if wrong:
        figures.append(Figure(NAME, "answers that were not the echo", wrong, goal=Goal("=", 0)))
    return figures


async def _key(stack: Stack, extra: JSON) -> str:
    """A key for ``PERSON`` (``chatgate api key create``), before the bot starts."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot", "api", "key", "create", PERSON,
                                                "--name", "bench", "-c", str(stack.config(extra=extra)),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"chatgate api key create failed: {out.decode()}")
    return out.decode().strip().splitlines()[-1]


async def _listening(http: aiohttp.ClientSession, base: str) -> None:
    deadline = time.monotonic() + 15
    while True:
        try:
            async with http.get(f"{base}/models") as response:
                if response.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the API did not answer /v1/models")
        await asyncio.sleep(0.05)


async def _complete(http: aiohttp.ClientSession, base: str, user: str, text: str) -> str:
    body = {"model": "chatgate", "user": user, "messages": [{"role": "user", "content": text}]}
    async with http.post(f"{base}/chat/completions", json=body) as response:
        answer: JSON = await response.json()
    if response.status != 200:
        raise RuntimeError(f"the API answered {response.status}: {answer}")
    return str(answer["choices"][0]["message"]["content"])


async def _first_content(http: aiohttp.ClientSession, base: str, user: str, text: str) -> tuple[float, float]:
    """(request sent, first SSE line with content read), ``time.monotonic()``; the stream is read to its end."""
    body = {"model": "chatgate", "user": user, "stream": True, "messages": [{"role": "user", "content": text}]}
    sent_at = time.monotonic()
    first_at = 0.0
    async with http.post(f"{base}/chat/completions", json=body) as response:
        async for line in response.content:
            if first_at or not line.startswith(b"data: {"):
                continue
            chunk = json.loads(line[6:])
            if any((c.get("delta") or {}).get("content") for c in chunk.get("choices", ())):
                first_at = time.monotonic()
    if not first_at:
        raise RuntimeError("a streamed completion had no content")
    return sent_at, first_at
