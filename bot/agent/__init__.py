"""The agent core: one run of the think -> act -> observe loop."""
