"""The images capability: the ``generate_image`` tool (``tools.images``); the spec is in
``bot.images.capability``, the tool in ``bot.images.generate``."""
