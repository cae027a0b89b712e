"""Capabilities: packages found through one registry line each (``registry``), opened by the app."""

from bot.capabilities.spec import Channels, Core, Recovers, Starts, Stops, Tools

__all__ = ["Channels", "Core", "Recovers", "Starts", "Stops", "Tools"]
