"""Real MCP servers for the tests and the benchmark, written with the SDK's own server side."""
