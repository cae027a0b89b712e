"""``mcp:`` in the config: the MCP servers and how their tools are offered.

    mcp:
      inline_max: 40            # more granted tools than this: one mcp_tool_search tool instead
      servers:
        files:                  # stdio: a command the bot starts and talks to over stdin/stdout
          command: npx
          args: ["-y", "@modelcontextprotocol/server-filesystem", "."]
          env: {API_KEY: "${FILES_KEY}"}
          scope: per-person     # one process per person, in that person's workspace
        search:                 # streamable HTTP
          url: https://mcp.example.com/mcp
          headers: {Authorization: "Bearer ${SEARCH_TOKEN}"}
          grant: everyone

Strict like every section: an unknown key is named. The rules no field type can say are
checked for the whole ``mcp`` section (``McpConfig._consistent``), where a server's name is
known, and raised as ``ConfigError`` naming the exact key (``mcp.servers.files.env.LD_PRELOAD``):
a server's name holds no ``__`` and does not end in ``_`` (two servers' tools would share a
name and a glob for one would cover the other), a server is stdio or HTTP (one of ``command`` /
``url``, and only that transport's keys), a per-person server is a stdio one without ``cwd``,
and ``env`` never names a variable that makes a loader or an interpreter run code of its
choosing (``LD_PRELOAD``, ``PYTHONSTARTUP``, ``NODE_OPTIONS`` ...). No SDK is imported here:
this module is read at every start.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from bot.config.types import CapabilitySection, Float, Int, Section
from bot.errors import ConfigError

SERVER_NAME = r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}"
_TOOL_GLOB = re.compile(r"[A-Za-z0-9_.*?\[\]/-]{1,128}")  # MCP tool names may hold '.' and '/'
_GRANTEE = re.compile(r"(owners|everyone|[a-z][a-z0-9_-]*:\S+)")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Variables that make a dynamic loader or an interpreter load or run code named in them:
# a server's env may not set them (the server's own command is what runs, nothing injected).
FORBIDDEN_ENV = frozenset({
    "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "LD_BIND_NOW", "LD_DEBUG", "LD_PROFILE", "GCONV_PATH",
    "GLIBC_TUNABLES", "MALLOC_CONF",
    "DYLD_INSERT_LIBRARIES", "DYLD_LIBRARY_PATH", "DYLD_FRAMEWORK_PATH",
    "PYTHONSTARTUP", "PYTHONPATH", "PYTHONHOME", "PYTHONINSPECT", "PYTHONUSERBASE", "PYTHONEXECUTABLE",
    "PYTHONBREAKPOINT", "PYTHONWARNINGS", "PYTHONPLATLIBDIR",
    "NODE_OPTIONS", "NODE_PATH", "NODE_REPL_EXTERNAL_MODULE",
    "PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB",
    "RUBYOPT", "RUBYLIB",
    "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH",
    "BASH_ENV", "ENV", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS", "PS4", "IFS",
    "LUA_INIT", "LUA_PATH", "LUA_CPATH", "PHPRC", "PHP_INI_SCAN_DIR", "TCLLIBPATH", "R_PROFILE", "R_PROFILE_USER",
})
_FORBIDDEN_PREFIXES = ("LD_", "DYLD_", "BASH_FUNC_")


def forbidden_env(name: str) -> bool:
    """True for a variable ``env`` may not set (case as written: environment names are exact)."""
    return name in FORBIDDEN_ENV or name.upper() in FORBIDDEN_ENV or name.upper().startswith(_FORBIDDEN_PREFIXES)


def _tool_glob(value: str) -> str:
    if not _TOOL_GLOB.fullmatch(value):
        raise PydanticCustomError("tool_glob", "not a tool name or a glob of the server's tool names such as read_*")
    return value


def _grantee(value: str) -> str:
    if not _GRANTEE.fullmatch(value):
        raise PydanticCustomError(
            "grantee", 'expected owners, everyone, "platform:user_id", "platform:chat_id" or "person:name"')
    return value


def _one_or_many(value: object) -> object:
    return (value,) if isinstance(value, str) else value


ToolGlob = Annotated[str, AfterValidator(_tool_glob)]
Grantee = Annotated[str, AfterValidator(_grantee)]
# `grant: owners`, `grant: everyone`, `grant: telegram:123`, or a list of those
Grant = Annotated[tuple[Grantee, ...], BeforeValidator(_one_or_many)]


class McpToolRules(Section):
    """Which of the server's tools are offered, by the server's own tool names: ``allow``
    absent means all, ``[]`` none; ``deny`` wins."""

    allow: tuple[ToolGlob, ...] | None = Field(default=None, description="only these of its tools (names or globs); "
        "null: all, []: none")
    deny: tuple[ToolGlob, ...] = Field(default=(), description="never these (wins over allow)")


class McpServerConfig(Section):
    """One server: stdio (``command``, ``args``, ``env``, ``cwd``) or streamable HTTP (``url``,
    ``headers``, ``allow_private``). ``env`` and ``headers`` values count as secrets."""

    enabled: bool = Field(default=True, description="false: configured but not started")
    command: Annotated[str, Field(min_length=1)] | None = Field(default=None, description="the program; stdio "
        "servers only")
    args: tuple[str, ...] = Field(default=(), description="its arguments")
    env: dict[str, str] = Field(default={}, repr=False, description="the ONLY variables it gets, besides PATH, "
        "HOME, LOGNAME, SHELL, TERM, USER and LANG (never the bot's keys); values are secrets. LD_*, PYTHONPATH, "
        "PYTHONSTARTUP, NODE_OPTIONS ... are refused")
    cwd: Path | None = Field(default=None, description="its working directory (shared servers; default: the bot's)")
    url: Annotated[str, Field(pattern=r"^https?://[^/\s]+")] | None = Field(default=None, description="the server's "
        "endpoint; streamable HTTP servers only")
    headers: dict[str, str] = Field(default={}, repr=False, description="values are secrets")
    allow_private: bool = Field(default=False, description="true also reaches private/loopback addresses (a server "
        "on your own network); else public addresses only, as web_fetch")
    connect_timeout: Annotated[Float, Field(gt=0, le=300)] = Field(default=10.0, description="seconds to connect, "
        "shake hands and list the tools")
    call_timeout: Annotated[Float, Field(gt=0, le=3600)] = Field(default=120.0, description="seconds one call may "
        "take; then the server is told to cancel")
    tools: McpToolRules = Field(default=McpToolRules(), description="the server's own tool names, globs allowed")
    grant: Grant = Field(default=("owners",), description="owners (default) | everyone | a list of "
        "telegram:USER_ID, \"telegram:-100CHAT_ID\" (a group: every member), person:NAME (agent.identity_links), "
        "owners")
    scope: Literal["shared", "per-person"] = Field(default="shared", description="shared (one process) | per-person "
        "(one per person, started in their workspace on their first call; from a group, one for the group in the "
        "group's workspace, never a member's own)")
    idle_timeout: Annotated[Float, Field(gt=0)] = Field(default=600.0, description="per-person: seconds without a "
        "call before a person's process stops")
    approval: Literal["ask", "never"] | None = Field(default=None, description="its calls wait for a person's "
        "Allow: ask (owners too) | never; unset: everyone but the owners is asked (docs/guide/approvals.md); a rule "
        "in tools.approval that names the tool wins over this")
    sandbox: Literal["none", "bwrap"] = Field(default="none", description="none: it runs as the bot's user | bwrap: "
        "in the exec sandbox's world (its folder at /workspace, the system read-only, nothing of the bot's: config, "
        "database, other workspaces)")
    sandbox_paths: tuple[Path, ...] = Field(default=(), description="bwrap: more host folders it sees read-only, "
        "where they are (e.g. /opt/node for npx, ~/.pyenv for a pyenv Python)")
    network: bool = Field(default=True, description="bwrap: false takes the network away")

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def secret_values(self) -> Iterator[str]:
        """The values of ``env`` and ``headers`` (and a header's credential after its scheme,
        ``Bearer <token>``), for scrubbing logs; too short to be keys (under 6 characters) they
        are left out, or every "debug" or "1" in a log would be masked."""
        for value in (*self.env.values(), *self.headers.values()):
            for part in {value, value.split()[-1] if value.split() else ""}:
                if len(part) >= 6:
                    yield part


class McpConfig(CapabilitySection):
    model_config = ConfigDict(json_schema_extra={"description": "tools from MCP servers: docs/guide/mcp-and-skills.md"})

    servers: dict[str, McpServerConfig] = Field(default={}, examples=[{
            "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."], "env": {},
                      "cwd": None, "sandbox": "none", "sandbox_paths": [], "network": True, "scope": "per-person",
                      "idle_timeout": 600, "grant": "everyone", "tools": {"allow": None, "deny": ["move_file"]},
                      "approval": "ask", "connect_timeout": 10, "call_timeout": 120, "enabled": True},
            "search": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"},
                       "allow_private": False, "grant": ["telegram:123456789"]}}], description="name -> server; "
        "names: letters, digits, '_', '-' (up to 32)")
    inline_max: Annotated[Int, Field(ge=0, le=1000)] = Field(default=40, description="more MCP tools granted to a "
        "run than this: the model gets one mcp_tool_search tool that finds and enables them instead")
    result_max_chars: Annotated[Int, Field(ge=1000, le=1_000_000)] = Field(default=20_000, description="a longer "
        "tool result is saved in the workspace (mcp-output/); the model reads its head and the path")

    @model_validator(mode="after")
    def _consistent(self) -> McpConfig:
        for name, server in self.servers.items():
            if not re.fullmatch(SERVER_NAME, name):
                raise ConfigError(f"mcp.servers.{name}", "a server name may hold only letters, digits, '_' and "
                                  "'-' (at most 32, a letter or digit first): it is part of its tools' names")
            if "__" in name or name.endswith("_"):
                raise ConfigError(f"mcp.servers.{name}", "a server name may not hold '__' or end in '_': its tools "
                                  "are named mcp__<server>__<tool>, and such a name could be another server's "
                                  "tools' (a__b's tool x is also a's tool b__x)", "use a single '_' or '-'")
            check_server(f"mcp.servers.{name}", server)
        return self

    @property
    def enabled(self) -> dict[str, McpServerConfig]:
        return {name: s for name, s in self.servers.items() if s.enabled}

    def secret_values(self) -> tuple[str, ...]:
        return tuple(v for s in self.servers.values() for v in s.secret_values())

    def describe(self) -> list[str]:
        return [f"mcp        {name}: {_shown(server)}" for name, server in self.servers.items()]


def _shown(server: McpServerConfig) -> str:
    """An MCP server as ``check`` shows it: the values of ``env`` and ``headers`` never shown."""
    from bot.tracing import mask_url

    if not server.enabled:
        return "disabled"
    where = (f"stdio {server.command}" + (f" ({len(server.args)} args)" if server.args else "")
             if server.command is not None else f"http {mask_url(server.url or '')}")
    extra = [f"env {', '.join(server.env)}" if server.env else "", f"headers {', '.join(server.headers)}"
             if server.headers else "", "allow_private" if server.allow_private else ""]
    grant = ", ".join(server.grant)
    return ", ".join(part for part in (where, *extra, f"{server.scope}", f"granted to {grant}",
                                       f"timeouts {server.connect_timeout:g}s/{server.call_timeout:g}s") if part)


_STDIO_ONLY = ("args", "env", "cwd", "sandbox", "sandbox_paths", "network")
_HTTP_ONLY = ("headers", "allow_private")


def check_server(key: str, s: McpServerConfig) -> None:
    """Raise ``ConfigError`` naming the key for what the field types cannot say."""
    given = s.model_fields_set
    if (s.command is None) == (s.url is None):
        raise ConfigError(key, "give either command (a stdio server) or url (a streamable HTTP server)",
                          "one of the two, not both" if s.command else "add command: or url:")
    wrong = [f for f in (_HTTP_ONLY if s.command else _STDIO_ONLY) if f in given]
    if wrong:
        other = "stdio" if s.command else "HTTP"
        raise ConfigError(f"{key}.{wrong[0]}", f"not a key of {'an' if other == 'HTTP' else 'a'} {other} server",
                          "remove it")
    for n, folder in enumerate(s.sandbox_paths):
        if not folder.is_absolute():
            raise ConfigError(f"{key}.sandbox_paths[{n}]", f"{folder} is not an absolute path")
    if s.sandbox == "none" and ("sandbox_paths" in given or "network" in given):
        raise ConfigError(f"{key}.{'sandbox_paths' if 'sandbox_paths' in given else 'network'}",
                          "only means something with sandbox: bwrap", "add sandbox: bwrap, or remove it")
    for env in s.env:
        if not _ENV_NAME.fullmatch(env):
            raise ConfigError(f"{key}.env.{env}", "not an environment variable name")
        if forbidden_env(env):
            raise ConfigError(f"{key}.env.{env}", "a loader or interpreter variable: it would make the server "
                              "load or run code it names", "remove it; put what the server needs in its args")
    for header, value in s.headers.items():
        if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", header):
            raise ConfigError(f"{key}.headers.{header}", "not an HTTP header name")
        if "\n" in value or "\r" in value:
            raise ConfigError(f"{key}.headers.{header}", "a header value cannot hold a line break")
    if s.scope == "per-person":
        if s.url is not None:
            raise ConfigError(f"{key}.scope", "per-person needs a stdio server (command:); "
                              "an HTTP server is one service for everyone")
        if s.cwd is not None:
            raise ConfigError(f"{key}.cwd", "a per-person server runs in each person's workspace", "remove cwd")
    elif "idle_timeout" in given:
        raise ConfigError(f"{key}.idle_timeout", "only per-person servers stop when idle", "remove it")
    if not s.grant:
        raise ConfigError(f"{key}.grant", "an empty list grants no one", "list people or chats, or use owners")

