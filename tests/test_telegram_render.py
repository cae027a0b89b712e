"""Markdown -> Telegram HTML: one table row per construct, every output validated."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.telegram.dialect import TELEGRAM, html_to_text
from bot.channels import HR
from bot.outbound import markdown
from bot.outbound.markdown import TABLE_MAX_WIDTH


def render(text: str) -> str:
    return markdown.render(text, TELEGRAM)


def to_plain(text: str) -> str:
    return html_to_text(render(text))


try:  # the fake Bot API's TDLib-like parser, when present: a second, independent opinion
    from tests.fakes.telegram_html import parse_html as telegram_parse_html
except ImportError:
    telegram_parse_html = None

# --- a tiny validator for Telegram's HTML subset ------------------------------------------

ALLOWED_ATTRS: dict[str, frozenset[str]] = {
    "b": frozenset(), "i": frozenset(), "s": frozenset(), "u": frozenset(), "pre": frozenset(),
    "blockquote": frozenset(), "code": frozenset({"class"}), "a": frozenset({"href"}),
}
_TOKEN = re.compile(r'<(/?)([a-z]+)((?: [a-z]+="[^"<>]*")*)>'
                    r"|&(?:lt|gt|amp|quot|#[0-9]+|#x[0-9a-fA-F]+);|[^<>&]+|[\s\S]")
_ATTR = re.compile(r' ([a-z]+)="([^"<>]*)"')
_HREF = re.compile(r"(https?|tg|mailto):")


def telegram_html_errors(html: str) -> list[str]:
    """What Telegram would refuse (bad tags, nesting, stray < > &) or silently drop."""
    errors: list[str] = []
    stack: list[str] = []
    for match in _TOKEN.finditer(html):
        piece, name = match.group(0), match.group(2)
        if name is None:
            if piece in ("<", ">", "&"):
                errors.append(f"unescaped {piece!r} at {match.start()}")
            continue
        attrs = dict(_ATTR.findall(match.group(3)))
        if name not in ALLOWED_ATTRS:
            errors.append(f"tag <{name}> not allowed")
        elif match.group(1):  # a closing tag
            if attrs or not stack or stack[-1] != name:
                errors.append(f"</{name}> does not close {stack[-1:] or 'anything'}")
            else:
                stack.pop()
        else:
            parent = stack[-1] if stack else None
            if set(attrs) - ALLOWED_ATTRS[name]:
                errors.append(f"<{name}> has attributes {sorted(attrs)}")
            if parent == "code" or (parent == "pre" and name != "code"):
                errors.append(f"<{name}> inside <{parent}>")
            if name in ("a", "blockquote", "pre") and name in stack:
                errors.append(f"nested <{name}>")
            if name == "code" and "class" in attrs and (parent != "pre"
                                                         or not attrs["class"].startswith("language-")):
                errors.append(f"bad code class {attrs['class']!r}")
            if name == "a" and not _HREF.match(attrs.get("href", "")):
                errors.append(f"unsafe href {attrs.get('href')!r}")
            stack.append(name)
    if stack:
        errors.append(f"unclosed {stack}")
    return errors


def assert_telegram_html(html: str) -> str:
    """Fail unless Telegram would take the HTML as it is; the text Telegram would show."""
    errors = telegram_html_errors(html)
    assert not errors, f"{errors} in {html!r}"
    if telegram_parse_html is None:
        return html_to_text(html)
    text, _entities = telegram_parse_html(html)  # raises as Telegram would
    assert text == html_to_text(html)
    return text


VALIDATOR_CASES = [
    ("<b>x</b>", True), ("<b><i>x</i></b>", True), ('<a href="https://x">y</a>', True),
    ('<pre><code class="language-py">x</code></pre>', True), ("a &lt; b &amp; c &#128512;", True),
    ("<b>x", False), ("<b>x</i>", False), ("<b><i>x</b></i>", False), ("<script>x</script>", False),
    ("a < b", False), ("a & b", False), ('<a href="javascript:x">y</a>', False),
    ("<code><b>x</b></code>", False), ("<blockquote><blockquote>x</blockquote></blockquote>", False),
    ('<b class="x">y</b>', False),
]


@pytest.mark.parametrize(("html", "ok"), VALIDATOR_CASES, ids=[c[0] for c in VALIDATOR_CASES])
def test_the_validator_itself(html: str, ok: bool) -> None:
    assert (not telegram_html_errors(html)) is ok


# --- constructs ---------------------------------------------------------------------------

CASES = [
    # (id, markdown, expected HTML)
    ("bold", "**bold** and __bold__", "<b>bold</b> and <b>bold</b>"),
    ("italic", "*it* and _it_", "<i>it</i> and <i>it</i>"),
    ("strike", "~~gone~~", "<s>gone</s>"),
    ("nested emphasis", "**a *b* ~~c~~**", "<b>a <i>b</i> <s>c</s></b>"),
    ("inline code", "run `x < y && z`", "run <code>x &lt; y &amp;&amp; z</code>"),
    ("inline code keeps markup", "`**not bold**`", "<code>**not bold**</code>"),
    ("code block with language", "```python\nif a < b:\n    pass\n```",
     '<pre><code class="language-python">if a &lt; b:\n    pass</code></pre>'),
    ("code block info has more words", "```js title=x\n1\n```", '<pre><code class="language-js">1</code></pre>'),
    ("code block without language", "```\nplain & simple\n```", "<pre><code>plain &amp; simple</code></pre>"),
    ("indented code block", "text\n\n    indented\n      more", "text\n\n<pre><code>indented\n  more</code></pre>"),
    ("link with & and quotes", '[a & "b"](https://x.io/?q=1&r="2")',
     '<a href="https://x.io/?q=1&amp;r=%222%22">a &amp; "b"</a>'),
    ("autolink", "<https://x.io/a>", '<a href="https://x.io/a">https://x.io/a</a>'),
    ("javascript link dropped", "[click](javascript:alert(1))", "click"),
    ("JavaScript link dropped", "[click](JavaScript:alert(1))", "click"),
    ("vbscript and data dropped", "[a](vbscript:x) [b](data:text/html,x)", "a b"),
    ("relative link dropped", "[docs](/docs/index.html)", "docs"),
    ("tg and mailto kept", "[u](tg://user?id=1) [m](mailto:a@b.c)",
     '<a href="tg://user?id=1">u</a> <a href="mailto:a@b.c">m</a>'),
    ("empty link text shows url", "[](https://x.io)", '<a href="https://x.io">https://x.io</a>'),
    ("code inside a link is plain", "[`f()` docs](https://x.io)", '<a href="https://x.io">f() docs</a>'),
    ("image becomes a link", "![a *cat*](https://i.io/cat.png)", '<a href="https://i.io/cat.png">a cat</a>'),
    ("image with unsafe src", "![cat](javascript:x)", "cat"),
    ("blockquote", "> quoted\n> more", "<blockquote>quoted\nmore</blockquote>"),
    ("nested blockquote is flattened", "> a\n>\n> > b", "<blockquote>a\n\nb</blockquote>"),
    ("heading", "# Title\ntext", "<b>Title</b>\n\ntext"),
    ("heading level 3 with code", "### Use `x`", "<b>Use <code>x</code></b>"),
    ("bullet list", "- a\n- b", "• a\n• b"),
    ("nested lists", "- a\n  - b\n    - c\n- d", "• a\n  • b\n    • c\n• d"),
    ("ordered list", "1. one\n2. two\n   1. sub\n   2. sub2", "1. one\n2. two\n  1. sub\n  2. sub2"),
    ("ordered list start", "3. c\n4. d", "3. c\n4. d"),
    ("ordered inside bullet", "- a\n  1. x\n  2. y", "• a\n  1. x\n  2. y"),
    ("list item continuation", "- first line\n  second line", "• first line\n  second line"),
    ("list item with code", "- a\n\n  ```sh\n  ls\n  ```", '• a\n<pre><code class="language-sh">ls</code></pre>'),
    ("list then paragraph", "- a\n\nafter", "• a\n\nafter"),
    ("horizontal rule", "a\n\n---\n\nb", f"a\n\n{HR}\n\nb"),
    ("paragraphs one blank line apart", "a\n\n\n\nb", "a\n\nb"),
    ("soft break", "a\nb", "a\nb"),
    ("hard break", "a  \nb\\\nc", "a\nb\nc"),
    ("table", "| Name | Qty |\n|:--|--:|\n| apple | 3 |\n| kiwi | 12 |",
     "<pre>Name  | Qty\n------+----\napple |   3\nkiwi  |  12</pre>"),
    ("table cell escaped", "| a |\n|---|\n| x<y & `z` |", "<pre>a\n-------\nx&lt;y &amp; z</pre>"),
    ("raw html block", "<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
    ("raw inline html", "x <b>y</b> <a href='javascript:x'>z</a>",
     "x &lt;b&gt;y&lt;/b&gt; &lt;a href='javascript:x'&gt;z&lt;/a&gt;"),
    ("comparison operators", "a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
    ("markdown entities re-escaped", "&amp; &lt; &copy; &#35;", "&amp; &lt; © #"),
    ("emoji untouched", "😀 👨‍👩‍👧 ✅ 🇺🇦", "😀 👨‍👩‍👧 ✅ 🇺🇦"),
    ("empty", "", ""),
    ("empty code block", "```\n```", "<pre><code></code></pre>"),
]


@pytest.mark.parametrize(("markdown", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_render(markdown: str, expected: str) -> None:
    html = render(markdown)
    assert html == expected
    assert_telegram_html(html)


def test_wide_table_is_capped_and_wrapped_without_losing_words() -> None:
    words = [f"word{n}" for n in range(40)]
    markdown = "| a | b | c |\n|---|---|---|\n| " + " | ".join(
        [" ".join(words[:15]), " ".join(words[15:30]), " ".join(words[30:])]) + " |"
    html = render(markdown)
    assert_telegram_html(html)
    assert html.startswith("<pre>") and html.endswith("</pre>")
    lines = html_to_text(html).split("\n")
    assert max(len(line) for line in lines) <= TABLE_MAX_WIDTH
    assert set(words) <= set(html_to_text(html).split())


def test_a_whole_answer_is_valid() -> None:
    markdown = "\n\n".join(c[1] for c in CASES)
    assert_telegram_html(render(markdown))


PLAIN = [
    ("<b>a</b> &lt;b&gt; &amp; &quot;q&quot;", 'a <b> & "q"'),
    ('<a href="https://x?a=1&amp;b=2">link</a>', "link"),
    ('<pre><code class="language-py">x &lt; 1\n  y</code></pre>', "x < 1\n  y"),
    ("😀 plain", "😀 plain"),
]


@pytest.mark.parametrize(("html", "text"), PLAIN)
def test_html_to_text(html: str, text: str) -> None:
    assert html_to_text(html) == text


def test_to_plain_is_rendered_text() -> None:
    assert to_plain("**a** < `b` [c](https://x) <i>") == "a < b c <i>"


MARKDOWNISH = st.lists(st.sampled_from(
    list("ab c*_~`#>-+1.|[]()<>&!\\\"':/\n ") + ["😀", "```", "```py\n", "    ", "https://x.io", "javascript:",
                                                 "| a | b |\n|---|---|\n", "&amp;", "<b>", "</b>", "\n\n"]),
    max_size=80).map("".join)


@settings(max_examples=300, deadline=None)
@given(MARKDOWNISH)
def test_any_markdown_renders_to_valid_telegram_html(markdown: str) -> None:
    html = render(markdown)
    assert_telegram_html(html)
    for href in re.findall(r'href="([^"]*)"', html):
        assert _HREF.match(href)
