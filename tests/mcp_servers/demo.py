"""A demo MCP server, written with the SDK's server side (``MCPServer``), for tests and bench.

    python -m tests.mcp_servers.demo                 # stdio
    python -m tests.mcp_servers.demo --http PORT     # streamable HTTP on 127.0.0.1:PORT/mcp

Its tools show what a client must handle: text, images, links, structured content, errors,
a slow call (it writes ``cancelled <monotonic time>`` to the file ``$MARKS`` when the client
cancels it), a hang, a crash mid-call, a huge result, a tool list that changes. ``env`` and
``cwd`` say what the process got, ``peek`` what it can read. Tools in ``$EXTRA_TOOLS`` (a number) are added as
``extra_<n>`` at start, for a server with many tools; ``$ALIAS`` names a second ``echo``; ``$NESTED_SCHEMA`` (a
number of branches) adds the tool ``nested``, whose schema's ``$ref``s multiply out to branches ** 11 objects.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import time
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ImageContent, ResourceLink, TextContent

server = MCPServer("demo", instructions="A demo server for chatgate's tests.")
PIXEL = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082")).decode()


def _mark(line: str) -> None:
    path = os.environ.get("MARKS")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


@server.tool()
async def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


@server.tool()
async def noop() -> str:
    """Do nothing, at once (for latency measurements)."""
    return "ok"


@server.tool()
async def env() -> str:
    """The server's environment, as JSON."""
    return json.dumps(dict(os.environ))


@server.tool()
async def cwd() -> str:
    """The server's working directory."""
    return os.getcwd()


@server.tool()
async def peek(path: str) -> str:
    """The start of a file, or why it cannot be read (what a sandbox lets the server see)."""
    try:
        with open(path, "rb") as f:
            return f.read(200).decode("utf-8", "replace")
    except OSError as exc:
        return f"cannot read: {exc.strerror}"


@server.tool()
async def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool()
async def slow(seconds: float) -> str:
    """Take this many seconds; a cancellation is written to $MARKS."""
    _mark(f"started {time.monotonic()}")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _mark(f"cancelled {time.monotonic()}")
        raise
    return f"slept {seconds}"


@server.tool()
async def crash() -> str:
    """Exit in the middle of the call."""
    _mark(f"crashing {os.getpid()}")
    await asyncio.sleep(0.05)
    os._exit(3)


@server.tool()
async def fail(why: str = "it went wrong") -> str:
    """Fail with isError."""
    raise ToolError(f"failed on purpose: {why}")


@server.tool()
async def big(chars: int) -> str:
    """A text of this many characters."""
    return "".join(f"line {i:06d} " + "x" * 50 + "\n" for i in range(chars // 62 + 1))[:chars]


@server.tool()
async def picture() -> list[Any]:
    """A one-pixel PNG and a caption."""
    return [TextContent(type="text", text="a pixel"), ImageContent(type="image", data=PIXEL, mime_type="image/png")]


@server.tool()
async def link() -> list[Any]:
    """A resource link."""
    return [ResourceLink(type="resource_link", uri="file:///srv/report.pdf", name="report.pdf",
                         mime_type="application/pdf", description="the monthly report")]


@server.tool(structured_output=True)
async def weather(city: str) -> dict[str, Any]:
    """Structured content only."""
    return {"city": city, "celsius": 21}


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `added` and say that the tool list changed."""
    async def added() -> str:
        """A tool added at run time."""
        return "added works"

    server.add_tool(added, name="added")
    await ctx.session.send_tool_list_changed()
    return "grown"


for n in range(int(os.environ.get("EXTRA_TOOLS", "0"))):
    async def extra(n: int = n) -> str:
        return f"extra {n}"

    server.add_tool(extra, name=f"extra_{n}", description=f"Extra tool number {n} about topic{n}.")


if os.environ.get("ALIAS"):
    server.add_tool(echo, name=os.environ["ALIAS"], description="Say the text back (under another name).")


def nested_schema(branches: int, depth: int = 11) -> dict[str, Any]:
    """Definitions each holding ``branches`` references to the next: small to send, huge inlined."""
    defs: dict[str, Any] = {f"D{depth}": {"type": "string"}}
    for level in range(depth):
        defs[f"D{level}"] = {"type": "object", "properties": {
            f"p{b}": {"$ref": f"#/$defs/D{level + 1}"} for b in range(branches)}}
    return {"type": "object", "properties": {"root": {"$ref": "#/$defs/D0"}}, "$defs": defs}


if os.environ.get("NESTED_SCHEMA"):
    async def nested() -> str:
        """A tool whose schema is a bomb of nested references."""
        return "nested"

    server._tool_manager.add_tool(nested, name="nested").parameters = nested_schema(int(os.environ["NESTED_SCHEMA"]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, help="serve streamable HTTP on this port of 127.0.0.1")
    args = parser.parse_args()
    _mark(f"up {os.getpid()}")
    if args.http is None:
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.http)


if __name__ == "__main__":
    main()
