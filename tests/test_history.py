"""The history pipeline, as tables of message lists."""

from bot.agent.history import (
    CLEARED_RESULT,
    MISSING_RESULT,
    build_history,
    estimate_tokens,
    limit_turns,
    prune_tool_results,
    repair_pairing,
)
from bot.llm import Message, Role, TextPart, ToolCall, ToolResult

U = Message.user
A = Message.assistant


def call(*ids: str, text: str = "") -> Message:
    parts = ((TextPart(text),) if text else ()) + tuple(ToolCall(i, "read_file", "{}") for i in ids)
    return Message(Role.ASSISTANT, parts)


def results(*pairs: tuple[str, str]) -> Message:
    return Message(Role.TOOL, tuple(ToolResult(i, content) for i, content in pairs))


def test_limit_turns_keeps_whole_turns() -> None:
    h = [U("1"), A("a1"), U("2"), call("c1"), results(("c1", "r")), A("a2"), U("3"), A("a3")]
    assert limit_turns(h, 2) == h[2:]
    assert limit_turns(h, 1) == h[6:]
    assert limit_turns(h, 10) == h
    assert limit_turns(h, 0) == []


def test_repair_drops_orphans_and_fills_missing_results() -> None:
    h = [results(("old", "x")), U("q"), call("c1", "c2"), results(("c2", "two"), ("zz", "stray")), A("done")]
    repaired = repair_pairing(h)
    assert [m.role for m in repaired] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    got = repaired[2].tool_results
    assert [r.tool_call_id for r in got] == ["c1", "c2"]  # the call order, not the stored order
    assert got[0].content == MISSING_RESULT and got[0].is_error
    assert got[1].content == "two"


def test_repair_adds_results_for_a_call_at_the_very_end() -> None:
    repaired = repair_pairing([U("q"), call("c1")])
    assert repaired[-1] == Message(Role.TOOL, (ToolResult("c1", MISSING_RESULT, is_error=True),))


def test_repair_merges_results_split_over_messages() -> None:
    h = [U("q"), call("a", "b"), results(("a", "1")), results(("b", "2"))]
    assert repair_pairing(h)[2] == results(("a", "1"), ("b", "2"))


def test_repair_leaves_a_valid_history_alone() -> None:
    h = [U("q"), call("c1"), results(("c1", "r")), A("ok")]
    assert repair_pairing(h) == h


def test_small_history_is_not_pruned() -> None:
    h = [U("q"), call("c1"), results(("c1", "x" * 10_000)), A("ok")]
    assert prune_tool_results(h, context_window=1_000_000) == h


def test_soft_trim_keeps_head_and_tail_outside_the_protected_zone() -> None:
    big = "H" * 1500 + "M" * 7000 + "T" * 1500
    h = [U("q"), call("c1"), results(("c1", big))] + [m for i in range(3) for m in (U(f"u{i}"), A(f"a{i}"))]
    pruned = prune_tool_results(h, context_window=6_000)  # 10,000 characters of results: too few to clear
    trimmed = pruned[2].tool_results[0].content
    assert trimmed.startswith("H" * 1500) and trimmed.endswith("T" * 1500) and "M" * 10 not in trimmed
    assert "7,000 characters trimmed" in trimmed


def test_protected_zone_is_never_pruned() -> None:
    big = "x" * 20_000
    h = [U("q"), call("c1"), results(("c1", big)), A("a1")]  # the only assistants are the last three
    assert prune_tool_results(h, context_window=1_000) == h


def test_hard_clear_oldest_first_until_under_threshold() -> None:
    h = [U("q")]
    for i in range(6):
        h += [call(f"c{i}"), results((f"c{i}", "y" * 60_000))]
    h += [U("next"), A("a"), U("more"), A("b"), U("last"), A("c")]
    pruned = prune_tool_results(h, context_window=5_000)  # soft trimming alone leaves ~0.9
    contents = [m.tool_results[0].content for m in pruned if m.role is Role.TOOL]
    assert contents[:3] == [CLEARED_RESULT] * 3  # the oldest went first
    assert contents[-1] != CLEARED_RESULT and "trimmed" in contents[-1]  # cleared only as far as needed
    assert estimate_tokens(pruned) / 5_000 < 0.5


def test_build_history_runs_all_three_stages() -> None:
    h = [U("old"), A("x"), U("q"), call("c1"), A("answer without result")]
    built = build_history(h, max_turns=1, context_window=100_000)
    assert [m.role for m in built] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
