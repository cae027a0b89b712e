"""The ``/model`` capability: a conversation's model shown and picked (a picker where the
channel ``Asks``), its presses, and the fallback notes of ``/status``. The models themselves,
their routing and fallbacks, are the core's (``bot.routing``)."""
