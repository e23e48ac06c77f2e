"""bench/worker_starts.py: a pool started and recycled each way, on the CPU."""

from __future__ import annotations

from bench.worker_starts import measure


def test_forked_workers_find_their_backend_imported_and_spawned_ones_do_not() -> None:
    forked = measure("torch", "cpu", "forkserver", 1)
    assert forked["preloaded"] == [True, True] and forked["recycles"] == 1
    spawned = measure("torch", "cpu", "spawn", 1)
    assert spawned["preloaded"] == [False, False] and spawned["recycles"] == 1
    for result in (forked, spawned):
        assert 0 < float(result["first_start_s"]) <= float(result["starts_s"])  # type: ignore[arg-type]
