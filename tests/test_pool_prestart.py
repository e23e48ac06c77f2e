"""Spare workers (`WorkerPool.prestart`): they import their backend, wait for their round,
and only then start; the round before keeps its processes until they have exited."""

from __future__ import annotations

import importlib
import os
import types
from dataclasses import replace
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

import pytest

from collector import worker_start
from collector.backends import preload
from collector.pool import WorkerPool
from collector.timing import Protocol
from collector.versions import expected_flashinfer_version, expected_version
from collector.worker import WorkerSpec

SPEC = WorkerSpec(backend="torch", device="cpu", protocol=Protocol(), name="w0")


def _standby_message(pool: WorkerPool) -> dict[str, object]:
    spare = pool.spares[0]
    assert wait([spare.conn], timeout=120), "the spare never reported standby"
    message: dict[str, object] = spare.conn.recv()
    return message


def test_a_spare_imports_its_backend_and_waits_until_its_round() -> None:
    pool = WorkerPool([SPEC], case_timeout_s=60, prestart=True)
    try:
        pool.wait_ready()
        first = pool.workers[0].process.pid
        pool.prestart()
        spare_pid = pool.spares[0].process.pid
        message = _standby_message(pool)
        assert message["type"] == "standby" and message["preloaded"] is True
        assert message["pid"] == spare_pid
        # In standby it has not started: nothing more arrives until it is told to go.
        assert not pool.spares[0].conn.poll(0.5)
        assert pool.spares[0].process.is_alive()
        pool.recycle()
        assert pool.workers[0].process.pid == spare_pid != first
        assert pool.workers[0].ready and pool.prestarted == 1 and pool.recycles == 1
        assert pool.workers[0].spec.name == "w0.r1" and not pool.workers[0].spec.standby
        assert pool.spares == []
    finally:
        pool.close()


def test_a_dead_spare_is_replaced_by_a_fresh_start() -> None:
    pool = WorkerPool([SPEC], case_timeout_s=60, prestart=True)
    try:
        pool.wait_ready()
        pool.prestart()
        _standby_message(pool)
        spare = pool.spares[0].process
        spare.kill()
        spare.join(10)
        pool.recycle()
        assert pool.workers[0].process.pid != spare.pid
        assert pool.workers[0].ready and pool.prestarted == 0
    finally:
        pool.close()


def test_without_prestart_there_are_no_spares_and_close_ends_every_process() -> None:
    pool = WorkerPool([SPEC], case_timeout_s=60)
    pool.wait_ready()
    pool.prestart()
    assert pool.spares == []
    pool.close()
    spare_pool = WorkerPool([SPEC], case_timeout_s=60, prestart=True)
    spare_pool.wait_ready()
    spare_pool.prestart()
    processes = [w.process for w in [*spare_pool.workers, *spare_pool.spares]]
    spare_pool.close()
    assert all(not p.is_alive() for p in processes)


@pytest.mark.parametrize(
    ("name", "backend_class", "pin"),
    [
        ("vllm", "collector.backends.vllm_backend.VllmBackend", expected_version),
        (
            "flashinfer",
            "collector.backends.flashinfer_backend.FlashinferBackend",
            lambda _: expected_flashinfer_version(),
        ),
    ],
)
def test_a_spare_preloads_what_building_its_framework_backend_imports(
    name: str, backend_class: str, pin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The framework itself sits in the runtime module; a preload of the light backend
    # module alone left vLLM's 20 s import on the critical path after "go".
    module_name, _, class_name = backend_class.rpartition(".")
    cls = getattr(importlib.import_module(module_name), class_name)
    pinned = pin(name).version
    imported: list[str] = []

    def record(module: str, package: str | None = None) -> types.ModuleType:
        imported.append(module)
        return types.ModuleType(module)

    monkeypatch.setattr(importlib, "import_module", record)
    preload(name)
    preloaded, imported[:] = list(imported), []
    cls(version_of=lambda dist: pinned)
    assert preloaded == imported == [f"collector.backends.{name}_runtime"]


def test_forkserver_workers_start_with_their_backend_imported_and_fresh_each_round() -> None:
    spec = replace(SPEC, protocol=Protocol(worker_start="forkserver"))
    pool = WorkerPool([spec], case_timeout_s=60, start_method="forkserver")
    try:
        pool.wait_ready()
        first = pool.workers[0]
        assert first.preloaded  # forked from the server that imported torch_backend
        pool.recycle()
        second = pool.workers[0]
        assert second.preloaded and second.process.pid != first.process.pid
        assert second.process.pid not in (None, os.getpid())
    finally:
        pool.close()
    spawned = WorkerPool([SPEC], case_timeout_s=60)
    try:
        spawned.wait_ready()
        assert not spawned.workers[0].preloaded  # a spawned worker imports it itself
    finally:
        spawned.close()


def test_one_forkserver_serves_one_backend_and_environment_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool = WorkerPool([SPEC], case_timeout_s=60, start_method="forkserver")
    try:
        monkeypatch.setenv("OMP_NUM_THREADS", "3")  # another measured-code environment
        with pytest.raises(RuntimeError, match="one at a time per process"):
            WorkerPool([SPEC], case_timeout_s=60, start_method="forkserver")
    finally:
        pool.close()
    # Once that pool has closed, the server is started again for the new environment.
    again = WorkerPool([SPEC], case_timeout_s=60, start_method="forkserver")
    try:
        again.wait_ready()
        assert again.workers[0].preloaded
        pid = again.workers[0].process.pid
        assert pid is not None
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert b"OMP_NUM_THREADS=3" in environ
    finally:
        again.close()


def test_a_forkserver_whose_imports_made_a_cuda_context_gives_way_to_spawned_workers(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(worker_start, "preload_module", lambda backend: "tests.cuda_before_fork")
    pool = WorkerPool([SPEC], case_timeout_s=60, start_method="forkserver")
    try:
        pool.wait_ready()
        assert pool.start_method == "spawn"
        assert not pool.workers[0].preloaded  # spawned: it imported its backend itself
    finally:
        pool.close()
    assert "importing tests.cuda_before_fork made a CUDA context" in capfd.readouterr().err
    # The next pool of that preload spawns at once, without starting a server to find out.
    again = WorkerPool([SPEC], case_timeout_s=60, start_method="forkserver")
    try:
        assert again.start_method == "spawn" and again.server_seconds < 0.5
    finally:
        again.close()
    monkeypatch.undo()
    # The next pool gets a server that preloads the backend again.
    forked = WorkerPool([SPEC], case_timeout_s=60, start_method="forkserver")
    try:
        forked.wait_ready()
        assert forked.start_method == "forkserver" and forked.workers[0].preloaded
    finally:
        forked.close()
