"""The OpenAI-compatible API: a capability (``api:``) and a channel of the port (platform ``api``).

``capability`` declares it (its section, its tables, ``chatgate api key ...``); ``server`` is
the HTTP side, ``wire`` the API's shapes, ``sessions`` which session a request continues,
``door`` the way a person's message enters the turn runner, ``people`` who a key acts for,
``channel`` the channel the answers come back through. The web chat (``bot.api.webchat``) uses
the same door, people and channel.
"""
