"""``chatgate init``: a guided first setup in the terminal (or ``--non-interactive`` from flags
and the environment) that writes ``config.yaml`` with every secret as ``${VAR}`` and the values
in ``.env`` beside it (mode 600), after checking each answer live.

A capability with no running part (its spec's ``open`` yields None and it is never enabled):
it adds the ``init`` subcommand. What it asks of a platform, and how that platform checks its
tokens, is the platform's own ``ChannelSpec.setup`` (``bot.channels.ChannelSetup``).

- ``answers``: what was decided (``Answers``), as ``config.yaml`` and ``.env`` text, written
  all at once or not at all (``write``)
- ``checks``: the live checks (the provider with a one-token call, a platform's ``probe``), each
  run on a loop of its own so that Ctrl-C stops a wait at once; bubblewrap found or not
- ``terminal``: the questions (echo off for secrets)
- ``flow``: the interactive setup; ``scripted``: the same from flags and the environment
- ``capability``: the spec and the subcommand's arguments
- ``keys``: every key of the config models with its description and samples; ``reference``: the
  configuration reference page written from them, ``example``: ``config.example.yaml``
"""
