"""Benchmarks of the whole bot.

``python -m bench [--only NAME] [--quick]`` runs chatgate as a separate process (``chatgate
run``) against the fake LLM and the fake Telegram Bot API, each in a process of its own,
and drives it the way Telegram does; see ``bench/__main__.py`` and ``bench/scenarios/``.
``python -m bench.stop_latency`` and ``python -m bench.concurrency`` run the bot in the
benchmark's own process instead (``bench/inprocess.py``), with a recording channel.

They print figures beside their goals and never assert timing; they are not tests and
never run in CI.
"""
