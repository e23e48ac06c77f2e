"""Importers: perf tables of other tools, read as run records."""
