"""The browser capability: the ``browser`` tool, Chromium in the exec sandbox behind the address fence.

The spec is in ``bot.browser.capability``; its parts: ``config`` (``tools.browser``), ``jail``
(the sandbox), ``fence`` (the proxy every request passes), ``forward`` (inside the sandbox),
``browsers`` (one browser per session, bounded), ``session`` (the actions), ``snapshot`` (the
page as text) and ``tool``.
"""
