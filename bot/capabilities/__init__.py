"""Capabilities: packages found through one registry line each (``registry``), opened by the app."""

from bot.capabilities.spec import CapabilitySpec, Channels, Core, Presses, Starts, StatusLines, Stops, Tools

__all__ = ["CapabilitySpec", "Channels", "Core", "Presses", "StatusLines", "Starts", "Stops", "Tools"]
