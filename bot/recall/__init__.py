"""Recall: search past conversations and memory by words and meaning, never across people."""
