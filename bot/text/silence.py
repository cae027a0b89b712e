"""``NO_REPLY``: the model's way of saying nothing.

An answer is silent only when, after sanitizing, it is nothing but the token (any case,
with whitespace, Markdown emphasis, backticks, quotes and ``. ! , ; : …`` around it;
repeating it changes nothing). Otherwise standalone occurrences are removed and the
rest is sent: a trailing token with what surrounds it, a token alone on its line with
its line, one inside a sentence with its spaces collapsed ("reply NO_REPLY when" ->
"reply when"). Inside code (fenced or inline) the token is left alone, except as the
very last thing in the answer (`` `NO_REPLY` `` at the end is the model signalling).

While streaming, ``NoReplyHoldback`` shows only what can no longer change: nothing while
the answer could still turn out silent, and never a tail that could still become a
trailing token. What it releases, joined, equals ``strip_no_reply`` of the whole text.
"""

from __future__ import annotations

import re

from bot.text.sanitize import mask_code, sanitize, unmask_code

NO_REPLY = "NO_REPLY"
NOTHING_TO_ADD = "I don't have anything to add."

_TOKEN = r"NO\\?_REPLY"
_WRAP = "*_`'\"“”‘’~"
_PUNCT = ".!,;:…"
_W = re.escape(_WRAP)
_P = re.escape(_PUNCT)
_STANDALONE = rf"(?<![A-Za-z0-9])(?<![A-Za-z0-9]_){_TOKEN}(?!_*[A-Za-z0-9])"

_SILENT = re.compile(rf"[\s{_W}{_P}]*(?:{_STANDALONE}[\s{_W}{_P}]*)+", re.I)
_OCCURRENCE = re.compile(
    rf"(?P<pre>[ \t]*)[{_W}]*{_STANDALONE}[{_W}]*(?P<punct>[{_P}]*)[{_W}]*(?P<post>[ \t]*)"
    r"(?:(?P<nl>\r?\n)(?P<blank>[ \t]*\r?\n)?)?",
    re.I,
)
_TRAILING = re.compile(rf"(?:\s*[{_W}]*{_STANDALONE}[{_W}{_P}]*)+\s*\Z", re.I)
_PREFIXES = sorted({w[:k] for w in ("NO_REPLY", "NO\\_REPLY") for k in range(1, len(w))},
                   key=len, reverse=True)
# What could still grow into a trailing token: tokens, wrappers, punctuation, spaces,
# and a started token at the very end.
_TAIL = re.compile(
    rf"(?:[\s{_W}]*{_STANDALONE}[{_W}{_P}]*)*[\s{_W}]*"
    rf"(?:(?<![A-Za-z0-9])(?<![A-Za-z0-9]_)(?:{'|'.join(map(re.escape, _PREFIXES))}))?\Z",
    re.I,
)


def is_silent(text: str) -> bool:
    """True when the (sanitized) answer is only NO_REPLY, give or take punctuation."""
    return _SILENT.fullmatch(text) is not None


def _replace(m: re.Match[str]) -> str:
    text, start, end = m.string, m.start(), m.end()
    after = text[end:]
    if not after.strip():
        return ""  # trailing: goes with everything around it
    line_start = start == 0 or text[start - 1] == "\n"
    blank = m["blank"] or ""
    if line_start and m["nl"]:  # alone on its line: the line goes
        return "" if start == 0 or text[:start].endswith(("\n\n", "\n\r\n")) else blank
    if line_start:
        return ""
    before = text[:start].rstrip()
    punct = m["punct"] if before and before[-1] not in _PUNCT + "?" else ""
    if m["nl"]:
        return punct + m["nl"] + blank
    return punct + (" " if m["pre"] or m["post"] else "")


def strip_no_reply(text: str) -> str:
    """Remove standalone NO_REPLY tokens from an answer that is not silent, then strip."""
    text = _TRAILING.sub("", text)
    masked, blocks = mask_code(text)
    return unmask_code(_OCCURRENCE.sub(_replace, masked), blocks).strip()


