"""The web chat: a page for the people of the bot (not its operators), a channel of the port
(platform ``webchat``) beside the API's, on the same door, people and sessions' rules.

``capability`` declares it (``webchat:``, its table of sign-in links, ``chatgate webchat
invite``); ``server`` is the page and its calls; ``channel`` adds buttons (approvals) to the
API's exchange channel; ``dialect`` writes the walker's Markdown as safe HTML; ``page`` the
HTML; ``static/`` its script and stylesheet, served from the package (nothing from the network).
"""
