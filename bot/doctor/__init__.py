"""``chatgate doctor``: what stops the bot from working, checked live, as a table with one line of
advice each (``capability``: the subcommands; ``checks``: the core's checks; ``table``: the report).
With it, the upgrades: ``chatgate migrate`` (``migrate``; ``copy``: a SQLite database copied into
PostgreSQL).

The core checks the config, the models (a real, cheap call each), the database and its
migrations, the sandbox, the workspace root, free disk and versions; each enabled platform
brings its own checks (``ChannelSpec.doctor``: its token, live). The exit code is 1 when any
check failed.
"""
