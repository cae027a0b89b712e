"""Splitting Telegram HTML into messages: tables of cases, a long answer, a property test."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.telegram.dialect import SHAPE, TELEGRAM, TELEGRAM_LIMIT, html_to_text
from bot.channels import Measure, MessageShape
from bot.outbound.split import split, too_many, utf16_len
from tests import readback
from tests.test_telegram_render import assert_telegram_html, render


def chunk_html(html: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Hand-written HTML (any tags Telegram takes), read back as atoms and split."""
    return split(readback.atoms(html, TELEGRAM), TELEGRAM, MessageShape(chunk=limit, measure=Measure.UTF16))


def text_length(html: str) -> int:
    return readback.measure(html, TELEGRAM, SHAPE)


def should_send_as_file(chunks: list[str], max_chunks: int = SHAPE.max_chunks) -> bool:
    return too_many(chunks, MessageShape(chunk=TELEGRAM_LIMIT, measure=Measure.UTF16, max_chunks=max_chunks))

PY = '<pre><code class="language-python">'


def squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def assert_chunks(html: str, chunks: list[str], limit: int) -> None:
    """Each chunk fits and is valid; together they hold the text, modulo whitespace at cuts."""
    for chunk in chunks:
        text = assert_telegram_html(chunk)
        assert text_length(chunk) == utf16_len(text) <= limit, chunk
        assert chunk == chunk.strip() and html_to_text(chunk).strip()
    assert squeeze("".join(html_to_text(c) for c in chunks)) == squeeze(html_to_text(html))


UTF16 = [("", 0), ("abc", 3), ("é", 1), ("😀", 2), ("a😀b", 4), ("👨‍👩‍👧", 8), ("🇺🇦", 4), ("中文", 2)]


@pytest.mark.parametrize(("text", "units"), UTF16)
def test_utf16_len(text: str, units: int) -> None:
    assert utf16_len(text) == units == len(text.encode("utf-16-le")) // 2


LENGTHS = [
    ("<b>bold</b>", 4), ("&lt;&gt;&amp;&quot;", 4), ("&#128512;", 2), ("&#x1F600;", 2),
    ('<a href="https://x.io/?a=1&amp;b=2">x</a>', 1), (f"{PY}ab</code></pre>", 2), ("😀 <i>é</i>", 4),
]


@pytest.mark.parametrize(("html", "units"), LENGTHS)
def test_text_length_counts_what_telegram_counts(html: str, units: int) -> None:
    assert text_length(html) == units


SPLITS = [
    # (id, html, limit, expected chunks)
    ("short text is one chunk", "<b>hi</b> there", 4096, ["<b>hi</b> there"]),
    ("exactly the limit", "abcd", 4, ["abcd"]),
    ("nothing to send", " \n <b> </b>", 10, []),
    ("blank line beats line, sentence, space", "Aa aa.\n\nBb bb.\nCc cc. Dd dd", 20,
     ["Aa aa.", "Bb bb.\nCc cc. Dd dd"]),
    ("line beats sentence and space", "Aa aa. Bb bb\nCc cc. Dd dd", 20, ["Aa aa. Bb bb", "Cc cc. Dd dd"]),
    ("sentence beats space", "Aa aa. Bb bb cc dd ee", 14, ["Aa aa.", "Bb bb cc dd ee"]),
    ("question and exclamation end sentences", "Why? Yes! No.", 9, ["Why? Yes!", "No."]),
    ("a space when nothing better", "aaaa bbbb cccc", 10, ["aaaa bbbb", "cccc"]),
    ("a long word is cut hard", "abcdefghij", 4, ["abcd", "efgh", "ij"]),
    ("a long word among short ones", "ab abcdefghij cd", 5, ["ab", "abcde", "fghij", "cd"]),
    ("an entity is never split", "&amp;" * 7, 3, ["&amp;&amp;&amp;", "&amp;&amp;&amp;", "&amp;"]),
    ("an emoji is never split", "😀😀😀", 3, ["😀", "😀", "😀"]),
    ("emoji count two", "a😀 b😀 c😀", 7, ["a😀 b😀", "c😀"]),
    ("bold reopened", "<b>aaa bbb</b>", 4, ["<b>aaa</b>", "<b>bbb</b>"]),
    ("nested formatting reopened", "<b>x <i>aaa bbb</i></b>", 6, ["<b>x <i>aaa</i></b>", "<b><i>bbb</i></b>"]),
    ("link reopened with its href", '<a href="https://x.io/?a=1&amp;b=2">aaa bbb</a>', 4,
     ['<a href="https://x.io/?a=1&amp;b=2">aaa</a>', '<a href="https://x.io/?a=1&amp;b=2">bbb</a>']),
    ("quote reopened", "<blockquote>one.\ntwo.</blockquote>", 5,
     ["<blockquote>one.</blockquote>", "<blockquote>two.</blockquote>"]),
    ("code reopened with language, indentation kept", f"{PY}def f():\n    return 1\n    return 2</code></pre>",
     22, [f"{PY}def f():\n    return 1</code></pre>", f"{PY}    return 2</code></pre>"]),
    ("no empty tags at a cut", "aaa <b>bbb</b>", 4, ["aaa", "<b>bbb</b>"]),
    ("closing tags stay with their text", "<i>aaa</i> <b>bbb</b>", 4, ["<i>aaa</i>", "<b>bbb</b>"]),
    ("whitespace at cuts trimmed", "  aaa   \n\n   bbb  ", 6, ["aaa", "bbb"]),
    ("a heading stays with its section", "Intro.\n\n<b>Title</b>\n\nBody text", 20,
     ["Intro.", "<b>Title</b>\n\nBody text"]),
    ("a heading alone is not a chunk", "<b>Title</b>\n\nBody. More text", 20, ["<b>Title</b>\n\nBody.", "More text"]),
    ("bold inside a line is no heading", "<b>Bold</b> start.\n\nNext one", 20, ["<b>Bold</b> start.", "Next one"]),
]


