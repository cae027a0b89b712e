"""Capabilities: packages found through one registry line each (``registry``), opened by the app."""

from bot.capabilities.spec import CapabilitySpec, Core, Presses, Starts, StatusLines, Stops, Tools

__all__ = ["CapabilitySpec", "Core", "Presses", "StatusLines", "Starts", "Stops", "Tools"]
