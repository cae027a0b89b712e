"""Text policy: what of a model's raw answer may be shown, wherever it is shown.

``sanitize`` cleans an answer (thinking tags, tool markup, echoed system lines ...);
``silence`` decides ``NO_REPLY`` and holds back a streamed prefix that could still turn
out silent. Pure functions on strings, importing nothing else of the core: the agent loop
(final answers), the outbound pipeline (streamed drafts) and the message tool all apply
the same policy without depending on each other.
"""
