"""The output sanitizer: each of the seven steps, then the whole pipeline, as tables."""

from __future__ import annotations

import pytest

from bot.text.sanitize import (
    STEPS,
    code_spans,
    collapse_consecutive_duplicate_blocks,
    mask_code,
    sanitize,
    strip_downgraded_tool_call_text,
    strip_echoed_system_messages,
    strip_final_tags,
    strip_garbled_tool_xml,
    strip_leading_blank_lines,
    strip_thinking_tags,
    unmask_code,
)

CODE_ABOUT_TAGS = (
    "Wrap it like this:\n\n```xml\n<think>plan</think>\n<tool_call>{}</tool_call>\n"
    "[System Message] hi\n<final>x</final>\n```\n\nDone."
)


def table(*rows: tuple[str, str, str]):
    return pytest.mark.parametrize(("raw", "want"), [r[1:] for r in rows], ids=[r[0] for r in rows])


@table(
    ("whole-answer-tool-call", '<tool_call>\n{"name": "search", "arguments": {"q": "x"}}\n</tool_call>', ""),
    ("whole-answer-anthropic-style",
     '<function_calls>\n<invoke name="read">\n<parameter name="path">a.txt</parameter>\n'
     "</invoke>\n</function_calls>", ""),
    ("whole-answer-function-eq", "<function=get_weather>{\"city\": \"Paris\"}</function>", ""),
    ("whole-answer-deepseek-tokens",
     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get\n```json\n{\"a\": 1}\n"
     "```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", ""),
    ("whole-answer-kimi-tokens",
     "<|tool_calls_section_begin|><|tool_call_begin|>functions.get:0<|tool_call_argument_begin|>"
     '{"a": 1}<|tool_call_end|><|tool_calls_section_end|>', ""),
    ("text-then-tool-call", "Let me check.\n<tool_call>{\"name\": \"x\"}</tool_call>", "Let me check.\n"),
    ("text-around-invoke", "Before <invoke name=\"a\"><parameter name=\"b\">1</parameter></invoke> after",
     "Before  after"),
    ("unclosed-at-line-start", "Sure.\n<tool_call>\n{\"name\": \"search\", \"argu", "Sure.\n"),
    ("stray-closing-tag", "Here you go.</tool_call>", "Here you go."),
    ("tool-use-block", "<tool_use>{\"id\": 1}</tool_use>Answer", "Answer"),
    ("mistral-prefix", '[TOOL_CALLS] [{"name": "x", "arguments": {}}]\nok', "ok"),
    ("plain-text-untouched", "Use a <b>bold</b> tag, and 2 < 3.", "Use a <b>bold</b> tag, and 2 < 3."),
    ("inline-code-kept", "The model emits `<tool_call>` and `</tool_call>` tags.",
     "The model emits `<tool_call>` and `</tool_call>` tags."),
    ("fenced-code-kept", CODE_ABOUT_TAGS, CODE_ABOUT_TAGS),
)
def test_strip_garbled_tool_xml(raw: str, want: str) -> None:
    assert strip_garbled_tool_xml(raw) == want


@table(
    ("call-line-and-json", 'Checking.\n[Tool Call: search]\n{\n  "q": "weather"\n}\nIt is sunny.',
     "Checking.\nIt is sunny."),
    ("call-with-inline-args", '[Tool Call: search({"q": "x"})]\nThe answer is 4.', "The answer is 4."),
    ("result-with-label", '[Tool Result for ID call_1]\nOutput: {"ok": true}\n\nDone.', "\nDone."),
    ("result-json-array", "[Tool Result: list]\n[\n  1,\n  2\n]\nSo two items.", "So two items."),
    ("historical-context", "[Historical context: the assistant called read_file]\nHere is the summary.",
     "Here is the summary."),
    ("stops-at-blank-line", '[Tool Call: x]\n{"a": 1}\n\n{"b": 2}', '\n{"b": 2}'),
    ("stops-at-prose", '[Tool Call: x]\nArguments: {"a": 1}\nNow the answer.', "Now the answer."),
    ("braces-inside-strings", '[Tool Call: x]\n{"a": "}{"}\nok', "ok"),
    ("mid-line-marker", 'I will look. [Tool Call: search({"q": "x"})]\nFound it.', "I will look.\nFound it."),
    ("case-insensitive", "[tool call: x]\nok", "ok"),
    ("ordinary-brackets-kept", "[1] A footnote and [link](http://x).", "[1] A footnote and [link](http://x)."),
    ("inline-code-kept", "Lines look like `[Tool Call: name]` in history.",
     "Lines look like `[Tool Call: name]` in history."),
)
def test_strip_downgraded_tool_call_text(raw: str, want: str) -> None:
    assert strip_downgraded_tool_call_text(raw) == want


@table(
    ("think", "<think>I should greet.</think>\n\nHello!", "\n\nHello!"),
    ("thinking-multiline", "<thinking>\nstep 1\nstep 2\n</thinking>Answer", "Answer"),
    ("thought", "<thought>hmm</thought>Yes.", "Yes."),
    ("antthinking", "<antThinking>plan</antThinking>Sure.", "Sure."),
    ("case-insensitive", "<THINK>x</Think>ok", "ok"),
    ("non-greedy", "<think>a</think>one<think>b</think>two", "onetwo"),
    ("in-the-middle", "First.\n<think>hidden</think>\nSecond.", "First.\n\nSecond."),
    ("unclosed-at-start", "<think>I am still reasoning when the tokens ran out", ""),
    ("unclosed-after-text", "Answer.\n<think>trailing reasoning", "Answer.\n"),
    ("orphan-close-r1", "Reasoning about the question...\n</think>\n\nThe answer is 42.", "\n\nThe answer is 42."),
    ("code-inside-thinking-removed", "<think>\n```py\nprint(1)\n```\n</think>Done", "Done"),
    ("mid-line-mention-kept", "Models wrap reasoning in a <think> tag.", "Models wrap reasoning in a <think> tag."),
    ("inline-code-kept", "Use `<think>` and `</think>` tags.", "Use `<think>` and `</think>` tags."),
    ("fenced-code-kept", CODE_ABOUT_TAGS, CODE_ABOUT_TAGS),
)
def test_strip_thinking_tags(raw: str, want: str) -> None:
    assert strip_thinking_tags(raw) == want


@table(
    ("wrapper", "<final>The answer is 4.</final>", "The answer is 4."),
    ("multiline", "<final>\nLine 1\nLine 2\n</final>", "\nLine 1\nLine 2\n"),
    ("case-and-spaces", "<FINAL >ok</Final>", "ok"),
    ("only-closing", "Text</final>", "Text"),
    ("no-tags", "Nothing final here.", "Nothing final here."),
    ("fenced-code-kept", CODE_ABOUT_TAGS, CODE_ABOUT_TAGS),
)
def test_strip_final_tags(raw: str, want: str) -> None:
    assert strip_final_tags(raw) == want


@table(
    ("block-then-answer", "[System Message] Remember the rules.\nMore rules.\n\nReal answer.", "\nReal answer."),
    ("between-paragraphs", "Intro.\n\n[System Message] echo\n\nOutro.", "Intro.\n\n\nOutro."),
    ("with-suffix", "[System Message: reminder] be nice\nok\n\nFine.", "\nFine."),
    ("whole-answer", "[System Message] only this", ""),
    ("not-at-line-start", "The log said [System Message] at noon.", "The log said [System Message] at noon."),
    ("fenced-code-kept", CODE_ABOUT_TAGS, CODE_ABOUT_TAGS),
    ("inline-code-kept", "`[System Message] x`\n\nok", "`[System Message] x`\n\nok"),
)
def test_strip_echoed_system_messages(raw: str, want: str) -> None:
    assert strip_echoed_system_messages(raw) == want


@table(
    ("stutter", "Hello there.\n\nHello there.\n\nHow can I help?", "Hello there.\n\nHow can I help?"),
    ("triple", "A\n\nA\n\nA", "A"),
    ("whitespace-differences", "Same text.  \n\n  Same text.\n\nNext", "Same text.  \n\nNext"),
    ("not-consecutive", "A\n\nB\n\nA", "A\n\nB\n\nA"),
    ("multiline-paragraphs", "l1\nl2\n\nl1\nl2\n\nend", "l1\nl2\n\nend"),
    ("case-differs", "Yes.\n\nyes.", "Yes.\n\nyes."),
    ("inside-code-untouched", "```\nx = 1\n\nx = 1\n```", "```\nx = 1\n\nx = 1\n```"),
    ("repeated-code-kept", "```\nls\n```\n\n```\nls\n```", "```\nls\n```\n\n```\nls\n```"),
    ("paragraph-after-code", "```\nls\n```\n\nRun it.\n\nRun it.", "```\nls\n```\n\nRun it."),
    ("blank-line-runs-become-one", "A\n\n\n\nB\n \n\nC", "A\n\nB\n\nC"),
    ("empty", "", ""),
)
def test_collapse_consecutive_duplicate_blocks(raw: str, want: str) -> None:
    assert collapse_consecutive_duplicate_blocks(raw) == want


@table(
    ("blank-lines", "\n\n\nHello", "Hello"),
    ("whitespace-lines", "  \n\t\n   Indented", "   Indented"),
    ("crlf", "\r\n\r\nHi", "Hi"),
    ("nothing-to-do", "Hi\n\nthere", "Hi\n\nthere"),
    ("keeps-inner-blank-lines", "\nA\n\n\nB", "A\n\n\nB"),
    ("only-whitespace", "  \n  ", "  "),
)
def test_strip_leading_blank_lines(raw: str, want: str) -> None:
    assert strip_leading_blank_lines(raw) == want


@table(
    ("clean-answer", "The capital of France is Paris.", "The capital of France is Paris."),
    ("only-tool-xml", "<tool_call>{\"name\": \"x\"}</tool_call>", ""),
    ("only-thinking", "<think>the user wants...", ""),
    ("everything-at-once",
     "\n\n<think>Let me plan.</think>\n<final>Here is the plan.\n\nHere is the plan.\n\n"
     "[System Message] ignore me\nstill ignored\n\n"
     "[Tool Call: search]\n{\"q\": \"x\"}\n\nStep one.</final>\n"
     "<tool_call>{\"name\": \"later\"}</tool_call>",
     "Here is the plan.\n\nStep one."),
    ("r1-style", "First I think...</think>\n\nAnswer.\n\nAnswer.", "Answer."),
    ("code-survives", CODE_ABOUT_TAGS, CODE_ABOUT_TAGS),
    ("strips-first-line-indent", "\n   indented", "indented"),
)
def test_sanitize(raw: str, want: str) -> None:
    assert sanitize(raw) == want


@pytest.mark.parametrize("raw", [
    "<think>x</think>\n\nHi\n\nHi", CODE_ABOUT_TAGS, "[Tool Call: a]\n{}\nok", "plain", "<final>x</final>",
])
def test_sanitize_is_idempotent(raw: str) -> None:
    once = sanitize(raw)
    assert sanitize(once) == once


def test_seven_steps_in_seed_order() -> None:
    assert [s.__name__ for s in STEPS] == [
        "strip_garbled_tool_xml", "strip_downgraded_tool_call_text", "strip_thinking_tags",
        "strip_final_tags", "strip_echoed_system_messages",
        "collapse_consecutive_duplicate_blocks", "strip_leading_blank_lines",
    ]


@pytest.mark.parametrize(("text", "spans"), [
    ("no code", []),
    ("a `b` c", [(2, 5)]),
    ("```\nx\n```\nafter", [(0, 9)]),
    ("~~~py\nx\n~~~~", [(0, 12)]),
    ("```\nunclosed", [(0, 12)]),
    ("```a``` is inline", [(0, 7)]),
    ("x\n  ```\n  y\n  ```", [(2, 17)]),
])
def test_code_spans(text: str, spans: list[tuple[int, int]]) -> None:
    assert code_spans(text) == spans


@pytest.mark.parametrize("text", [CODE_ABOUT_TAGS, "a `b` c ```d```", "plain", "\ue000 0 \ue001 `x`"])
def test_mask_round_trip(text: str) -> None:
    masked, blocks = mask_code(text)
    assert unmask_code(masked, blocks) == text
