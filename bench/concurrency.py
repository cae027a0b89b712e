"""Many sessions at once: wall time, memory and CPU of the bot under a burst of new DMs.

The whole bot runs here (``runs.max_concurrent`` = the number of sessions) with a channel
that counts progress events instead of keeping them; the fake LLM runs in a child process,
so its memory and CPU are not the bot's, and streams every answer as ``--tokens`` chunks
over ``--stream-seconds``. One session warms up first; then every session sends one
message at once, each from a new DM user.

    python -m bench.concurrency [--sessions 1000] [--stream-seconds 2] [--tokens 100]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import time

from bench.common import cpu_seconds, peak_rss_mb, rss_mb, table, verdict
from bench.inprocess import running_bot
from tests.fakes.channel import dm

GOAL_WALL = 3.0  # seconds, with answers streamed over 2 s
GOAL_PEAK_MB = 300.0


async def bench(sessions: int, stream_seconds: float, tokens: int, timeout: float) -> dict[str, float]:
    fake = ["--tokens", str(tokens), "--stream-seconds", str(stream_seconds)]
    async with running_bot(fake, f"runs: {{max_concurrent: {sessions}}}", keep_events=False) as (llm, _, channel):
        started = time.monotonic()
        await channel.inject(dm("hello", "warmup", platform=channel.platform))
        await channel.wait_for_replies(1, timeout)
        single = channel.sent_at[0] - started
        gc.collect()
        rss_warm, cpu_before, fake_cpu_before = rss_mb(), cpu_seconds(), cpu_seconds(llm.pid)

        messages = [dm("hello", f"user{i}", platform=channel.platform) for i in range(sessions)]
        started = time.monotonic()
        await asyncio.gather(*(channel.inject(m) for m in messages))
        injected = time.monotonic() - started
        try:
            await channel.wait_for_replies(1 + sessions, timeout)
        except TimeoutError:
            pass  # reported below as fewer answers
        replies = channel.sent[1:]
        wall = max(channel.sent_at[1:], default=started) - started
        cpu, fake_cpu = cpu_seconds() - cpu_before, cpu_seconds(llm.pid) - fake_cpu_before
        peak = peak_rss_mb()
        gc.collect()
        rss_idle = rss_mb()
        return {
            "sessions": sessions, "answered": sum(r.text.count("tok") == tokens for r in replies),
            "replies": len(replies), "single_s": single, "inject_s": injected, "wall_s": wall,
            "peak_rss_mb": peak, "rss_warm_mb": rss_warm, "rss_idle_mb": rss_idle,
            "rss_per_idle_session_kb": (rss_idle - rss_warm) * 1024 / sessions,
            "cpu_s": cpu, "cpu_per_message_ms": cpu * 1000 / sessions, "fake_llm_cpu_s": fake_cpu,
            "events_shown": channel.shown,
        }


def report(r: dict[str, float], stream_seconds: float, tokens: int) -> None:
    n = int(r["sessions"])
    print(f"concurrency: {n} new DM sessions at once, answers streamed as {tokens} chunks over {stream_seconds:g} s; "
          f"bot in this process, fake LLM in a child process; {os.cpu_count()} CPUs")
    print(table(["figure", "value", "goal"], [
        ["one session alone (warm-up), message to answer", f"{r['single_s']:.2f} s", ""],
        ["all messages injected (stored and dispatched)", f"{r['inject_s']:.2f} s", ""],
        [f"first inject to answer #{r['replies']:.0f}", f"{r['wall_s']:.2f} s",
         f"< {GOAL_WALL:g} s: {verdict(r['wall_s'], GOAL_WALL) if r['answered'] == n else 'MISSED'}"],
        ["complete answers", f"{r['answered']:.0f} / {n}", ""],
        ["peak RSS of the bot process", f"{r['peak_rss_mb']:.0f} MB",
         f"< {GOAL_PEAK_MB:g} MB: {verdict(r['peak_rss_mb'], GOAL_PEAK_MB)}"],
        ["RSS after warm-up (1 session)", f"{r['rss_warm_mb']:.0f} MB", ""],
        [f"RSS with {n} idle sessions", f"{r['rss_idle_mb']:.0f} MB", ""],
        ["RSS per idle session", f"{r['rss_per_idle_session_kb']:.0f} kB", ""],
        ["bot CPU (user+sys), whole burst", f"{r['cpu_s']:.2f} s", ""],
        ["bot CPU per message", f"{r['cpu_per_message_ms']:.2f} ms", ""],
        ["fake LLM CPU, whole burst (not the bot's)", f"{r['fake_llm_cpu_s']:.2f} s", ""],
    ]))
    print("RSS per idle session = (RSS after the burst - RSS after warm-up) / sessions, after gc.collect(): "
          "it includes memory Python keeps from the burst, so it is an upper bound")
    print(json.dumps({"bench": "concurrency", "llm": "subprocess", "cpus": os.cpu_count(), "tokens": tokens,
                      "stream_seconds": stream_seconds, **{k: round(v, 3) for k, v in r.items()}},
                     separators=(",", ":")))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.concurrency", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000, help="DM sessions sending one message each, at once")
    parser.add_argument("--stream-seconds", type=float, default=2.0, help="how long the fake streams each answer")
    parser.add_argument("--tokens", type=int, default=100, help="chunks per answer")
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for the answers")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    report(asyncio.run(bench(args.sessions, args.stream_seconds, args.tokens, args.timeout)),
           args.stream_seconds, args.tokens)


if __name__ == "__main__":
    main()
