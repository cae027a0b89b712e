from adapters.console.adapter import ConsoleAdapter

__all__ = ["ConsoleAdapter"]
