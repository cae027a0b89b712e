"""chatgate: a self-hosted LLM assistant for chat platforms."""

__version__ = "0.1.0"
