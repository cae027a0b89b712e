"""One Markdown walker, every dialect: one table row per construct, rendered four ways.

Each row gives the Markdown and what Telegram (HTML), Slack (mrkdwn), Discord (Markdown)
and the terminal (plain text) get. Every rendering is the text of the atoms the walker
emits (the splitter cuts between them), they are what a reader of the text would take
them for, and they show the same plain text as the terminal's, but for what a dialect
deliberately writes differently (noted per row).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it.tree import SyntaxTreeNode

from adapters.console.channel import ConsoleChannel
from adapters.discord.dialect import DISCORD
from adapters.discord.dialect import SHAPE as DISCORD_SHAPE
from adapters.slack.dialect import SHAPE as SLACK_SHAPE
from adapters.slack.dialect import SLACK
from adapters.telegram.dialect import SHAPE as TELEGRAM_SHAPE
from adapters.telegram.dialect import TELEGRAM
from adapters.whatsapp.dialect import WHATSAPP
from bot.channels import PLAIN, Atom, Dialect, MessageShape, Mark, quote_lines
from bot.outbound.markdown import _MD, _strip_lines, _Walker, plain_line, render, render_atoms, safe_url, to_plain
from bot.outbound.split import render_chunks, split
from tests import readback
from tests.test_telegram_render import assert_telegram_html

CONSOLE_SHAPE = ConsoleChannel.shape

DIALECTS: list[Dialect] = [TELEGRAM, SLACK, DISCORD, WHATSAPP, PLAIN]
Z = "\u200b"

CASES = [
    # (id, markdown, telegram, slack, discord, plain)
    ('bold', '**bold** and __bold__',
     '<b>bold</b> and <b>bold</b>',
     '\u200b*bold*\u200b and \u200b*bold*\u200b',
     '**bold** and **bold**',
     'bold and bold'),
    ('italic', '*it* and _it_',
     '<i>it</i> and <i>it</i>',
     '\u200b_it_\u200b and \u200b_it_\u200b',
     '_it_ and _it_',
     'it and it'),
    ('strike', '~~gone~~',
     '<s>gone</s>',
     '\u200b~gone~\u200b',
     '~~gone~~',
     'gone'),
    ('nested emphasis', '**a *b* ~~c~~**',
     '<b>a <i>b</i> <s>c</s></b>',
     '\u200b*a \u200b_b_\u200b \u200b~c~\u200b*\u200b',
     '**a _b_ ~~c~~**',
     'a b c'),
    ('bold inside a word', 'un**believ**able',
     'un<b>believ</b>able',
     'un\u200b*believ*\u200bable',
     'un**believ**able',
     'unbelievable'),
    ('inline code', 'run `x < y && z`',
     'run <code>x &lt; y &amp;&amp; z</code>',
     'run `x &lt; y &amp;&amp; z`',
     'run `x < y && z`',
     'run x < y && z'),
    ('inline code with a backtick', '``a`b``',
     '<code>a`b</code>',
     '`aˋb`',
     '`` a`b ``',
     'a`b'),
    ('code block with language', '```python\nif a < b:\n    pass\n```',
     '<pre><code class="language-python">if a &lt; b:\n    pass</code></pre>',
     '```\nif a &lt; b:\n    pass\n```',
     '```python\nif a < b:\n    pass\n```',
     'if a < b:\n    pass'),
    ('code block holding a fence', '````\n```\nx\n```\n````',
     '<pre><code>```\nx\n```</code></pre>',
     '```\n`\u200b`\u200b`\nx\n`\u200b`\u200b`\n```',
     '```\n`\u200b`\u200b`\nx\n`\u200b`\u200b`\n```',
     '```\nx\n```'),
    ('link', '[a & b](https://x.io/?q=1&r=2)',
     '<a href="https://x.io/?q=1&amp;r=2">a &amp; b</a>',
     '<https://x.io/?q=1&amp;r=2|a &amp; b>',
     '[a & b](<https://x.io/?q=1&r=2>)',
     'a & b (https://x.io/?q=1&r=2)'),
    ('link with formatting', '[**a** `b`](https://x.io)',
     '<a href="https://x.io"><b>a</b> b</a>',
     '<https://x.io|a b>',
     '[**a** b](<https://x.io>)',
     'a b (https://x.io)'),
    ('autolink', '<https://x.io/a>',
     '<a href="https://x.io/a">https://x.io/a</a>',
     '<https://x.io/a|https://x.io/a>',
     '[https://x.io/a](<https://x.io/a>)',
     'https://x.io/a'),
    ('javascript link refused', '[click](javascript:alert(1))',
     'click',
     'click',
     'click',
     'click'),
    ('relative link refused', '[docs](/docs/index.html)',
     'docs',
     'docs',
     'docs',
     'docs'),
    ('image', '![a cat](https://i.io/cat.png)',
     '<a href="https://i.io/cat.png">a cat</a>',
     '<https://i.io/cat.png|a cat>',
     '[a cat](<https://i.io/cat.png>)',
     'a cat (https://i.io/cat.png)'),
    ('quote', '> quoted\n> more',
     '<blockquote>quoted\nmore</blockquote>',
     '> quoted\n> more',
     '> quoted\n> more',
     '│ quoted\n│ more'),
    ('nested quote flattened', '> a\n>\n> > b',
     '<blockquote>a\n\nb</blockquote>',
     '> a\n> \n> b',
     '> a\n> \n> b',
     '│ a\n│\n│ b'),
    ('quote holding code', '> see\n>\n> ```sh\n> ls\n> ```',
     '<blockquote>see\n\n<pre><code class="language-sh">ls</code></pre></blockquote>',
     '> see\n\n```\nls\n```',
     '> see\n\n```sh\nls\n```',
     '│ see\n│\n│ ls'),
    ('heading', '# Title\ntext',
     '<b>Title</b>\n\ntext',
     '\u200b*Title*\u200b\n\ntext',
     '# Title\n\ntext',
     'Title\n\ntext'),
    ('deep heading', '#### Four',
     '<b>Four</b>',
     '\u200b*Four*\u200b',
     '**Four**',
     'Four'),
    ('bullet list', '- a\n- b\n  - c',
     '• a\n• b\n  • c',
     '• a\n• b\n  • c',
     '• a\n• b\n  • c',
     '• a\n• b\n  • c'),
    ('ordered list', '3. c\n4. d',
     '3. c\n4. d',
     '3. c\n4. d',
     '3. c\n4. d',
     '3. c\n4. d'),
    ('horizontal rule', 'a\n\n---\n\nb',
     'a\n\n———\n\nb',
     'a\n\n———\n\nb',
     'a\n\n———\n\nb',
     'a\n\n———\n\nb'),
    ('table', '| Name | Qty |\n|:--|--:|\n| apple | 3 |',
     '<pre>Name  | Qty\n------+----\napple |   3</pre>',
     '```\nName  | Qty\n------+----\napple |   3\n```',
     '```\nName  | Qty\n------+----\napple |   3\n```',
     'Name  | Qty\n------+----\napple |   3'),
    ('raw html block', '<script>alert(1)</script>',
     '&lt;script&gt;alert(1)&lt;/script&gt;',
     '&lt;script&gt;alert(1)&lt;/script&gt;',
     '<script>alert(1)</script>',
     '<script>alert(1)</script>'),
    ('raw inline html', 'x <b>y</b>',
     'x &lt;b&gt;y&lt;/b&gt;',
     'x &lt;b&gt;y&lt;/b&gt;',
     'x <b>y</b>',
     'x <b>y</b>'),
    ('comparison and ampersand', 'a < b && c > d',
     'a &lt; b &amp;&amp; c &gt; d',
     'a &lt; b &amp;&amp; c &gt; d',
     'a < b && c > d',
     'a < b && c > d'),
    ('markdown characters in text', '2\\*3 \\_x\\_ a|b \\[n\\] \\#tag \\`q\\` ~x~',
     '2*3 _x_ a|b [n] #tag `q` ~x~',
     '2*3 _x_ a|b [n] #tag ˋqˋ ~x~',
     '2\\*3 \\_x\\_ a\\|b \\[n\\] #tag \\`q\\` \\~x\\~',
     '2*3 _x_ a|b [n] #tag `q` ~x~'),
    ('bare url', 'see https://x.io/a_b_c now',
     'see https://x.io/a_b_c now',
     'see https://x.io/a_b_c now',
     'see https://x.io/a_b_c now',
     'see https://x.io/a_b_c now'),
    ('mentions and pings', 'hi <@U123> in <#C9> <!here> <!channel> <!everyone> @everyone @here',
     'hi &lt;@U123&gt; in &lt;#C9&gt; &lt;!here&gt; &lt;!channel&gt; &lt;!everyone&gt; @everyone @here',
     'hi <@U123> in <#C9> &lt;!here&gt; &lt;!channel&gt; &lt;!everyone&gt; @everyone @here',
     'hi <@U123> in <#C9> <!here> <!channel> <!everyone> @\u200beveryone @\u200bhere',
     'hi <@U123> in <#C9> <!here> <!channel> <!everyone> @everyone @here'),
    ('emoji', '😀 👨\u200d👩\u200d👧 ✅',
     '😀 👨\u200d👩\u200d👧 ✅',
     '😀 👨\u200d👩\u200d👧 ✅',
     '😀 👨\u200d👩\u200d👧 ✅',
     '😀 👨\u200d👩\u200d👧 ✅'),
    ('empty', '',
     '',
     '',
     '',
     ''),
]


@pytest.mark.parametrize(("markdown", "telegram", "slack", "discord", "plain"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_render_in_every_dialect(markdown: str, telegram: str, slack: str, discord: str, plain: str) -> None:
    assert render(markdown, TELEGRAM) == telegram
    assert render(markdown, SLACK) == slack
    assert render(markdown, DISCORD) == discord
    assert render(markdown, PLAIN) == plain == to_plain(markdown)
    assert_telegram_html(telegram)


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_the_atoms_are_the_rendering(case: tuple[str, ...], dialect: Dialect) -> None:
    rendered = render(case[1], dialect)
    atoms = render_atoms(case[1], dialect)
    assert "".join(atom.raw for atom in atoms) == rendered
    assert readback.plain(rendered, dialect) == "".join(atom.char for atom in atoms)
    assert readback.atoms(rendered, dialect) == atoms  # what a reader of the text takes it for


# What a reader sees, dialect by dialect, for rows where it is not the terminal's text.
SEEN = [
    (SLACK, "markdown characters in text", "2*3 _x_ a|b [n] #tag ˋqˋ ~x~"),  # Slack cannot escape a backtick
    (SLACK, "inline code with a backtick", "aˋb"),
    (DISCORD, "mentions and pings", "hi <@U123> in <#C9> <!here> <!channel> <!everyone> @\u200beveryone @\u200bhere"),
    (TELEGRAM, "link", "a & b"),  # a link's address is not part of its text
    (SLACK, "quote", "quoted\nmore"),  # quote markers are markup
    (DISCORD, "table", "Name  | Qty\n------+----\napple |   3"),
    (SLACK, "code block holding a fence", "`\u200b`\u200b`\nx\n`\u200b`\u200b`"),
]


@pytest.mark.parametrize(("dialect", "case_id", "seen"), SEEN, ids=[f"{s[0].name}-{s[1]}" for s in SEEN])
def test_plain_is_what_a_reader_sees(dialect: Dialect, case_id: str, seen: str) -> None:
    markdown = next(c[1] for c in CASES if c[0] == case_id)
    assert "".join(atom.char for atom in render_atoms(markdown, dialect)) == seen
    assert readback.plain(render(markdown, dialect), dialect) == seen


URLS = [
    ("https://x.io", "https://x.io"), ("  http://x.io  ", "http://x.io"), ("tg://user?id=1", "tg://user?id=1"),
    ("mailto:a@b.c", "mailto:a@b.c"), ("HTTPS://X.IO", "HTTPS://X.IO"), ("javascript:alert(1)", None),
    ("JavaScript:x", None), ("data:text/html,x", None), ("vbscript:x", None), ("/relative", None),
    ("x.io", None), ("", None), (None, None),
]


@pytest.mark.parametrize(("url", "safe"), URLS)
def test_link_allow_list(url: object, safe: str | None) -> None:
    assert safe_url(url) == safe


QUOTES = [
    ("a\nb", "> a\n> b"),
    ("a\n\n```\ncode\n```\n\nb", "> a\n\n```\ncode\n```\n\n> b"),
    ("```py\n> not a quote\n```", "```py\n> not a quote\n```"),
    ("a\n\nb", "> a\n> \n> b"),
]


@pytest.mark.parametrize(("inner", "quoted"), QUOTES)
def test_quote_lines_leave_code_alone(inner: str, quoted: str) -> None:
    atoms = quote_lines(readback.atoms(inner, DISCORD), Atom("> ", "", "quote", Mark.PREFIX))
    assert "".join(atom.raw for atom in atoms) == quoted


def test_slack_never_sends_a_broadcast_or_group_ping() -> None:
    rendered = render("<!channel> <!here|here> <!everyone> <!subteam^S1|@team> **<!here>** [x](https://a.io/<!here>)",
                      SLACK)
    assert "<!" not in rendered
    assert rendered.count("&lt;!") == 6


def test_discord_everyone_and_here_are_neutralised_everywhere_but_code() -> None:
    rendered = render("@everyone **@here** [@everyone](https://x.io) `@here`\n\n```\n@everyone\n```", DISCORD)
    assert re.findall(r"@(?:everyone|here)", outside_code(rendered)) == []
    assert "`@here`" in rendered and "```\n@everyone\n```" in rendered  # code is shown, never pings


def test_discord_keeps_urls_linkable() -> None:
    markdown = "see https://x.io/a_b*c and **https://y.io/~u**"
    rendered = render(markdown, DISCORD)
    assert "https://x.io/a_b" in rendered and "https://y.io/" in rendered
    shown = "".join(atom.char for atom in render_atoms(markdown, DISCORD))
    assert shown == "see https://x.io/a_b*c and https://y.io/~u"


MARKDOWNISH = st.lists(st.sampled_from(
    list("ab c*_~`#>-+1.|[]()<>&!\\\"':/@\n ") + ["😀", "```", "```py\n", "    ", "https://x.io/a_b", "javascript:",
                                                  "| a | b |\n|---|---|\n", "&amp;", "<b>", "</b>", "\n\n", "<@U1>",
                                                  "<!here>", "@everyone", "\u200b", "**", "~~"]),
    max_size=80).map("".join)


@settings(max_examples=300, deadline=None)
@given(MARKDOWNISH)
def test_any_markdown_renders_as_its_atoms_in_every_dialect(markdown: str) -> None:
    for dialect in DIALECTS:
        rendered = render(markdown, dialect)
        atoms = render_atoms(markdown, dialect)
        assert "".join(atom.raw for atom in atoms) == rendered, dialect.name
        assert not (set(rendered) & set("\ud800\udfff")), dialect.name
    assert "<!" not in render(markdown, SLACK)
    assert not re.search(r"@(everyone|here)", outside_code(render(markdown, DISCORD)))


def outside_code(rendered: str) -> str:
    """Discord text outside code spans and blocks (where a mention would resolve)."""
    depth, out = 0, []
    for atom in readback.atoms(rendered, DISCORD):
        if atom.tag in ("code", "pre"):
            depth += 1 if atom.mark is Mark.OPEN else -1
        elif depth == 0:
            out.append(atom.raw)
    return "".join(out)


def test_slack_link_text_holds_no_mention_markup() -> None:
    rendered = render("[ask <@U123>](https://x.io) or <@U123>", SLACK)
    assert rendered == "<https://x.io|ask &lt;@U123&gt;> or <@U123>"
    assert readback.plain(rendered, SLACK) == "ask <@U123> or <@U123>"


def test_the_same_style_inside_itself_is_written_once() -> None:
    assert render("*a *b* c*", TELEGRAM) == "<i>a b c</i>"
    assert render("*a *b* c*", SLACK) == f"{Z}_a b c_{Z}"
    assert render("*a *b* c*", DISCORD) == "_a b c_"



# -- the plain-line fast path ----------------------------------------------------------------

_FAST_ALPHABET = st.sampled_from(list("ab Z09.,:;!?'\"()-+=#>|*_`~[]<>&\\/@%$^{}") +
                                 ["\u00a0", "\u2003", "\u2028", "\x0b", "\x0c", "é", "日", "😀", "\n", "\t", "1.", "2)"])


@pytest.mark.parametrize(("dialect", "shape"), [(PLAIN, CONSOLE_SHAPE), (TELEGRAM, TELEGRAM_SHAPE),
                                                (SLACK, SLACK_SHAPE), (DISCORD, DISCORD_SHAPE)],
                         ids=["plain", "telegram", "slack", "discord"])
@settings(max_examples=400, deadline=None)
@given(text=st.one_of(st.lists(_FAST_ALPHABET, max_size=40).map("".join),
                      st.text(alphabet="ab Z09.,:;!?'\"()-+=#>|/@%$^{}é日😀\u00a0\u2003\u2028\x0b\x0c", max_size=60)))
def test_plain_lines_skip_the_parser_and_render_the_same(dialect: Dialect, shape: MessageShape, text: str) -> None:
    slow = _strip_lines(_Walker(dialect).blocks(SyntaxTreeNode(_MD.parse(text)).children, in_quote=False))
    assert render(text, dialect) == "".join(atom.raw for atom in slow)
    assert render_atoms(text, dialect) == slow
    assert render_chunks(text, dialect, shape) == split(slow, dialect, shape)


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
@settings(max_examples=300, deadline=None)
@given(text=st.one_of(MARKDOWNISH, st.lists(_FAST_ALPHABET, max_size=40).map("".join)))
def test_verbatim_text_is_written_as_it_is(dialect: Dialect, text: str) -> None:
    if dialect.verbatim(text):
        assert "".join(atom.raw for atom in dialect.text(text)) == text


def test_what_takes_the_fast_path() -> None:
    assert plain_line("  echo: hello, world!  ") == "echo: hello, world!"
    assert plain_line("2024-05-01 was a Wednesday") is not None
    for markdown in ("**bold**", "- item", "1. first", "# title", "> quote", "a\nb", "    code", "a & b", "<b>",
                     "x_y", "`c`", "[a](b)", "~~s~~", "3) third", "+ item", "| a |"):
        assert plain_line(markdown) is None, markdown
