"""Benchmarks of the whole bot: ``python -m bench.stop_latency``, ``python -m bench.concurrency``.

They print figures beside their goals and never assert timing; they are not tests and
never run in CI. The fake LLM runs in a child process, so it shares neither the bot's
event loop nor its memory.
"""
