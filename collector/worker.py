"""A worker process: owns one device, measures the tasks the coordinator sends it.

Spawned, or forked from a server that made no CUDA context (collector/worker_start.py): a
process that made one cannot fork a usable CUDA child. It ignores SIGINT and SIGTERM, which
are the coordinator's to handle; the coordinator kills it when it must. After a CUDA-fatal
error the worker reports the failure and exits, because its context is poisoned.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from collector.aggregate import RunResult
from collector.timing import Protocol


@dataclass(frozen=True)
class WorkerSpec:
    backend: str
    device: str
    protocol: Protocol
    name: str
    canary: dict[str, Any] | None = None
    backend_options: dict[str, Any] = field(default_factory=dict)
    # The device slot: tasks routed to it go to this worker and its replacements only.
    slot: int = 0
    # A spare for the next round: import the backend, say "standby", and wait for "go"
    # before making a CUDA context (collector/pool.py, `WorkerPool.prestart`).
    standby: bool = False


def _device_index(device: str) -> int:
    _, _, idx = device.partition(":")
    return int(idx) if idx.isdigit() else 0


def worker_main(conn: Connection, spec: WorkerSpec) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    warmed: dict[str, Any] = {}
    if spec.standby:
        went = _stand_by(conn, spec)
        if went is None:
            return
        warmed = went
    # Imported before this worker's start: by the server it was forked from, or in standby.
    preloaded = _imported(spec.backend)
    try:
        ctx, info = _start(spec)
    except Exception as exc:
        from collector.failures import classify_exception

        conn.send(
            {
                "type": "fatal",
                "classification": classify_exception(exc),
                "exception_type": type(exc).__name__,
                "message": str(exc)[:2000],
                "traceback": traceback.format_exc()[-8000:],
            }
        )
        conn.close()
        return
    conn.send(
        {
            "type": "ready",
            "pid": os.getpid(),
            "device_info": info,
            "preloaded": preloaded,
            "standby_warm": warmed,
        }
    )
    from collector.caseplan import Case
    from collector.failures import poisons_context
    from collector.measure import measure_case

    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        case = Case(op=task["op"], values=tuple((k, v) for k, v in task["values"]))
        where = ctx.panel_context() if task.get("panel") else ctx
        where.adopt_clock_reference(case.key, task.get("clock_reference_mhz"))
        outcome = measure_case(where, case, int(task["run"]))
        if isinstance(outcome, RunResult):
            message = {"type": "result", "task_id": task["task_id"], "run": outcome.to_json()}
            conn.send({**message, "panel": True} if task.get("panel") else message)
            continue
        outcome.task_id = task["task_id"]
        conn.send({"type": "result", "task_id": task["task_id"], "failure": outcome.to_json()})
        if poisons_context(outcome.classification):
            conn.close()
            os._exit(0)  # the coordinator replaces this worker with a fresh context


def _imported(backend: str) -> bool:
    """Whether what building `backend` imports is in this process already."""
    from collector.backends import preload_module

    return preload_module(backend) in sys.modules


def _stand_by(conn: Connection, spec: WorkerSpec) -> dict[str, Any] | None:
    """Import the backend and warm it (`_warm`), then wait for the coordinator's "go"; None:
    exit instead, else what the warm-up did. A failed import is left for `_start` to repeat
    and report as the worker's start."""
    from collector.backends import preload

    try:
        preload(spec.backend)
        preloaded = True
    except Exception:  # reported by `_start`, which imports it again
        preloaded = False
    warmed = _warm(spec) if preloaded and spec.protocol.standby_warm else {}
    conn.send({"type": "standby", "pid": os.getpid(), "preloaded": preloaded})
    try:
        return warmed if conn.recv() == "go" else None
    except EOFError:
        return None


def _warm(spec: WorkerSpec) -> dict[str, Any]:
    """What the backend loads before this spare's turn (`standby_warm`), its seconds, and
    whether the spare held a CUDA context before "go" (torch's flag, or NVML's list of the
    device's processes), which the warm-up must not make."""
    from collector.backends import standby_warm
    from collector.device import holds_cuda_context

    started = time.perf_counter()
    out: dict[str, Any] = {}
    try:
        out["loaded"] = standby_warm(spec.backend, spec.device)
    except Exception as exc:  # the case that needs it loads it again, and reports
        out["loaded"], out["error"] = [], type(exc).__name__
    out["seconds"] = round(time.perf_counter() - started, 3)
    if out["loaded"]:
        torch = sys.modules.get("torch")
        listed = holds_cuda_context(_device_index(spec.device), os.getpid())
        flagged = torch is not None and bool(torch.cuda.is_initialized())
        out["cuda_before_go"] = flagged or listed
    return out


def _start(spec: WorkerSpec) -> tuple[Any, dict[str, Any]]:
    from collector.backends import get_backend
    from collector.canary import Canary
    from collector.device import ClockReader, fingerprint
    from collector.measure import MeasureContext

    if spec.device.startswith("cuda"):
        import torch

        torch.cuda.set_device(_device_index(spec.device))
    info = fingerprint(spec.device, spec.slot)
    backend = get_backend(spec.backend, **spec.backend_options)
    ctx = MeasureContext(
        backend=backend,
        device=spec.device,
        protocol=spec.protocol,
        l2_bytes=int(info.get("l2_bytes") or 0),
        clocks=ClockReader(spec.device, _device_index(spec.device)),
        canary=Canary.from_json(spec.canary),
        worker=spec.name,
        device_index=spec.slot,
        device_uuid=str(info.get("uuid") or ""),
        device_name=str(info.get("name") or ""),
    )
    info["framework_version"] = backend.framework_version()
    return ctx, info
