"""Clean a model's raw answer before anyone sees it: the seeds' seven steps.

Each step is a pure ``str -> str`` function; ``sanitize`` runs them in order and strips.

Code is left alone: steps 1-5 see fenced code blocks and inline code spans only as
opaque placeholders (``mask_code``), so a code sample about ``<think>`` tags or
``[System Message]`` lines survives. A region a step removes as a whole (a thinking
block, an echoed system message) takes any code inside it along, which is what we want
for reasoning that contains code. Step 6 never splits a fenced block into paragraphs
and never drops a paragraph that contains one (repeating a code sample may be meant);
it also turns runs of blank lines between paragraphs, left by the removals, into one.

Decisions the seeds leave open:
- an opening ``<think>`` (or tool-call tag) at the start of a line that is never closed
  is dropped with everything after it: the model ran out of tokens while thinking, and
  half a thought is worse than nothing. When that is the whole answer the result is "".
- a closing ``</think>`` with no opening (DeepSeek-R1 puts the opening in the prompt)
  drops everything before it.
- ``sanitize`` strips the result like the seeds' TrimSpace, so the first line loses its
  indentation even though step 7 alone keeps it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

_PLACEHOLDER = re.compile("\ue000(\\d+)\ue001")
_FENCE_OPEN = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)")
_INLINE_CODE = re.compile(r"(?<!`)(`+)(?!`)[^\n]+?(?<!`)\1(?!`)")


# -- code protection ------------------------------------------------------------------


def fenced_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each fenced code block, fence lines included; an unclosed fence
    runs to the end of the text."""
    spans: list[tuple[int, int]] = []
    opened: tuple[int, str] | None = None
    pos = 0
    while pos <= len(text):
        end = text.find("\n", pos)
        end = len(text) if end == -1 else end
        line = text[pos:end]
        if opened is None:
            m = _FENCE_OPEN.fullmatch(line)
            if m and not (m[1][0] == "`" and "`" in m[2]):
                opened = (pos, m[1])
        else:
            mark, fence = line.strip(), opened[1]
            if len(mark) >= len(fence) and mark == fence[0] * len(mark):
                spans.append((opened[0], end))
                opened = None
        pos = end + 1
    if opened is not None:
        spans.append((opened[0], len(text)))
    return spans


def code_spans(text: str) -> list[tuple[int, int]]:
    """Fenced blocks and the single-line inline code spans outside them, in order."""
    spans: list[tuple[int, int]] = []
    gap_start = 0
    for start, end in [*fenced_spans(text), (len(text), len(text))]:
        spans.extend(m.span() for m in _INLINE_CODE.finditer(text, gap_start, start))
        if start < end:
            spans.append((start, end))
        gap_start = end
    return spans


def mask_code(text: str) -> tuple[str, list[str]]:
    """Replace code with placeholders a regex cannot match; ``unmask_code`` undoes it."""
    if "\ue000" in text:  # cannot mask safely; code then gets no protection
        return text, []
    parts: list[str] = []
    blocks: list[str] = []
    last = 0
    for start, end in code_spans(text):
        parts.append(text[last:start])
        parts.append(f"\ue000{len(blocks)}\ue001")
        blocks.append(text[start:end])
        last = end
    parts.append(text[last:])
    return "".join(parts), blocks


def unmask_code(text: str, blocks: list[str]) -> str:
    if not blocks:
        return text
    return _PLACEHOLDER.sub(lambda m: blocks[int(m[1])], text)


def _outside_code(step: Callable[[str], str]) -> Callable[[str], str]:
    @functools.wraps(step)
    def run(text: str) -> str:
        masked, blocks = mask_code(text)
        return unmask_code(step(masked), blocks)

    return run


# -- 1. garbled tool XML ----------------------------------------------------------------

_TOOL_TAGS = r"(?:\w+:)?(?:tool_calls?|tool_use|tool_result|tool_response|function_calls?|invoke|parameter)"
_TOOL_PAIR = re.compile(rf"<(?P<tag>{_TOOL_TAGS})\b[^>]*>.*?</(?P=tag)\s*>", re.I | re.S)
_FUNCTION_EQ = re.compile(r"<function=[^>\n]*>.*?(?:</function\s*>|\Z)", re.I | re.S)
_TOKEN_TAG = r"<[|｜]tool[_▁]calls?(?:[_▁]section)?[_▁]{}[|｜]>"
_TOKEN_SECTION = re.compile(
    _TOKEN_TAG.format("begin") + r".*?(?:" + _TOKEN_TAG.format("end") + r"|\Z)", re.I | re.S
)
_STRAY_TOKEN = re.compile(r"<[|｜]tool[^|｜>\n]{0,40}[|｜]>", re.I)
_UNCLOSED_AT_LINE_START = re.compile(rf"^[ \t]*<{_TOOL_TAGS}\b[^>]*>.*\Z", re.I | re.S | re.M)
_STRAY_TOOL_TAG = re.compile(rf"</?{_TOOL_TAGS}\b[^>]*>|</function\s*>", re.I)
_MISTRAL_CALLS = re.compile(r"^[ \t]*\[TOOL_CALLS\][^\n]*(?:\n|\Z)", re.M)


@_outside_code
def strip_garbled_tool_xml(text: str) -> str:
    """Remove tool calls a model wrote as text (XML tags, special tokens); "" if that
    was all it wrote."""
    for pattern in (_TOKEN_SECTION, _STRAY_TOKEN, _TOOL_PAIR, _FUNCTION_EQ,
                    _UNCLOSED_AT_LINE_START, _STRAY_TOOL_TAG, _MISTRAL_CALLS):
        text = pattern.sub("", text)
    return text if text.strip() else ""


