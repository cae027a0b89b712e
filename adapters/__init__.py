"""Channel adapters: one package per platform, each owning its SDK and rendering."""
