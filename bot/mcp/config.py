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

from pydantic import AfterValidator, BeforeValidator, Field, model_validator
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

    allow: tuple[ToolGlob, ...] | None = None  # only these of its tools (names or globs); null: all, []: none
    deny: tuple[ToolGlob, ...] = ()  # never these (wins over allow)


class McpServerConfig(Section):
    """One server: stdio (``command``, ``args``, ``env``, ``cwd``) or streamable HTTP (``url``,
    ``headers``, ``allow_private``). ``env`` and ``headers`` values count as secrets."""

    enabled: bool = True
    command: Annotated[str, Field(min_length=1)] | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default={}, repr=False)  # values are secrets: never in a repr
    cwd: Path | None = None
    url: Annotated[str, Field(pattern=r"^https?://[^/\s]+")] | None = None
    headers: dict[str, str] = Field(default={}, repr=False)
    allow_private: bool = False  # HTTP: also private, loopback and link-local addresses
    connect_timeout: Annotated[Float, Field(gt=0, le=300)] = 10.0  # connect, handshake and tool list
    call_timeout: Annotated[Float, Field(gt=0, le=3600)] = 120.0  # one tool call
    tools: McpToolRules = McpToolRules()
    grant: Grant = ("owners",)
    scope: Literal["shared", "per-person"] = "shared"
    idle_timeout: Annotated[Float, Field(gt=0)] = 600.0  # per-person: a person's process stops after this idle
    # its calls wait for a person's Allow: ask (everyone, owners too) | never; None: ask everyone but the
    # owners (README "Approvals"); a rule in tools.approval that names the tool wins over this
    approval: Literal["ask", "never"] | None = None
    # stdio: bwrap runs the server in the exec sandbox's world (README "What a server can reach")
    sandbox: Literal["none", "bwrap"] = "none"
    sandbox_paths: tuple[Path, ...] = ()  # bwrap: host folders it also sees, read-only (its interpreter)
    network: bool = True  # bwrap: false takes the network away

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
    servers: dict[str, McpServerConfig] = {}
    inline_max: Annotated[Int, Field(ge=0, le=1000)] = 40  # granted tools shown inline; beyond, mcp_tool_search
    result_max_chars: Annotated[Int, Field(ge=1000, le=1_000_000)] = 20_000  # longer results saved in the workspace

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