def final_answer(text: str, *, is_group: bool) -> str | None:
    """What to deliver for a model's raw answer; None means stay silent.

    A silent answer delivers nothing. An answer that sanitizes to nothing delivers
    nothing in a group (nobody asked us specifically) and ``NOTHING_TO_ADD`` in a DM,
    where silence would look like a crash.
    """
    clean = sanitize(text)
    if is_silent(clean):
        return None
    return strip_no_reply(clean) or (None if is_group else NOTHING_TO_ADD)


def _could_be_silent(text: str) -> bool:
    """True while ``text`` is a prefix of some silent answer."""
    while True:
        text = text.lstrip(" \t\r\n" + _WRAP + _PUNCT)
        if not text:
            return True
        m = re.match(_STANDALONE, text, re.I)
        if m is None:
            return text.upper() in _PREFIXES
        text = text[m.end():]


def tail_start(text: str, end: int) -> int:
    """Where ``_TAIL`` matches ``text[:end]``: the suffix that could still grow into a
    trailing token. Without "reply" in the text (nearly every answer) it is found by
    scanning back from the end, instead of a regex search over the whole text on every
    streamed chunk."""
    if "reply" in text[:end].lower():
        tail = _TAIL.search(text, 0, end)
        assert tail is not None  # the empty tail always matches
        return tail.start()
    i = end
    upper = text[max(0, end - len(_PREFIXES[0])):end].upper()
    for prefix in _PREFIXES:  # an unfinished token at the very end, longest first
        if upper.endswith(prefix) and _standalone_before(text, end - len(prefix)):
            i = end - len(prefix)
            break
    while i > 0 and (text[i - 1].isspace() or text[i - 1] in _WRAP):
        i -= 1
    return i


def _standalone_before(text: str, i: int) -> bool:
    """The lookbehinds of ``_TAIL``: no letter or digit (or one followed by ``_``) before ``i``."""
    if i > 0 and text[i - 1].isascii() and text[i - 1].isalnum():
        return False
    return not (i > 1 and text[i - 1] == "_" and text[i - 2].isascii() and text[i - 2].isalnum())


class NoReplyHoldback:
    """Filter for a streamed answer: ``feed`` returns what is safe to show now,
    ``finish`` what is left once the stream has ended. Pure: no I/O, no clock."""

    def __init__(self) -> None:
        self._text = ""
        self._shown = ""
        self._stable_end = 0
        self._maybe_silent = True

    def feed(self, chunk: str) -> str:
        self._text += chunk
        if self._maybe_silent:
            self._maybe_silent = _could_be_silent(self._text)
            if self._maybe_silent:
                return ""
        end = self._stable()
        if end == self._stable_end:
            return ""
        self._stable_end = end
        view = self._text[:end]
        # Hot path: most answers never mention the token; then stripping it changes nothing
        # but the surrounding whitespace, and the regexes need not run on every chunk.
        return self._show(strip_no_reply(view) if "reply" in view.lower() else view.strip())

    def finish(self) -> str:
        return self._show("" if is_silent(self._text) else strip_no_reply(self._text))

    def _stable(self) -> int:
        """Where the text that can no longer change ends: before a tail that could still
        become a trailing token, and before the current line's first backtick (an inline
        code span or a fence may be opening there, which changes what counts as code)."""
        end = len(self._text)
        while True:
            start = tail_start(self._text, end)
            line_start = self._text.rfind("\n", 0, start) + 1
            tick = self._text.find("`", line_start, start)
            if tick == -1:
                return start
            end = tick

    def _show(self, view: str) -> str:
        if not view.startswith(self._shown):  # what was shown cannot be taken back
            return ""
        new = view[len(self._shown):]
        self._shown = view
        return new


__all__ = ["NO_REPLY", "NOTHING_TO_ADD", "NoReplyHoldback", "final_answer", "is_silent", "strip_no_reply"]