@pytest.mark.parametrize(("html", "limit", "expected"), [s[1:] for s in SPLITS], ids=[s[0] for s in SPLITS])
def test_chunk_html(html: str, limit: int, expected: list[str]) -> None:
    chunks = chunk_html(html, limit)
    assert chunks == expected
    assert_chunks(html, chunks, limit)


def test_limit_must_hold_an_emoji() -> None:
    with pytest.raises(ValueError):
        chunk_html("abc", 1)


@pytest.mark.parametrize(("count", "max_chunks", "as_file"), [(0, 8, False), (1, 8, False), (8, 8, False),
                                                               (9, 8, True), (3, 2, True)])
def test_should_send_as_file(count: int, max_chunks: int, as_file: bool) -> None:
    assert should_send_as_file(["x"] * count, max_chunks=max_chunks) is as_file


def long_answer() -> str:
    """~30,000 characters of model Markdown: prose, emoji, lists, quotes, code in three languages."""
    big = "\n".join(f"    value_{n} = compute({n}, 'x < y & z')  # 😀 step {n}" for n in range(120))
    sections = []
    for n in range(21):
        prose = (f"Paragraph {n} has **bold**, *italic* and `inline < code` with emoji 😀🎉. "
                 "It goes on for a while! Does it end? Not yet. ") * 8
        sections.append(
            f"## Section {n}\n\n{prose}\n\n- point one 😀\n- point two\n  - nested point\n\n"
            f"> A quote about [a link](https://example.com/?q={n}&r=1) in section {n}.\n\n"
            f"```js\nconst answer{n} = {n} * 2;  // a < b && c > d\nconsole.log(answer{n});\n```\n\n"
            f"| col | value |\n|---|---:|\n| n | {n} |")
        if n == 5:
            sections.append(f"```python\ndef big():\n{big}\n```")
    return "\n\n".join(sections)


def test_a_30000_character_answer() -> None:
    markdown = long_answer()
    assert len(markdown) >= 30_000
    html = render(markdown)
    assert text_length(html) > 4 * TELEGRAM_LIMIT
    big_code = re.search(r"```python\n(.*?)```", markdown, re.S)
    assert big_code is not None and utf16_len(big_code.group(1)) > TELEGRAM_LIMIT  # longer than a message

    chunks = chunk_html(html)

    assert_chunks(html, chunks, TELEGRAM_LIMIT)
    assert should_send_as_file(chunks) is (len(chunks) > 8)
    with_big = [chunk for chunk in chunks if "value_" in chunk]
    assert len(with_big) >= 2
    assert all(PY in chunk for chunk in with_big)
    assert any(chunk.startswith(PY) and "def big" not in chunk for chunk in with_big)  # reopened
    for chunk in with_big:  # cut between lines, indentation kept
        lines = [line for line in html_to_text(chunk).split("\n") if "value_" in line]
        assert all(re.fullmatch(r"    value_(\d+) = .* step \1", line) for line in lines), lines
    for chunk in chunks:
        assert chunk.count("<pre>") + chunk.count("<pre ") == chunk.count("</pre>")


# --- property: random text with random markup ----------------------------------------------

def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


TEXT = st.lists(st.sampled_from(list("ab .!?\n<>&é") + ["😀", "  ", "\n\n", "word", ". "]),
                max_size=12).map(lambda parts: _escape("".join(parts)))
CODE = st.one_of(
    TEXT.map(lambda t: f"<code>{t}</code>"),
    st.tuples(st.sampled_from(["", ' class="language-python"', ' class="language-c++"']), TEXT).map(
        lambda p: f"<pre><code{p[0]}>{p[1]}</code></pre>"),
)
INLINE = st.recursive(
    st.one_of(TEXT, CODE),
    lambda inner: st.tuples(st.sampled_from("bisu"), st.lists(inner, max_size=3)).map(
        lambda p: f"<{p[0]}>{''.join(p[1])}</{p[0]}>"),
    max_leaves=12,
)
BLOCK = st.one_of(
    INLINE,
    INLINE.map(lambda t: f'<a href="https://x.io/?a=1&amp;b=&quot;2&quot;">{t}</a>'
               if "<pre>" not in t else t),
    INLINE.map(lambda t: f"<blockquote>{t}</blockquote>"),
)
DOCUMENT = st.lists(st.tuples(BLOCK, st.sampled_from(["", " ", "\n", "\n\n"])), max_size=8).map(
    lambda blocks: "".join(block + sep for block, sep in blocks))


@settings(max_examples=400, deadline=None)
@given(DOCUMENT, st.integers(min_value=2, max_value=60))
def test_every_chunk_fits_and_is_well_formed(html: str, limit: int) -> None:
    assert_telegram_html(html)  # the generator only makes valid input
    assert_chunks(html, chunk_html(html, limit), limit)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["**b** ", "*i* ", "`c<d` ", "word ", "😀", ". ", "\n", "\n\n", "- x\n",
                                 "> q\n", "```py\n  x & y\n```\n", "[l](https://x.io) ", "# h\n"]),
                max_size=40).map("".join),
       st.integers(min_value=2, max_value=80))
def test_rendered_markdown_chunks_fit(markdown: str, limit: int) -> None:
    html = render(markdown)
    assert_chunks(html, chunk_html(html, limit), limit)
