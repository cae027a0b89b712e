"""MCP servers: their tools offered to runs like the built-ins, supervised, granted per person.

- ``config``: the ``mcp:`` section (imported at every start; no SDK)
- ``naming``, ``schemas``, ``grants``, ``report``: pure functions (names, schemas both
  providers take, who may use a server, what the status commands say)
- ``connection``, ``http``: opening one connection with the SDK (stdio, streamable HTTP
  behind the address fence)
- ``supervisor``: one task per connection, its state and backoff
- ``results``: a tool result as text, images and files
- ``tools``: the servers' tools as ``Tool``s, ``mcp_tool_search``, the prompt section
- ``hub``: ``McpHub``, every server; the agent's ``Toolset``

Only ``config`` is imported unless ``mcp.servers`` names an enabled server: the SDK is
imported by ``hub`` and below, which the composition root imports only then.
"""
