"""The channels: one package per platform, each owning its SDK and its dialect, all with the
same file layout (``__init__`` with the SPEC, ``channel``, ``config``, ``dialect``, ``inbound``)."""
