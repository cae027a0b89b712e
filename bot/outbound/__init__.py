"""The output pipeline: from a model's Markdown to what a channel sends, and what a chat
shows while a run lives.

- ``markdown``: the one walker; a channel's ``Dialect`` (the port's interface) supplies the
  atoms it emits, and the rendered text is theirs joined
- ``split``: rendered atoms -> chunks under a channel's ``MessageShape`` (nothing is read back)
- ``outbox``: an answer's Markdown -> the stored, ready-to-send ``Answer``, owed to a chat
- ``progress``: typing, and the streamed draft, as one owned context manager

It builds on the port (``bot.channels``) and the text policy (``bot.text``); the port
imports nothing of it, so a platform package never depends on the pipeline.
"""
