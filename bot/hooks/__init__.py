"""The hooks capability: ``hooks.pre_tool``, the operator's commands that may refuse a tool call
before it runs (``bot.hooks.pre_tool``), a step of the core's one tool gate before the approvals'."""
