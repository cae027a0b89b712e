"""Capabilities: packages found through one registry line each (``registry``), opened by the app."""

from bot.capabilities.spec import (
    Answers,
    CapabilitySpec,
    Channels,
    Core,
    DecidesHere,
    Presses,
    Recovers,
    Reminds,
    Starts,
    StatusLines,
    Stops,
    Tools,
)

__all__ = ["Answers", "CapabilitySpec", "Channels", "Core", "DecidesHere", "Presses", "Recovers", "Reminds",
           "StatusLines", "Starts", "Stops", "Tools"]
