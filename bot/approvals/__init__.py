"""The approvals capability: a tool call that needs a person waits for their press, bound to
its run (``service``: ``Approvals``, a step of the core's tool gate), and ``/approve`` and
``/deny`` (``capability``). See ``service`` for the rules."""