# -- 2. downgraded tool-call text --------------------------------------------------------

_DOWNGRADED = re.compile(
    r"\[(?:tool calls?|tool result|tool output|tool response|historical context)\b", re.I
)
_ARG_LABEL = re.compile(r"\s*(?:arguments|args|input|output|result)\s*:\s*", re.I)


def _depth_after(line: str, depth: int, in_string: bool) -> tuple[int, bool]:
    """Bracket depth and string state after scanning a line of JSON-ish text."""
    escaped = False
    for ch in line:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth = max(depth - 1, 0)
    return depth, in_string


@_outside_code
def strip_downgraded_tool_call_text(text: str) -> str:
    """Drop ``[Tool Call: …]``, ``[Tool Result …]``, ``[Historical context: …]`` lines and
    the JSON (arguments or output) that follows them, up to a blank or non-JSON line."""
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _DOWNGRADED.search(lines[i])
        if m is None:
            out.append(lines[i])
            i += 1
            continue
        if lines[i][: m.start()].strip():
            out.append(lines[i][: m.start()].rstrip())
        depth, in_string = _depth_after(lines[i][m.start():], 0, False)
        i += 1
        while i < len(lines) and lines[i].strip():
            body = lines[i]
            if depth == 0 and not in_string:
                label = _ARG_LABEL.match(body)
                body = body[label.end():] if label else body
                if not body.lstrip().startswith(("{", "[", '"', "}", "]")):
                    break
            depth, in_string = _depth_after(body, depth, in_string)
            i += 1
    return "\n".join(out)


# -- 3. thinking tags ------------------------------------------------------------------

_THINK_TAGS = r"(?:think|thinking|thought|antthinking)"
_THINK_PAIR = re.compile(rf"<(?P<tag>{_THINK_TAGS})\b[^>]*>.*?</(?P=tag)\s*>", re.I | re.S)
_THINK_UNCLOSED = re.compile(rf"^[ \t]*<{_THINK_TAGS}\b[^>]*>.*\Z", re.I | re.S | re.M)
_THINK_ORPHAN_CLOSE = re.compile(rf"\A.*</{_THINK_TAGS}\s*>", re.I | re.S)


@_outside_code
def strip_thinking_tags(text: str) -> str:
    """Remove reasoning blocks; an unclosed one at a line start runs to the end, and a
    closing tag without an opening takes everything before it along."""
    text = _THINK_PAIR.sub("", text)
    text = _THINK_UNCLOSED.sub("", text)
    return _THINK_ORPHAN_CLOSE.sub("", text)


# -- 4. final tags ----------------------------------------------------------------------

_FINAL_TAG = re.compile(r"</?final\s*>", re.I)


@_outside_code
def strip_final_tags(text: str) -> str:
    """Remove ``<final>`` / ``</final>`` wrappers, keeping what they wrap."""
    return _FINAL_TAG.sub("", text)


# -- 5. echoed system messages ------------------------------------------------------------

_SYSTEM_MESSAGE = re.compile(r"[ \t]*\[system message\b[^\]\n]*\]", re.I)


@_outside_code
def strip_echoed_system_messages(text: str) -> str:
    """Drop ``[System Message] …`` blocks, from the marker line to the next blank line."""
    out: list[str] = []
    skipping = False
    for line in text.split("\n"):
        if skipping and not line.strip():
            skipping = False
        elif not skipping and _SYSTEM_MESSAGE.match(line):
            skipping = True
        if not skipping:
            out.append(line)
    return "\n".join(out)


# -- 6. consecutive duplicate blocks ------------------------------------------------------

_BLANK_LINES = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)*")


def collapse_consecutive_duplicate_blocks(text: str) -> str:
    """Drop a paragraph identical (ignoring surrounding whitespace) to the one before it.
    Fenced code is never split and a paragraph containing one is never dropped. Runs
    of blank lines between paragraphs (often left by earlier steps) become one."""
    fences = fenced_spans(text)
    cuts = [m.span() for m in _BLANK_LINES.finditer(text)
            if not any(s < m.start() < e for s, e in fences)]
    bounds = [0, *[p for span in cuts for p in span], len(text)]
    out: list[str] = []
    previous = None
    for start, end in zip(bounds[::2], bounds[1::2]):
        block = text[start:end]
        key = block.strip()
        if key and key == previous and not any(start <= s < end for s, _ in fences):
            continue
        out.append(block)
        previous = key
    return "\n\n".join(out)


# -- 7. leading blank lines -------------------------------------------------------------

_LEADING_BLANK_LINES = re.compile(r"\A(?:[ \t]*\r?\n)+")


def strip_leading_blank_lines(text: str) -> str:
    """Drop whitespace-only lines at the start, keeping the first real line's indentation."""
    return _LEADING_BLANK_LINES.sub("", text)


STEPS: tuple[Callable[[str], str], ...] = (
    strip_garbled_tool_xml,
    strip_downgraded_tool_call_text,
    strip_thinking_tags,
    strip_final_tags,
    strip_echoed_system_messages,
    collapse_consecutive_duplicate_blocks,
    strip_leading_blank_lines,
)


def sanitize(text: str) -> str:
    """Run the seven steps in order, then strip surrounding whitespace."""
    for step in STEPS:
        text = step(text)
    return text.strip()
