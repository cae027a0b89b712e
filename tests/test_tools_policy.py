"""Tool policy: the rules as a table, the config forms, the restricted registry, and a
group's rules driven through the real agent loop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.config import AccessConfig
from bot.config.tools import ToolsConfig
from bot.conversation import Conversation
from bot.errors import ConfigError
from bot.llm import ToolCall
from bot.messages import ChatType
from bot.settings import Config, load_config
from bot.tools import ToolContext, ToolPolicy, ToolRules, builtin_registry, policy_for
from tests.fakes.llm_server import Call
from tests.test_tools_loop import Loop, offered
from tests.test_tools_loop import loop as loop  # noqa: F401  (the fixture)

ALL = ("read_file", "write_file", "edit_file", "list_files", "search_files", "memory_search", "memory_get", "exec")


def tools_cfg(**kw: Any) -> ToolsConfig:
    return ToolsConfig.model_validate(kw)


GROUPS = AccessConfig.model_validate({"groups": [
    "-1",
    {"id": "-2", "tools": {"allow": ["read_file", "memory_*"]}},
    {"id": "-3", "tools": {"deny": ["*_file"]}},
    {"id": "-4", "tools": {"allow": []}},
]})
STAR = AccessConfig.model_validate({"groups": [{"id": "*", "tools": {"deny": ["memory_*"]}}, "-9"]})

POLICY_CASES = [
    # (case, tools config, access, chat type, chat, owner, offered)
    ("defaults: exec for owners only", {}, GROUPS, "dm", "u", False, ALL[:-1]),
    ("defaults, owner", {}, GROUPS, "dm", "u", True, ALL),
    ("global allow with a glob", {"allow": ["read_*", "memory_*"]}, None, "dm", "u", True,
     ("read_file", "memory_search", "memory_get")),
    ("global deny wins over allow", {"allow": ["*"], "deny": ["exec", "write_file"]}, None, "dm", "u", True,
     tuple(n for n in ALL if n not in ("exec", "write_file"))),
    ("owners_only emptied", {"owners_only": []}, None, "dm", "u", False, ALL),
    ("plain group id: global rules only", {}, GROUPS, "group", "-1", False, ALL[:-1]),
    ("group allow narrows", {}, GROUPS, "group", "-2", True, ("read_file", "memory_search", "memory_get")),
    ("group allow cannot widen the global allow", {"allow": ["memory_get"]}, GROUPS, "group", "-2", True,
     ("memory_get",)),
    ("group deny", {}, GROUPS, "group", "-3", False, ("list_files", "search_files", "memory_search", "memory_get")),
    ("group allow [] offers nothing", {}, GROUPS, "group", "-4", True, ()),
    ("group rules never reach a DM", {}, GROUPS, "dm", "-4", True, ALL),
    ("unlisted group falls back to *", {}, STAR, "group", "-7", True,
     tuple(n for n in ALL if not n.startswith("memory_"))),
    ("a listed group does not take the * rules", {}, STAR, "group", "-9", True, ALL),
    ("no access config (console)", {"deny": ["exec"]}, None, "group", "-2", True, ALL[:-1]),
]


@pytest.mark.parametrize(("config", "access", "chat_type", "chat", "owner", "expected"),
                         [c[1:] for c in POLICY_CASES], ids=[c[0] for c in POLICY_CASES])
def test_policy_table(config: dict[str, Any], access: AccessConfig | None, chat_type: str, chat: str, owner: bool,
                      expected: tuple[str, ...]) -> None:
    policy = policy_for(tools_cfg(**config), access, platform="telegram", chat_type=chat_type, chat_id=chat,
                        is_owner=owner)
    assert tuple(n for n in ALL if policy.permits(n)) == expected


def test_refusals_say_which_rule() -> None:
    policy = policy_for(tools_cfg(deny=["exec"]), GROUPS, platform="telegram", chat_type="group", chat_id="-2",
                        is_owner=False)
    assert policy.refusal("exec") == "denied by tools.deny"
    assert policy.refusal("write_file") == "not in channels.telegram.groups[-2].tools.allow"
    assert ToolPolicy(owners_only=("exec",)).refusal("exec") == "for owners only"
    from adapters.slack.config import SlackConfig

    slack = SlackConfig.model_validate({"channels": [{"id": "C1", "tools": {"allow": ["read_file"]}}]})
    on_slack = policy_for(tools_cfg(), slack, platform="slack", chat_type="group", chat_id="C1", is_owner=False)
    assert on_slack.refusal("write_file") == "not in channels.slack.channels[C1].tools.allow"  # Slack's own key
    assert ToolPolicy((ToolRules("tools", deny=("x",)),)).refusal("read_file") is None


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def test_config_groups_take_plain_ids_and_mappings(tmp_path: Path, key: None) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("tools: {deny: [exec], owners_only: [write_*]}\n"
                    "channels:\n  telegram:\n    groups:\n      - -100\n      - id: -200\n"
                    "        tools: {allow: [read_file]}\n")
    cfg = load_config(path)
    groups = cfg.channels.telegram.groups
    assert [g.id for g in groups] == ["-100", "-200"] and groups[1].tools.allow == ("read_file",)
    assert cfg.channels.telegram.group("-100") is groups[0] and cfg.channels.telegram.group("-300") is None
    assert cfg.tools.deny == ("exec",) and cfg.tools.owners_only == ("write_*",) and cfg.tools.allow is None
    assert Config().tools.owners_only == ("exec",) and not Config().tools.web_fetch.enabled


@pytest.mark.parametrize(("yaml", "error"), [
    ("channels: {telegram: {groups: [-1, {id: -1}]}}", "channels.telegram: groups lists -1 more than once"),
    ("channels: {telegram: {groups: [{id: -1, tools: {deny: ['rm -rf']}}]}}",
     "channels.telegram.groups[0].tools.deny[0]: not a tool name or a glob"),
    ("channels: {telegram: {groups: [{tools: {}}]}}", "channels.telegram.groups[0].id"),
    ("tools: {allow: read_file}", "tools.allow"),
])
def test_config_mistakes_name_the_key(tmp_path: Path, key: None, yaml: str, error: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml + "\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(error), str(caught.value)


async def test_restricted_registry_offers_and_runs_only_permitted_tools(tmp_path: Path) -> None:
    registry = builtin_registry()
    policy = ToolPolicy((ToolRules("tools", allow=("read_file", "list_files")),))
    view = registry.restricted(policy)
    assert view.names() == ("read_file", "list_files") and [s.name for s in view.specs()] == list(view.names())
    assert registry.restricted(policy) is view and registry.restricted(None) is registry
    ctx = ToolContext(tmp_path, Conversation.of_key("agent:main:test:dm:u"), "r", "main", "u")
    [refused, unknown] = await view.execute([ToolCall("a", "write_file", json.dumps({"path": "x", "content": "x"})),
                                             ToolCall("b", "nope", "{}")], ctx)
    assert refused.is_error and refused.content == (
        "write_file is not available in this chat (not in tools.allow); available tools: list_files, read_file")
    assert unknown.is_error and unknown.content.startswith("unknown tool 'nope'")
    assert not (tmp_path / "x").exists()


async def test_group_policy_through_the_loop(loop: Loop) -> None:  # noqa: F811
    """The run of a group with its own rules is offered only what they allow, and a call to
    another tool is refused; the same person in a DM gets the global set."""
    registry = builtin_registry()
    group_policy = policy_for(tools_cfg(), GROUPS, platform="test", chat_type="group", chat_id="-2", is_owner=False)
    result, [refused, read] = await loop.run(
        Call("write_file", {"path": "pwned.txt", "content": "x"}, id="w"),
        Call("read_file", {"path": "AGENTS.md", "limit": 1}, id="r"),
        chat_type=ChatType.GROUP, chat="-2", tools=registry.restricted(group_policy))
    assert result.text == "done"
    assert offered(loop.llm, 0) == ["read_file", "memory_search", "memory_get"]
    assert refused.is_error and refused.content.startswith("write_file is not available in this chat")
    assert not read.is_error and not list(loop.root.glob("*/pwned.txt"))
    prompt = loop.llm.requests[0].body["messages"][0]["content"]
    assert "read_file" in prompt and "write_file" not in prompt  # the prompt lists only what is offered
    dm_policy = policy_for(tools_cfg(), GROUPS, platform="test", chat_type="dm", chat_id="u1", is_owner=False)
    await loop.run(tools=registry.restricted(dm_policy))
    assert offered(loop.llm) == list(ALL[:-1])
