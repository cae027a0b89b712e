"""One splitter, every dialect: tables of cases, long answers, properties.

Telegram's own cases (tags, entities, UTF-16) are in test_telegram_chunk.py; here the same
rules are checked where markup counts (Slack and Discord measure characters as sent) and
where a code block is a fence that must be closed and reopened with its language.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from adapters.discord.dialect import DISCORD
from adapters.discord.dialect import SHAPE as DISCORD_SHAPE
from adapters.slack.dialect import SHAPE as SLACK_SHAPE
from adapters.slack.dialect import SLACK
from adapters.telegram.dialect import SHAPE as TELEGRAM_SHAPE
from adapters.telegram.dialect import TELEGRAM
from adapters.whatsapp.dialect import WHATSAPP
from bot.channels import PLAIN, Dialect, Measure, MessageShape, Mark, text_atoms
from bot.outbound.markdown import render, render_atoms
from bot.outbound.split import render_chunks, split, too_many, utf16_len
from tests import readback
from tests.readback import measure
from tests.test_telegram_chunk import long_answer
from tests.test_telegram_render import assert_telegram_html

DIALECTS: list[Dialect] = [TELEGRAM, SLACK, DISCORD, WHATSAPP, PLAIN]
Z = "\u200b"


def squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def chars(limit: int, max_lines: int | None = None) -> MessageShape:
    return MessageShape(chunk=limit, measure=Measure.CHARS, max_lines=max_lines)


def utf16(limit: int) -> MessageShape:
    return MessageShape(chunk=limit, measure=Measure.UTF16)


def assert_well_formed(chunk: str, dialect: Dialect) -> None:
    """The chunk reads back as atoms whose markup opens and closes in order, all closed."""
    if dialect is TELEGRAM:
        assert_telegram_html(chunk)
        return
    stack: list[str] = []
    atoms = readback.atoms(chunk, dialect)
    assert "".join(atom.raw for atom in atoms) == chunk
    for atom in atoms:
        if atom.mark is Mark.OPEN:
            stack.append(atom.tag)
        elif atom.mark is Mark.CLOSE:
            assert stack and stack[-1] == atom.tag, (atom, stack, chunk)
            stack.pop()
    assert not stack, (stack, chunk)


def assert_chunks(rendered: str, chunks: list[str], dialect: Dialect, shape: MessageShape) -> None:
    """Each chunk fits and is well formed; together they show the whole, modulo whitespace at cuts."""
    for chunk in chunks:
        assert measure(chunk, dialect, shape) <= shape.chunk, chunk
        assert chunk == chunk.strip() and readback.plain(chunk, dialect).strip(), chunk
        assert_well_formed(chunk, dialect)
    assert squeeze("".join(readback.plain(c, dialect) for c in chunks)) == squeeze(readback.plain(rendered, dialect))


FENCE = "```python\n" + "\n".join(f"x_{n} = {n}" for n in range(12)) + "\n```"

SPLITS = [
    # (id, dialect, markdown, shape, expected chunks)
    ("short text is one chunk", SLACK, "**hi** there", chars(4000), [f"{Z}*hi*{Z} there"]),
    ("blank line beats line, sentence, space", DISCORD, "Aa aa.\n\nBb bb.  \nCc cc. Dd dd", chars(20),
     ["Aa aa.", "Bb bb.\nCc cc. Dd dd"]),
    ("line beats sentence and space", SLACK, "Aa aa. Bb bb  \nCc cc. Dd dd", chars(20),
     ["Aa aa. Bb bb", "Cc cc. Dd dd"]),
    ("sentence beats space", DISCORD, "Aa aa. Bb bb cc dd ee", chars(14), ["Aa aa.", "Bb bb cc dd ee"]),
    ("a space when nothing better", PLAIN, "aaaa bbbb cccc", chars(10), ["aaaa bbbb", "cccc"]),
    ("a long word is cut hard", PLAIN, "abcdefghij", chars(4), ["abcd", "efgh", "ij"]),
    ("markup counts where characters are counted", SLACK, "**aaa bbb ccc ddd**", chars(12),
     [f"{Z}*aaa bbb*{Z}", f"{Z}*ccc ddd*{Z}"]),
    ("bold reopened", DISCORD, "**aaa bbb ccc ddd**", chars(12), ["**aaa bbb**", "**ccc ddd**"]),
    ("nested formatting reopened", DISCORD, "**x _aaa bbb_**", chars(12), ["**x _aaa_**", "**_bbb_**"]),
    ("an escape is never split", DISCORD, r"\*\*\*\*", chars(5), [r"\*\*", r"\*\*"]),
    ("a block opener cut from mid-line is escaped", DISCORD, "aaaa bbbb # h > q", chars(10),
     ["aaaa bbbb", r"\# h > q"]),
    ("an entity is never split", SLACK, "a & b & c & d", chars(9), ["a &amp; b", "&amp; c", "&amp; d"]),
    ("a mention is never split", SLACK, "hi <@U123456> there", chars(10), ["hi", "<@U123456>", "there"]),
    ("a Slack link reopened with its address", SLACK, "[aaa bbb ccc](https://x.io)", chars(25),
     ["<https://x.io|aaa bbb>", "<https://x.io|ccc>"]),
    ("a Discord link reopened with its address", DISCORD, "[aaa bbb ccc](https://x.io)", chars(25),
     ["[aaa bbb](<https://x.io>)", "[ccc](<https://x.io>)"]),
    ("a fence reopened with its language", DISCORD, FENCE, chars(60),
     ["```python\nx_0 = 0\nx_1 = 1\nx_2 = 2\nx_3 = 3\nx_4 = 4\n```",
      "```python\nx_5 = 5\nx_6 = 6\nx_7 = 7\nx_8 = 8\nx_9 = 9\n```",
      "```python\nx_10 = 10\nx_11 = 11\n```"]),
    ("a Slack fence reopened", SLACK, FENCE, chars(60),
     ["```\nx_0 = 0\nx_1 = 1\nx_2 = 2\nx_3 = 3\nx_4 = 4\nx_5 = 5\n```",
      "```\nx_6 = 6\nx_7 = 7\nx_8 = 8\nx_9 = 9\nx_10 = 10\nx_11 = 11\n```"]),
    ("code indentation kept at a cut", DISCORD, "```py\ndef f():\n    return 1\n    return 2\n```", chars(32),
     ["```py\ndef f():\n    return 1\n```", "```py\n    return 2\n```"]),
    ("quote lines keep their marker", DISCORD, "> one two\n> three four", chars(12), ["> one two", "> three four"]),
    ("a heading stays with its section", DISCORD, "Intro.\n\n# Title\n\nBody text", chars(20),
     ["Intro.", "# Title\n\nBody text"]),
    ("a bold heading stays with its section", SLACK, "Intro.\n\n## Title\n\nBody text", chars(24),
     ["Intro.", f"{Z}*Title*{Z}\n\nBody text"]),
    ("a heading alone is not a chunk", DISCORD, "### Title\n\nBody. More text", chars(22),
     ["### Title\n\nBody.", "More text"]),
    ("the line cap", DISCORD, "\n".join(f"line {n}  " for n in range(10)), chars(2000, max_lines=4),
     ["line 0\nline 1\nline 2\nline 3", "line 4\nline 5\nline 6\nline 7", "line 8\nline 9"]),
    ("a reopened fence takes lines from the cap", DISCORD, FENCE, chars(2000, max_lines=8),
     ["```python\nx_0 = 0\nx_1 = 1\nx_2 = 2\nx_3 = 3\nx_4 = 4\nx_5 = 5\n```",
      "```python\nx_6 = 6\nx_7 = 7\nx_8 = 8\nx_9 = 9\nx_10 = 10\nx_11 = 11\n```"]),
    ("emoji count two UTF-16 units", TELEGRAM, "a😀 b😀 c😀", utf16(7), ["a😀 b😀", "c😀"]),
    ("an emoji is never split", TELEGRAM, "😀😀😀", utf16(3), ["😀", "😀", "😀"]),
    ("tags are free in UTF-16 units", TELEGRAM, "**aaa** **bbb**", utf16(7), ["<b>aaa</b> <b>bbb</b>"]),
    ("nothing to send", SLACK, "\n\n  \n", chars(10), []),
]


@pytest.mark.parametrize(("dialect", "markdown", "shape", "expected"), [s[1:] for s in SPLITS],
                         ids=[s[0] for s in SPLITS])
def test_split(dialect: Dialect, markdown: str, shape: MessageShape, expected: list[str]) -> None:
    chunks = render_chunks(markdown, dialect, shape)
    assert chunks == expected
    assert_chunks(render(markdown, dialect), chunks, dialect, shape)


# Chunks that changed when the walker began to emit atoms: the splitter used to read each
# dialect's text back, and these four texts it read wrong (the text itself is unchanged).
# A reader of the text cannot tell what the walker knows, so they are pinned as they are.
QUOTED_CODE_IN_ITEM = "- > see\n  >\n  > ```\n  > one two\n  > three four\n  > ```"
READ_WRONG = [
    # a `_` right after a bare URL was read as part of the URL: the italics never closed,
    # and a stray "_" ended the message
    ("italics around a bare URL", DISCORD, "see *https://x.io/a* now and then", chars(20),
     ["see _https://x.io/a_", "now and then"]),
    # bold inside a level-4+ heading (itself a bold line) was read as closing it: the
    # first chunk ended with its bold open
    ("bold inside a deep heading", DISCORD, "#### aaa **bbb ccc ddd** eee", chars(20),
     ["**aaa **bbb ccc****", "****ddd** eee**"]),
    # the fences of a code block in a quote in a list item are indented, and were read as
    # inline code: the chunks lost their fences
    ("code in a quote in a list item (Discord)", DISCORD, QUOTED_CODE_IN_ITEM, chars(30),
     ["• > see\n  \n  ```\n  one two\n```", "```\n  three four\n  ```"]),
    ("code in a quote in a list item (Slack)", SLACK, QUOTED_CODE_IN_ITEM, chars(30),
     ["• > see\n  \n  ```\n  one two\n```", "```\n  three four\n  ```"]),
    # a literal `~` (or `*`, `_`) just before a marker was read as closing the strike, and
    # a stray "~" ended the message
    ("a literal marker character before a marker", SLACK, "~~aaa\\~**bbb ccc**~~ ddd", chars(2000),
     [f"{Z}~aaa~{Z}*bbb ccc*{Z}~{Z} ddd"]),
]


@pytest.mark.parametrize(("dialect", "markdown", "shape", "expected"), [s[1:] for s in READ_WRONG],
                         ids=[s[0] for s in READ_WRONG])
def test_what_a_reader_of_the_text_got_wrong(dialect: Dialect, markdown: str, shape: MessageShape,
                                              expected: list[str]) -> None:
    assert render_chunks(markdown, dialect, shape) == expected


def test_limit_must_hold_an_emoji() -> None:
    with pytest.raises(ValueError):
        split(text_atoms("abc"), PLAIN, chars(1))


def test_formatting_that_cannot_fit_is_dropped_rather_than_overflowing() -> None:
    url = "https://x.io/" + "a" * 40
    chunks = render_chunks(f"[aaa bbb]({url})", SLACK, chars(30))
    assert chunks == ["aaa bbb"]


@pytest.mark.parametrize(("count", "max_chunks", "as_file"), [(0, 8, False), (8, 8, False), (9, 8, True),
                                                               (3, 2, True)])
def test_too_many(count: int, max_chunks: int, as_file: bool) -> None:
    assert too_many(["x"] * count, MessageShape(chunk=100, max_chunks=max_chunks)) is as_file


MEASURES = [
    (TELEGRAM, TELEGRAM_SHAPE, "<b>a😀</b> &lt;", 5),  # tags free, 😀 two units, an entity one
    (SLACK, SLACK_SHAPE, f"{Z}*a*{Z} &lt;", 10),  # as sent
    (DISCORD, DISCORD_SHAPE, "**a😀** \\<", 9),
    (PLAIN, MessageShape(chunk=10), "a😀", 2),
]


@pytest.mark.parametrize(("dialect", "shape", "rendered", "length"), MEASURES, ids=[m[0].name for m in MEASURES])
def test_measure(dialect: Dialect, shape: MessageShape, rendered: str, length: int) -> None:
    assert measure(rendered, dialect, shape) == length


def test_platform_shapes() -> None:
    assert (TELEGRAM_SHAPE.chunk, TELEGRAM_SHAPE.measure) == (4096, Measure.UTF16)
    assert (SLACK_SHAPE.chunk, SLACK_SHAPE.measure) == (4000, Measure.CHARS)
    assert (DISCORD_SHAPE.chunk, DISCORD_SHAPE.measure, DISCORD_SHAPE.max_lines) == (2000, Measure.CHARS, 17)


def test_a_5000_character_discord_answer_with_a_long_code_block() -> None:
    code = "\n".join(f"    total_{n} = add(total_{n - 1}, {n})  # *not* _markup_ `x`" for n in range(1, 80))
    markdown = ("Here is **the plan** for the job.\n\n" + "Some prose goes here. " * 30
                + f"\n\n```python\ndef run():\n{code}\n```\n\nThat was _all_.")
    assert len(markdown) >= 5000
    chunks = render_chunks(markdown, DISCORD, DISCORD_SHAPE)
    assert_chunks(render(markdown, DISCORD), chunks, DISCORD, DISCORD_SHAPE)
    assert all(len(chunk) <= 2000 and chunk.count("\n") + 1 <= 17 for chunk in chunks)
    with_code = [chunk for chunk in chunks if "total_" in chunk]
    assert len(with_code) >= 4
    for chunk in with_code:  # every piece of the code is a whole block with its language
        assert chunk.startswith("```python\n") or "\n```python\n" in chunk
        assert re.search(r"`x`\n```(\n|$)", chunk)  # closed after its last line
        lines = [line for line in readback.plain(chunk, DISCORD).split("\n") if "total_" in line]
        assert all(re.fullmatch(r"    total_(\d+) = add\(total_\d+, \1\)  # \*not\* _markup_ `x`", line)
                   for line in lines), lines
    assert chunks[-1].endswith("That was _all_.")


@pytest.mark.parametrize("dialect", [SLACK, DISCORD, PLAIN], ids=lambda d: d.name)
def test_a_30000_character_answer(dialect: Dialect) -> None:
    shape = {SLACK: SLACK_SHAPE, DISCORD: DISCORD_SHAPE}.get(dialect, MessageShape(chunk=4000))
    markdown = long_answer()
    rendered = render(markdown, dialect)
    chunks = split(render_atoms(markdown, dialect), dialect, shape)
    assert_chunks(rendered, chunks, dialect, shape)
    assert too_many(chunks, shape)
    assert any(re.match(r"```(python)?\n    value_", chunk) for chunk in chunks) or dialect is PLAIN  # reopened


def test_utf16_len() -> None:
    assert [utf16_len(t) for t in ("", "abc", "é", "😀", "👨‍👩‍👧", "🇺🇦")] == [0, 3, 1, 2, 8, 4]


# --- properties ---------------------------------------------------------------------------

MARKDOWN = st.lists(st.sampled_from(
    ["**b** ", "*i* ", "~~s~~ ", "`c<d` ", "word ", "😀", ". ", "! ", "\n", "\n\n", "- x\n", "1. y\n", "> q\n",
     "```py\n  x & y\n  *z*\n```\n", "[l *k*](https://x.io/a_b) ", "# h\n", "#### h4\n", "a_b*c ", "<@U12> ",
     "<!here> ", "@everyone ", "| a | b |\n|---|---|\n| 1 | 2 |\n", "&amp; <b> ", "long" * 5 + " ", "\\* "]),
    max_size=40).map("".join)


@settings(max_examples=150, deadline=None)
@given(MARKDOWN, st.integers(min_value=40, max_value=300), st.sampled_from([None, 3, 17]))
@example("longlonglonglonglong longlonglonglonglong # h\n", 41, None)  # "# h" cut to a line start: a heading
@example("# h\n# h\n# h\n| a | b |\n|---|---|\n| 1 | 2 |\n**b** **b** **b** ", 40, None)  # code starts a chunk
def test_every_chunk_fits_in_every_dialect(markdown: str, limit: int, max_lines: int | None) -> None:
    for dialect in DIALECTS:
        shape = MessageShape(chunk=limit, measure=Measure.UTF16 if dialect is TELEGRAM else Measure.CHARS,
                        max_lines=max_lines)
        rendered = render(markdown, dialect)
        chunks = split(render_atoms(markdown, dialect), dialect, shape)
        assert_chunks(rendered, chunks, dialect, shape)
        if max_lines is not None:
            assert all(chunk.count("\n") < max_lines for chunk in chunks), chunks


@settings(max_examples=150, deadline=None)
@given(MARKDOWN, st.integers(min_value=2, max_value=40))
def test_tiny_chunks_never_overflow(markdown: str, limit: int) -> None:
    for dialect in (TELEGRAM, PLAIN):
        shape = MessageShape(chunk=limit, measure=Measure.UTF16 if dialect is TELEGRAM else Measure.CHARS)
        rendered = render(markdown, dialect)
        assert_chunks(rendered, split(render_atoms(markdown, dialect), dialect, shape), dialect, shape)
