"""collectbot: the CLI and everything around the collector (compare, render, publish)."""

__version__ = "0.1.0"
