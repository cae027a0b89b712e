"""The operator dashboard: a local web page to watch runs live, stop them, and see who used what.

Imported only when it is used (``dashboard.enabled`` in ``chatgate run``, or ``chatgate
dashboard``): with the dashboard off nothing of this package is loaded or started. This
file imports nothing, so the config's check of a password hash (``passwords``) loads only
that module.

- ``settings``: ``DashboardSettings`` and ``User``/``Role``, built from the config by the
  composition root
- ``passwords``: scrypt hashes of the users' passwords; ``passwd``: the config edit of
  ``chatgate dashboard passwd``
- ``auth``: sessions, CSRF tokens, the login limiter, the Origin and Host checks
- ``html``: escaping on by default (``Html``, ``render``) and the words pages use
- ``pages/``: one module per page, data in, ``Html`` out; ``layout`` and ``charts``
- ``live``: the live board (runs from the registry and the run events)
- ``sources``: what the dashboard reads: the store's ports, the running bot (``Bot``) and
  the optional operations sources (MCP servers, scheduled jobs, pending approvals)
- ``server``: the aiohttp application, its guard and headers, the login;
  ``views``: the pages' handlers, the actions and the live feed (server-sent events)
- ``assets`` and ``static/``: the stylesheet, the script and the icon, served from memory
"""
