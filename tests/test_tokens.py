"""Token counts: exact with the shipped encodings, one warning and the heuristic without them."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest

from bot import tokens
from bot.llm import Message, Role, ToolCall, ToolResult
from bot.providers.base import ToolSpec


@pytest.fixture(autouse=True)
def _fresh_encodings() -> Iterator[None]:
    tokens.ENCODINGS.reset()
    yield
    tokens.ENCODINGS.reset()


# Published examples (tiktoken's README and OpenAI's "How to count tokens" cookbook).
KNOWN = [
    ("gpt-4o", "hello world", [24912, 2375]),
    ("gpt-4o", "tiktoken is great!", [83, 8251, 2488, 382, 2212, 0]),
    ("claude-sonnet-4-5", "hello world", [15339, 1917]),
    ("claude-sonnet-4-5", "tiktoken is great!", [83, 1609, 5963, 374, 2294, 0]),
    ("gpt-4", "antidisestablishmentarianism", [519, 85342, 34500, 479, 8997, 2191]),
]
KNOWN_COUNTS = [
    ("gpt-4o-mini", "お誕生日おめでとう", 8),
    ("gpt-3.5-turbo", "お誕生日おめでとう", 9),
]


async def test_ready_loads_the_encoding_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[str] = []
    real = tokens._build

    def build(name: str):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        return real(name)

    monkeypatch.setattr(tokens, "_build", build)
    await tokens.ready("gpt-4o")
    assert tokens.ENCODINGS.loaded("o200k_base") and threads and threads[0] != threading.current_thread().name
    await tokens.ready("gpt-4o")  # loaded: nothing more
    assert len(threads) == 1
    assert tokens.count_text("hello world", "gpt-4o") == 2


@pytest.mark.parametrize(("model", "text", "ids"), KNOWN)
def test_known_token_ids(model: str, text: str, ids: list[int]) -> None:
    assert tokens.encoder_for(model).encode_ordinary(text) == ids
    assert tokens.count_text(text, model) == len(ids)


@pytest.mark.parametrize(("model", "text", "count"), KNOWN_COUNTS)
def test_known_counts(model: str, text: str, count: int) -> None:
    assert tokens.count_text(text, model) == count


@pytest.mark.parametrize(("model", "encoding"), [
    ("gpt-4o", "o200k_base"), ("gpt-4o-mini-2024-07-18", "o200k_base"), ("gpt-4.1-nano", "o200k_base"),
    ("gpt-5", "o200k_base"), ("o1", "o200k_base"), ("o3-mini", "o200k_base"), ("o4-mini", "o200k_base"),
    ("openai/gpt-4o", "o200k_base"), ("gpt-4-turbo", "cl100k_base"), ("gpt-3.5-turbo", "cl100k_base"),
    ("claude-opus-4-1", "cl100k_base"), ("llama3.1:8b", "cl100k_base"),
])
def test_encoding_per_model(model: str, encoding: str) -> None:
    assert tokens.encoding_name(model) == encoding


def test_special_token_text_is_ordinary_text() -> None:
    # plain encode() would raise on this; a user may well type it
    assert tokens.count_text("<|endoftext|> hi", "gpt-4o") == 8
    assert tokens.count_text("<|endoftext|>", "claude-x") > 1


def test_our_patterns_and_hashes_are_tiktokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """The constants we keep are the ones the installed tiktoken would use (no download made)."""
    import tiktoken_ext.openai_public as public

    pinned: dict[str, str | None] = {}

    def fake_load(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        pinned[url.rsplit("/", 1)[-1].split(".")[0]] = expected_hash
        return {}

    monkeypatch.setattr(public, "load_tiktoken_bpe", fake_load)
    for name, build in (("o200k_base", public.o200k_base), ("cl100k_base", public.cl100k_base)):
        spec = build()
        ours = tokens.SPECS[name]
        assert spec["pat_str"] == ours.pat_str
        assert spec["special_tokens"] == ours.special
        assert pinned[name] == ours.sha256


def test_shipped_files_match_tiktokens_hashes() -> None:
    for name in tokens.SPECS:
        ranks = tokens.load_ranks(name)  # raises when the SHA-256 differs
        assert len(ranks) > 100_000


def test_message_overhead_and_request_total() -> None:
    model = "gpt-4o"
    hello = Message.user("hello world")
    assert tokens.count_messages([hello], model) == 2 + tokens.MESSAGE_OVERHEAD
    call = Message(Role.ASSISTANT, (ToolCall("c1", "read", '{"path": "a"}'),))
    result = Message(Role.TOOL, (ToolResult("c1", "hello world"),))
    tool = ToolSpec("read", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}})
    total = tokens.count_request("hello world", [hello, call, result], [tool], model)
    expected = (
        (2 + tokens.MESSAGE_OVERHEAD)  # system
        + tokens.count_messages([hello, call, result], model)
        + tokens.count_text('{"description":"Read a file.","name":"read","parameters":{"properties":{"path":'
                            '{"type":"string"}},"type":"object"}}', model)
        + tokens.REPLY_PRIMING
    )
    assert total == expected


def test_fallback_is_the_heuristic_with_one_warning(monkeypatch: pytest.MonkeyPatch,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    def missing(name: str):  # type: ignore[no-untyped-def]
        raise FileNotFoundError(f"{name}.tiktoken.gz")

    monkeypatch.setattr(tokens, "data_file", missing)
    with caplog.at_level(logging.WARNING, logger="bot.tokens"):
        assert tokens.count_text("x" * 40, "gpt-4o") == 10
        assert tokens.count_text("x" * 41, "claude-x") == 11
        assert tokens.count_messages([Message.user("y" * 8)], "gpt-5") == 2 + tokens.MESSAGE_OVERHEAD
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "characters per token" in warnings[0].getMessage()


def test_a_damaged_file_is_refused_and_the_other_encoding_used(monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture,
                                                               tmp_path) -> None:  # type: ignore[no-untyped-def]
    import gzip

    real = tokens.data_file
    bad = tmp_path / "o200k_base.tiktoken.gz"
    bad.write_bytes(gzip.compress(b"aGk= 0\n"))
    monkeypatch.setattr(tokens, "data_file", lambda name: bad if name == "o200k_base" else real(name))
    with caplog.at_level(logging.WARNING, logger="bot.tokens"):
        assert tokens.encoder_for("gpt-4o").name == "cl100k_base"
        assert tokens.count_text("hello world", "gpt-4o") == 2
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_encodings_load_once() -> None:
    first = tokens.encoder_for("gpt-4o")
    assert tokens.encoder_for("o3") is first
    assert tokens.encoder_for("claude-x") is not first


@pytest.mark.parametrize(("model", "override", "window"), [
    ("gpt-4o-mini", None, 128_000), ("gpt-4o-2024-08-06", None, 128_000), ("gpt-4.1-mini", None, 1_047_576),
    ("gpt-5-2025-08-07", None, 400_000), ("o3-mini", None, 200_000), ("gpt-4", None, 8_192),
    ("gpt-4-turbo", None, 128_000), ("claude-sonnet-4-5-20250929", None, 200_000),
    ("anthropic/claude-3-5-haiku", None, 200_000), ("llama3.1:8b", None, 128_000),
    ("claude-sonnet-4-5", 1_000_000, 1_000_000), ("llama3.1:8b", 32_768, 32_768),
])
def test_context_window_table(model: str, override: int | None, window: int) -> None:
    from bot.providers.context import context_window_for

    assert context_window_for(model, override) == window


def test_nothing_is_loaded_at_import() -> None:
    """Start-up pays for tiktoken and the ranks only when the first count needs them."""
    import subprocess
    import sys

    code = "import sys, bot.app, bot.tokens; print('tiktoken' in sys.modules, len(bot.tokens.ENCODINGS._loaded))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30)
    assert out.stdout.split() == ["False", "0"]
