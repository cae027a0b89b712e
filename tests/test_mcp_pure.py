"""The pure parts of MCP support, by tables: names, schemas, grants, search, results, config."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from bot.conversation import Conversation
from bot.errors import ConfigError
from bot.mcp.config import McpConfig, forbidden_env
from bot.mcp.grants import Asker, identities, may_use
from bot.mcp.naming import tool_names
from bot.mcp.report import ServerStatus, line, personal
from bot.mcp.results import Blob, _settle, render
from bot.mcp.schemas import MAX_DESCRIPTION, describe, fit_schema, restore_arguments
from bot.mcp.state import State
from bot.mcp.tools import prompt_section, rank, server_tools
from bot.tools.base import Tool, ToolCategory, ToolContext, ToolOutput

_PROVIDER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


# -- names ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "expected"), [
    (["read"], {"read": "mcp__files__read"}),
    (["files.read", "files_read"], {"files.read": "mcp__files__files_read", "files_read": "mcp__files__files_read_"}),
    (["a b/c"], {"a b/c": "mcp__files__a_b_c"}),
    (["é"], {"é": "mcp__files___"}),
])
def test_names_are_sanitised_and_unique(raw: list[str], expected: dict[str, str]) -> None:
    names = tool_names("files", raw)
    for key, want in expected.items():
        assert names[key].startswith(want)
    assert len(set(names.values())) == len(raw)
    assert all(_PROVIDER_NAME.fullmatch(n) for n in names.values())


def test_long_names_fit_in_64_characters_and_stay_stable() -> None:
    raw = ["x" * 100, "x" * 99 + "y", "short"]
    first = tool_names("a-server-with-a-rather-long-name", raw)
    assert all(len(n) <= 64 and _PROVIDER_NAME.fullmatch(n) for n in first.values())
    assert len(set(first.values())) == 3
    assert tool_names("a-server-with-a-rather-long-name", list(reversed(raw))) == first  # order does not matter


# -- schemas -------------------------------------------------------------------------------

@pytest.mark.parametrize(("given", "expected"), [
    (None, {"type": "object", "properties": {}}),
    ({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q", "gone"]},
     {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
    ({"type": "object", "properties": {"tags": {"type": "array"}}},
     {"type": "object", "properties": {"tags": {"type": "array", "items": {}}}}),
    ({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
      "$defs": {"Pt": {"type": "object", "properties": {"x": {"type": "number"}}}},
      "properties": {"at": {"$ref": "#/$defs/Pt"}}},
     {"type": "object", "properties": {"at": {"type": "object", "properties": {"x": {"type": "number"}}}}}),
    ({"type": "object", "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}},
      "properties": {"list": {"$ref": "#/$defs/N"}}},
     {"type": "object", "properties": {"list": {"type": "object", "properties": {"next": {}}}}}),
    ({"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "b"]},
                {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]}]},
     {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["b"]}),
    ({"allOf": [{"properties": {"a": {}}, "required": ["a"]}, {"properties": {"b": {}}, "required": ["b"]}]},
     {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a", "b"]}),
    ({"type": "object", "properties": {"on": True, "off": False}, "additionalProperties": False},
     {"type": "object", "properties": {"on": {}}, "additionalProperties": False}),
])
def test_schemas_become_what_both_providers_take(given: Any, expected: dict[str, Any]) -> None:
    assert fit_schema(given).parameters == expected


def test_property_names_the_providers_refuse_are_renamed_and_restored() -> None:
    fitted = fit_schema({"type": "object", "properties": {"file name": {"type": "string"}, "ok": {}},
                         "required": ["file name"]})
    assert fitted.parameters["properties"].keys() == {"file_name", "ok"}
    assert fitted.parameters["required"] == ["file_name"]
    assert restore_arguments({"file_name": "a.txt", "ok": 1}, fitted.renames) == {"file name": "a.txt", "ok": 1}


def test_descriptions_are_capped() -> None:
    assert len(describe("word " * 1000, "s", "t")) <= MAX_DESCRIPTION
    assert describe("", "files", "read") == "The read tool of the MCP server files."
    long = fit_schema({"type": "object", "properties": {"a": {"type": "string", "description": "d" * 5000}}})
    assert len(long.parameters["properties"]["a"]["description"]) <= 512


# -- grants --------------------------------------------------------------------------------

LINKS = {"ann": ("telegram:1", "discord:9")}


def asker(*people: str, platform: str = "telegram", chat: str = "1", group: bool = False,
          owner: bool = False) -> Asker:
    return Asker(platform, chat, group, owner, people)


@pytest.mark.parametrize(("grant", "who", "allowed"), [
    (("everyone",), asker("telegram:5"), True),
    (("owners",), asker("telegram:5"), False),
    (("owners",), asker("telegram:5", owner=True), True),
    (("telegram:5",), asker("telegram:5"), True),
    (("telegram:5",), asker("telegram:6"), False),
    (("telegram:-100",), asker("telegram:6", chat="-100", group=True), True),  # a granted group: every member
    (("telegram:-100",), asker("telegram:6", chat="-200", group=True), False),
    (("telegram:1",), asker("discord:9", platform="discord"), True),  # linked: granted on one, granted on all
    (("person:ann",), asker("telegram:1"), True),
    (("telegram:1",), asker("person:ann"), True),
    (("telegram:5",), asker("telegram:5", "telegram:6"), False),  # a batch: every sender must be granted
    (("telegram:5",), asker(), False),
])
def test_grants(grant: tuple[str, ...], who: Asker, allowed: bool) -> None:
    assert may_use(grant, who, LINKS) is allowed


def test_identities_of_a_linked_person() -> None:
    assert identities("discord:9", LINKS) == {"discord:9", "person:ann", "telegram:1"}
    assert identities("person:ann", LINKS) == {"person:ann", "telegram:1", "discord:9"}
    assert identities("slack:U1", LINKS) == {"slack:U1"}


def test_the_asker_of_a_run_is_its_payers_else_its_user(tmp_path: Path) -> None:
    conv = Conversation.of_key("agent:main:telegram:group:-100")
    ctx = ToolContext(tmp_path, conv, "r", "main", "7", payers=("telegram:7", "telegram:8"))
    assert Asker.of(ctx) == Asker("telegram", "-100", True, False, ("telegram:7", "telegram:8"))
    alone = ToolContext(tmp_path, Conversation.of_key("agent:main:telegram:dm:7"), "r", "main", "7")
    assert Asker.of(alone).people == ("telegram:7",)


# -- a server's tools -------------------------------------------------------------------------

def test_a_servers_tools_follow_its_allow_and_deny_rules() -> None:
    settings = McpConfig.model_validate({"servers": {"s": {
        "command": "x", "call_timeout": 30, "tools": {"allow": ["read_*", "list"], "deny": ["read_secret"]}}}}).servers["s"]
    listed = [types.Tool(name=n, description=f"{n} it", input_schema={"type": "object"})
              for n in ("read_file", "read_secret", "list", "write_file")]

    async def call(ctx: ToolContext, server: str, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        return ToolOutput(tool)

    tools = server_tools("s", settings, listed, call)
    assert [t.name for t in tools] == ["mcp__s__read_file", "mcp__s__list"]
    assert all(t.category is ToolCategory.MCP and t.timeout == 10 + 30 + 5 for t in tools)


@pytest.mark.parametrize(("approval", "owner_asked", "member_asked"), [
    (None, False, True),  # unset: the defaults ask everyone but the owners
    ("ask", True, True),  # the server's own setting binds owners too
    ("never", False, False),
])
def test_a_servers_approval_setting_reaches_its_tools(approval: str | None, owner_asked: bool,
                                                      member_asked: bool) -> None:
    from bot.tools.approval import ApprovalRules

    server = {"command": "x"} | ({"approval": approval} if approval else {})
    settings = McpConfig.model_validate({"servers": {"s": server}}).servers["s"]

    async def call(ctx: ToolContext, server: str, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        return ToolOutput(tool)

    (tool,) = server_tools("s", settings, [types.Tool(name="delete", input_schema={"type": "object"})], call)
    assert tool.approval == approval
    rules = ApprovalRules()
    assert rules.needs(tool.name, is_owner=True, declared=tool.approval) is owner_asked
    assert rules.needs(tool.name, is_owner=False, declared=tool.approval) is member_asked
    assert not ApprovalRules((("mcp__s__*", "never"),)).needs(tool.name, is_owner=False, declared="ask")


async def test_an_http_server_is_reached_only_at_public_addresses() -> None:
    from bot.mcp.http import AddressRefused, checked_addresses

    for host in ("127.0.0.1", "localhost", "10.1.2.3", "169.254.169.254", "[::1]", "127.1"):
        with pytest.raises(AddressRefused):
            await checked_addresses(host, 443)
    assert [str(ip) for ip in await checked_addresses("93.184.215.14", 443)] == ["93.184.215.14"]


# -- search and prompt -----------------------------------------------------------------------

async def _nothing(ctx: ToolContext) -> str:
    return ""


def _tool(name: str, description: str) -> Tool:
    return Tool(name, description, ToolCategory.MCP, {"type": "object", "properties": {}}, _nothing)


def test_rank_prefers_names_then_descriptions() -> None:
    tools = [_tool("mcp__gh__create_issue", "Open a new issue in a repository."),
             _tool("mcp__gh__list_issues", "List the issues of a repository."),
             _tool("mcp__fs__read_file", "Read a file.")]
    assert [t.name for t in rank("create issue", tools)] == ["mcp__gh__create_issue", "mcp__gh__list_issues"]
    assert [t.name for t in rank("read_file", tools)][0] == "mcp__fs__read_file"
    assert rank("weather", tools) == []


def test_the_prompt_section_inline_and_searching() -> None:
    assert prompt_section([], False) == ""
    inline = prompt_section([("files", 3), ("web", 1)], False)
    assert inline.startswith("## MCP tools") and "files (3 tools), web (1 tool)" in inline
    assert "mcp_tool_search" in prompt_section([("files", 300)], True)


# -- results ---------------------------------------------------------------------------------

def _result(*content: Any, structured: Any = None, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), structured_content=structured, is_error=error)


def test_render_keeps_every_kind_of_content() -> None:
    rendered = render(_result(
        types.TextContent(type="text", text="hello"),
        types.ImageContent(type="image", data="aGk=", mime_type="image/png"),
        types.ResourceLink(type="resource_link", uri="https://x/y", name="y", description="the y"),
        types.EmbeddedResource(type="resource", resource=types.TextResourceContents(uri="mem://a", text="inside")),
        error=True))
    assert rendered.is_error
    text, image, link, embedded = rendered.pieces
    assert text == "hello" and isinstance(image, Blob) and image.mime == "image/png"
    assert link == "[resource link: y <https://x/y>: the y]" and embedded == "[resource mem://a]\ninside"


def test_structured_content_is_the_text_only_when_there_is_none() -> None:
    assert render(_result(structured={"a": 1})).pieces == (json.dumps({"a": 1}, indent=1),)
    assert render(_result(types.TextContent(type="text", text="{}"), structured={"a": 1})).pieces == ("{}",)


def test_settle_saves_blobs_and_oversized_text(tmp_path: Path) -> None:
    rendered = render(_result(types.TextContent(type="text", text="x" * 300),
                              types.ImageContent(type="image", data="aGk=", mime_type="image/png"),
                              types.ImageContent(type="image", data="not base64!", mime_type="image/png")))
    output = _settle(rendered, tmp_path, "srv-tool", max_chars=200)
    assert "not valid base64" in output.text and "is saved in the workspace as mcp-output/" in output.text
    assert len(output.images) == 1
    saved = sorted(p.suffix for p in (tmp_path / "mcp-output").iterdir())
    assert saved == [".png", ".txt"]
    small = _settle(render(_result(types.TextContent(type="text", text="short"))), tmp_path, "s", 200)
    assert small.text == "short" and small.images == ()


def test_a_link_where_the_output_folder_belongs_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "mcp-output").symlink_to(outside)
    output = _settle(render(_result(types.TextContent(type="text", text="y" * 300))), tmp_path / "ws", "s", 200)
    assert "not saved" in output.text and not list(outside.iterdir())


# -- reports ----------------------------------------------------------------------------------

def test_status_lines() -> None:
    up = ServerStatus("files", "stdio", "shared", "owners", State.READY, 3, None, 1000.0)
    down = ServerStatus("web", "http", "shared", "everyone", State.DOWN, 0, "ConnectError: refused", 1000.0,
                        retry_at=1012.0)
    assert line(up, 1030.0) == "files: ready for 30 s, 3 tools (stdio; granted to owners)"
    assert line(down, 1000.0) == ("web: down, next attempt in 12 s, 0 tools (http; granted to everyone)\n"
                                  "  last error: ConnectError: refused")
    assert personal([up, down]) == "MCP servers: files (ready, 3 tools), web (down, 0 tools)"


# -- config -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("server", "key", "problem"), [
    ({"command": "x", "env": {"LD_PRELOAD": "/tmp/x.so"}}, "mcp.servers.s.env.LD_PRELOAD", "loader or interpreter"),
    ({"command": "x", "env": {"PYTHONSTARTUP": "a.py"}}, "mcp.servers.s.env.PYTHONSTARTUP", "loader or interpreter"),
    ({"command": "x", "env": {"NODE_OPTIONS": "-r x"}}, "mcp.servers.s.env.NODE_OPTIONS", "loader or interpreter"),
    ({"command": "x", "env": {"1BAD": "v"}}, "mcp.servers.s.env.1BAD", "not an environment variable name"),
    ({"command": "x", "url": "http://a"}, "mcp.servers.s", "either command"),
    ({}, "mcp.servers.s", "either command"),
    ({"url": "http://a", "args": ["x"]}, "mcp.servers.s.args", "not a key of an HTTP server"),
    ({"command": "x", "headers": {"A": "b"}}, "mcp.servers.s.headers", "not a key of a stdio server"),
    ({"url": "http://a", "headers": {"Bad Name": "b"}}, "mcp.servers.s.headers.Bad Name", "not an HTTP header"),
    ({"url": "http://a", "scope": "per-person"}, "mcp.servers.s.scope", "needs a stdio server"),
    ({"command": "x", "scope": "per-person", "cwd": "/tmp"}, "mcp.servers.s.cwd", "each person's workspace"),
    ({"command": "x", "idle_timeout": 5}, "mcp.servers.s.idle_timeout", "only per-person"),
    ({"command": "x", "grant": []}, "mcp.servers.s.grant", "grants no one"),
    ({"url": "http://a", "sandbox": "bwrap"}, "mcp.servers.s.sandbox", "not a key of an HTTP server"),
    ({"command": "x", "sandbox_paths": ["/opt/node"]}, "mcp.servers.s.sandbox_paths", "only means something with"),
    ({"command": "x", "network": False}, "mcp.servers.s.network", "only means something with sandbox: bwrap"),
    ({"command": "x", "sandbox": "bwrap", "sandbox_paths": ["opt"]}, "mcp.servers.s.sandbox_paths[0]",
     "not an absolute path"),
])
def test_config_mistakes_are_named_by_key(server: dict[str, Any], key: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        McpConfig.model_validate({"servers": {"s": server}})
    assert caught.value.key == key and problem in caught.value.problem


def test_forbidden_environment_variables() -> None:
    assert all(forbidden_env(n) for n in ("LD_PRELOAD", "LD_ANYTHING", "DYLD_INSERT_LIBRARIES", "BASH_ENV",
                                          "JAVA_TOOL_OPTIONS", "PERL5OPT", "RUBYOPT", "ld_preload"))
    assert not any(forbidden_env(n) for n in ("API_KEY", "GITHUB_TOKEN", "HOME", "NODE_ENV"))


def test_env_and_header_values_are_secrets() -> None:
    cfg = McpConfig.model_validate({"servers": {
        "a": {"command": "x", "env": {"TOKEN": "t0k3n-value", "DEBUG": "1"}},
        "b": {"url": "https://h/mcp", "headers": {"Authorization": "Bearer abc123456"}}}})
    assert set(cfg.secret_values()) == {"t0k3n-value", "Bearer abc123456", "abc123456"}
