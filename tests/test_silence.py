"""NO_REPLY: silence detection, token removal, the final decision, streaming holdback."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.text.silence import (
    NO_REPLY,
    NOTHING_TO_ADD,
    NoReplyHoldback,
    final_answer,
    is_silent,
    strip_no_reply,
)


def rows(*cases: tuple[str, str, object]):
    return pytest.mark.parametrize(("text", "want"), [c[1:] for c in cases], ids=[c[0] for c in cases])


@rows(
    ("exact", "NO_REPLY", True),
    ("lowercase", "no_reply", True),
    ("mixed-case", "No_Reply", True),
    ("whitespace", "  \n NO_REPLY \n", True),
    ("period", "NO_REPLY.", True),
    ("lowercase-period", "no_reply.", True),
    ("punctuation", "NO_REPLY!…;:,", True),
    ("bold", "**NO_REPLY**", True),
    ("italic-underscores", "_NO_REPLY_", True),
    ("backticks", "`NO_REPLY`", True),
    ("fenced-ish", "```NO_REPLY```", True),
    ("quotes", '"NO_REPLY"', True),
    ("curly-quotes", "“NO_REPLY”", True),
    ("markdown-escaped", "NO\\_REPLY", True),
    ("repeated", "NO_REPLY\n\nNO_REPLY", True),
    ("no-alone", "NO", False),
    ("prefix", "NO_", False),
    ("no-reply-needed", "No reply needed", False),
    ("space-instead-of-underscore", "NO REPLY", False),
    ("longer-word", "NO_REPLY_NEEDED", False),
    ("glued-to-word", "xNO_REPLY", False),
    ("with-text", "Sure. NO_REPLY", False),
    ("empty", "", False),
    ("punctuation-only", "...", False),
    ("question", "NO_REPLY?", False),
)
def test_is_silent(text: str, want: bool) -> None:
    assert is_silent(text) is want


@rows(
    ("plain", "Hello there.", "Hello there."),
    ("trailing-after-paragraph", "Sure, done.\n\nNO_REPLY", "Sure, done."),
    ("trailing-same-line", "Noted. NO_REPLY", "Noted."),
    ("trailing-with-punctuation", "Noted. **NO_REPLY**.", "Noted."),
    ("trailing-backticks", "Done. `NO_REPLY`", "Done."),
    ("trailing-lowercase", "ok then no_reply", "ok then"),
    ("trailing-twice", "Bye.\nNO_REPLY\nNO_REPLY.", "Bye."),
    ("leading", "NO_REPLY\n\nActually, one thing: call Bob.", "Actually, one thing: call Bob."),
    ("leading-same-line", "NO_REPLY. Actually, yes.", "Actually, yes."),
    ("inside-sentence", "I reply NO_REPLY when nothing is needed.", "I reply when nothing is needed."),
    ("inside-with-comma", "Say NO_REPLY, then stop.", "Say, then stop."),
    ("inside-bold", "Use **NO_REPLY** sparingly.", "Use sparingly."),
    ("alone-on-line", "A\nNO_REPLY\nB", "A\nB"),
    ("alone-between-paragraphs", "A\n\nNO_REPLY\n\nB", "A\n\nB"),
    ("end-of-line", "First NO_REPLY\nSecond", "First\nSecond"),
    ("no-double-spaces", "a NO_REPLY b NO_REPLY c", "a b c"),
    ("not-a-token", "NO_REPLY_NEEDED is a flag", "NO_REPLY_NEEDED is a flag"),
    ("no-alone", "NO", "NO"),
    ("inline-code-kept", "Set `NO_REPLY` in the config.", "Set `NO_REPLY` in the config."),
    ("fenced-code-kept", "Example:\n```py\nx = NO_REPLY\n```\nThat is all.",
     "Example:\n```py\nx = NO_REPLY\n```\nThat is all."),
)
def test_strip_no_reply(text: str, want: str) -> None:
    assert strip_no_reply(text) == want


@pytest.mark.parametrize(("raw", "is_group", "want"), [
    ("NO_REPLY", False, None),
    ("NO_REPLY", True, None),
    ("<think>nothing to say</think>\n**no_reply**", True, None),
    ("", True, None),
    ("", False, NOTHING_TO_ADD),
    ("<think>ran out of tokens", True, None),
    ("<think>ran out of tokens", False, NOTHING_TO_ADD),
    ("<tool_call>{}</tool_call>", False, NOTHING_TO_ADD),
    ("Hello!", True, "Hello!"),
    ("Hello!\n\nNO_REPLY", False, "Hello!"),
    ("Reply NO_REPLY when unsure.", True, "Reply when unsure."),
], ids=["dm-silent", "group-silent", "silent-after-sanitizing", "group-empty", "dm-empty",
        "group-only-thinking", "dm-only-thinking", "dm-only-tool-xml", "text", "trailing", "inside"])
def test_final_answer(raw: str, is_group: bool, want: str | None) -> None:
    assert final_answer(raw, is_group=is_group) == want


def test_nothing_to_add_is_a_sentence() -> None:
    assert NOTHING_TO_ADD.endswith(".") and "..." not in NOTHING_TO_ADD and NO_REPLY not in NOTHING_TO_ADD


def stream(text: str, size: int) -> tuple[list[str], str]:
    holdback = NoReplyHoldback()
    parts = [holdback.feed(text[i:i + size]) for i in range(0, len(text), size)]
    return parts, holdback.finish()


STREAMED = [
    "NO_REPLY", "no_reply.", "**NO_REPLY**", "`NO_REPLY`", "  NO_REPLY  ", "NO", "NO_", "No reply needed",
    "Nope.", "Hello world", "Sure.\n\nNO_REPLY", "Sure.\n\nNO_", "Sure. NO_REPLY!", "reply NO_REPLY when asked",
    "NO_REPLY\n\nActually, here you go.", "A\nNO_REPLY\nB", "Use `NO_REPLY` here.", "```\nNO_REPLY\n```\nok",
    "Nothing NO_REPLY_NEEDED", "Now.", "N", "", "   ", "*", "Done. `NO_REPLY`", "a NO_REPLY b NO_REPLY",
    "The word NO is fine", "Sure.\nNO_REPLY\nNO_REPLY",
]


@pytest.mark.parametrize("size", [1, 2, 3, 1000])
@pytest.mark.parametrize("text", STREAMED)
def test_holdback_releases_exactly_the_final_text(text: str, size: int) -> None:
    parts, rest = stream(text, size)
    want = "" if is_silent(text) else strip_no_reply(text)
    assert "".join(parts) + rest == want
    shown = ""
    for part in parts:  # every step shows a prefix of the final text
        shown += part
        assert want.startswith(shown)


@pytest.mark.parametrize("text", ["NO_REPLY", "no_reply", "**NO_REPLY**.", "  `NO_REPLY`  "])
def test_holdback_never_leaks_a_silent_answer(text: str) -> None:
    parts, rest = stream(text, 1)
    assert parts == [""] * len(text)
    assert rest == ""


def test_holdback_releases_as_soon_as_silence_is_ruled_out() -> None:
    holdback = NoReplyHoldback()
    assert holdback.feed("No") == ""
    assert holdback.feed(" ") == "No"  # "No " can no longer become NO_REPLY
    assert holdback.feed("reply needed") == " reply needed"
    assert holdback.finish() == ""


def test_holdback_holds_a_trailing_partial_token() -> None:
    holdback = NoReplyHoldback()
    assert holdback.feed("Sure.") == "Sure."
    assert holdback.feed("\n\nNO_") == ""
    assert holdback.feed("REPLY") == ""
    assert holdback.finish() == ""


def test_holdback_releases_a_disproven_tail() -> None:
    holdback = NoReplyHoldback()
    assert holdback.feed("Sure. N") == "Sure."
    assert holdback.feed("ot now.") == " Not now."
    assert holdback.finish() == ""


FRAGMENTS = st.sampled_from([
    "NO_REPLY", "no_reply", "NO_", "N", "O", "NO\\_REPLY", " ", "\n", "\n\n", ".", ",", "?", "*", "_", "`",
    "```", "~~~", '"', "a", "Hi", "x y", "é",
])


@settings(max_examples=400, database=None, suppress_health_check=list(HealthCheck))
@given(st.lists(FRAGMENTS | st.text(alphabet="NO_REPLYno \n.`*_ab", max_size=6), max_size=12),
       st.integers(min_value=1, max_value=6))
def test_holdback_property(fragments: list[str], size: int) -> None:
    text = "".join(fragments)
    parts, rest = stream(text, size)
    want = "" if is_silent(text) else strip_no_reply(text)
    shown = ""
    for part in parts:
        shown += part
        assert want.startswith(shown)
    assert shown + rest == want


@given(st.text(alphabet="noNO_REPLYrepl \n\t*`.!xX9😀\\", max_size=30))
@settings(max_examples=3000, database=None, deadline=None)
def test_tail_start_scan_equals_the_regex(text: str) -> None:
    from bot.text.silence import _TAIL, tail_start

    expected = _TAIL.search(text, 0, len(text))
    assert expected is not None
    assert tail_start(text, len(text)) == expected.start()
