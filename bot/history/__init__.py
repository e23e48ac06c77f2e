"""A key's stored runs as a performance history: each case's trend and its change points.

`source` is the one place that reads the run store; `core` turns the records into arrays
(cases x runs), `changepoints` finds steps in them, `export` and `table` present them.
"""
