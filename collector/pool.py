"""The worker pool: one process per device, a watchdog, and crash attribution.

The coordinator keeps the queue of pending tasks and hands one task at a time to each idle
worker, so it always knows which case a worker is running. That is what lets it (a) kill a
worker whose case outlives the watchdog and record `timeout` for that case, (b) record a
worker that died (segfault, OOM kill, `os._exit`) as a `crash` of the case it was running,
with the signal, and (c) replace the worker and go on. Every task ends in exactly one
outcome: a result, a failure, or (when the run is stopped) still pending for `--resume`.
"""

from __future__ import annotations

import signal
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any

from collector.environment import environment_for_children, measured_code_environment
from collector.errors import UserError
from collector.failures import (
    CRASH,
    TIMEOUT,
    FailureRecord,
    poisons_context,
)
from collector.worker import WorkerSpec, worker_main
from collector.worker_start import acquire, release

if TYPE_CHECKING:
    from collector.caseplan import Case

STARTUP_TIMEOUT_S = 900.0
# A slot whose worker dies this many times in a row before it is ready aborts the run.
MAX_STARTUP_FAILURES = 3


class BackendStartupError(UserError):
    """A worker could not start its backend (e.g. the framework is not installed)."""

    def __init__(self, message: str, classification: str, detail: dict[str, Any]) -> None:
        super().__init__(message)
        self.classification = classification
        self.detail = detail


# What a worker is sent of a task (collector/worker.py reads these).
_MESSAGE_FIELDS = ("task_id", "op", "values", "run", "clock_reference_mhz", "panel")


@dataclass
class Task:
    task_id: str
    case_key: str
    op: str
    values: list[tuple[str, Any]]
    params: dict[str, Any]
    dtype: str
    run: int
    # The fastest SM clock measured in this case's earlier runs: the clock floor's reference
    # for a worker that has not run the case before (a fresh round's process, a replacement).
    clock_reference_mhz: float | None = None
    # The device slot that must take it (None: any): a case's runs stay on one device.
    slot: int | None = None
    # A calibration-panel kernel (collector/panel.py): measured with the bot's torch
    # backend and never slowed by a canary.
    panel: bool = False

    @classmethod
    def of(
        cls,
        case: Case,
        run: int,
        task_id: str,
        clock_reference_mhz: float | None,
        slot: int | None,
        panel: bool = False,
    ) -> Task:
        """The task of one run of `case`: its identity and fields copied from the case."""
        return cls(
            task_id=task_id,
            case_key=case.key,
            op=case.op,
            values=list(case.values),
            params=case.params,
            dtype=case.dtype,
            run=run,
            clock_reference_mhz=clock_reference_mhz,
            slot=slot,
            panel=panel,
        )

    def message(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _MESSAGE_FIELDS}


@dataclass
class _Worker:
    slot: int
    spec: WorkerSpec
    process: BaseProcess
    conn: Connection
    ready: bool = False
    # Whether the process had its backend imported before it started (forked from a server
    # that preloaded it, or a spare that imported it in standby).
    preloaded: bool = False
    task: Task | None = None
    started: float = 0.0
    startup_failures: int = 0
    retiring: bool = False
    info: dict[str, Any] = field(default_factory=dict)


def _signal_name(exitcode: int | None) -> str | None:
    if exitcode is None or exitcode >= 0:
        return None
    try:
        return signal.Signals(-exitcode).name
    except ValueError:
        return f"signal {-exitcode}"


class WorkerPool:
    def __init__(
        self,
        specs: list[WorkerSpec],
        case_timeout_s: float,
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
        prestart: bool = False,
        start_method: str = "spawn",
    ) -> None:
        # How processes start (collector/worker_start.py): spawned, or forked from a server
        # that imported the backend once, with the measured code's environment.
        t0 = time.monotonic()
        backend = specs[0].backend if specs else "torch"
        self._mp = acquire(start_method, backend, measured_code_environment())
        # A forkserver's own start and import (about 0 when reused, or spawned): counted in
        # startup_seconds and kept apart, since collections that share a server share it.
        self.server_seconds = time.monotonic() - t0
        # What the workers start with: a forkserver whose imports made a CUDA context
        # gives way to spawning (collector/worker_start.py).
        self.start_method = self._mp.get_start_method()
        self._start_method: str | None = self.start_method
        self.case_timeout_s = case_timeout_s
        self.startup_timeout_s = startup_timeout_s
        self.workers: list[_Worker] = []
        self.replacements = 0
        # Times every worker was replaced by a fresh process between rounds, and the seconds
        # spent starting workers and waiting for them to become ready (a cost of the run, not
        # of any case; a forkserver's own start and import included).
        self.recycles = 0
        self.startup_seconds = 0.0
        # With `prestart`, the next round's processes start while this round measures: each
        # imports its backend and waits in standby (`prestart`), so a recycle only has to make
        # their CUDA contexts. `prestarted` counts the recycles that took spares.
        self.prestart_enabled = prestart
        self.spares: list[_Worker] = []
        self.prestarted = 0
        # What each spare's backend loaded before its turn (worker.py, `_warm`), as reported.
        self.warmed: list[dict[str, Any]] = []
        try:
            for i, spec in enumerate(specs):
                self.workers.append(self._spawn(i, spec))
        except BaseException:
            self.close()
            raise
        self.startup_seconds += time.monotonic() - t0

    def _next_spec(self, spec: WorkerSpec, recycle: int) -> WorkerSpec:
        return replace(spec, name=f"{spec.name.split('.')[0]}.r{recycle}", standby=False)

    def prestart(self) -> None:
        """Start a standby spare for every slot, for the next recycle (no-op when off or when
        spares are already waiting)."""
        if not self.prestart_enabled or self.spares:
            return
        self.spares = [
            self._spawn(w.slot, replace(self._next_spec(w.spec, self.recycles + 1), standby=True))
            for w in self.workers
        ]

    def _spawn(self, slot: int, spec: WorkerSpec, failures: int = 0) -> _Worker:
        parent, child = self._mp.Pipe()
        process = self._mp.Process(
            target=worker_main, args=(child, spec), name=f"collector-{spec.name}", daemon=True
        )
        # The worker runs the measured code: it gets an allow-listed environment, no secrets.
        with environment_for_children(measured_code_environment()):
            process.start()
        child.close()
        return _Worker(
            slot, spec, process, parent, started=time.monotonic(), startup_failures=failures
        )

    def wait_ready(self) -> list[dict[str, Any]]:
        """Block until every worker is ready; a backend that cannot start is a clear error."""
        t0 = time.monotonic()
        try:
            return self._wait_ready()
        finally:
            self.startup_seconds += time.monotonic() - t0

    def _wait_ready(self) -> list[dict[str, Any]]:
        for w in self.workers:
            while not w.ready:
                if not w.conn.poll(self.startup_timeout_s):
                    raise UserError(
                        f"worker {w.spec.name} on {w.spec.device} did not start within "
                        f"{self.startup_timeout_s:.0f} s"
                    )
                try:
                    msg = w.conn.recv()
                except (EOFError, OSError):
                    w.process.join(5)
                    raise UserError(
                        f"worker {w.spec.name} on {w.spec.device} died while starting "
                        f"(exit {w.process.exitcode})"
                    ) from None
                self._handle_startup_message(w, msg)
        return [w.info for w in self.workers]

    def _handle_startup_message(self, w: _Worker, msg: dict[str, Any]) -> None:
        if msg["type"] == "fatal":
            first_line = (msg["message"] or "").splitlines()[0] if msg["message"] else ""
            raise BackendStartupError(
                f"backend {w.spec.backend!r} could not start on {w.spec.device}: "
                f"{msg['exception_type']}: {first_line}",
                msg["classification"],
                msg,
            )
        if msg["type"] == "ready":  # a spare's "standby" comes first and means nothing here
            w.ready = True
            w.preloaded = bool(msg.get("preloaded"))
            if msg.get("standby_warm"):
                self.warmed.append(msg["standby_warm"])
            w.info = msg["device_info"]
            w.startup_failures = 0

    def recycle(self) -> None:
        """Replace every idle worker by a fresh process and wait until all are ready.

        Between rounds: a process keeps one draw of the memory-system state that short
        kernels' speed follows, so the runs of a case taken in one process share it
        (docs/statistics.md); fresh processes make each round's runs independent draws.
        The old processes exit before a spare makes its CUDA context.
        """
        self._stop(self.workers)
        self.recycles += 1
        spares = {w.slot: w for w in self.spares if w.process.is_alive()}
        self._stop([w for w in self.spares if w.slot not in spares])
        self.spares = []
        if spares:
            self.prestarted += 1
        fresh: list[_Worker] = []
        for w in self.workers:
            spare = spares.get(w.slot)
            if spare is not None and self._go(spare):
                fresh.append(spare)
            else:
                fresh.append(self._spawn(w.slot, self._next_spec(w.spec, self.recycles)))
        self.workers = fresh
        self.wait_ready()

    def warm_summary(self) -> dict[str, Any]:
        """The spares' warm-ups: how many, their seconds, what they loaded, how many held a
        CUDA context before their turn (or could not tell), how many failed."""
        return {
            "spares": len(self.warmed),
            "seconds": round(sum(float(w.get("seconds", 0.0)) for w in self.warmed), 3),
            "loaded": sorted({name for w in self.warmed for name in w.get("loaded", [])}),
            "cuda_before_go": sum(w.get("cuda_before_go") is True for w in self.warmed),
            "unknown_context": sum(
                bool(w.get("loaded")) and w.get("cuda_before_go") is None for w in self.warmed
            ),
            "errors": sum("error" in w for w in self.warmed),
        }

    @staticmethod
    def _go(spare: _Worker) -> bool:
        """Start a spare; from now on it is a worker like any (its replacements start at once)."""
        try:
            spare.conn.send("go")
        except OSError:
            return False
        spare.spec = replace(spare.spec, standby=False)
        spare.started = time.monotonic()
        return True

    @staticmethod
    def _stop(workers: list[_Worker]) -> None:
        """Ask each process to exit, then kill what is still there after 30 s."""
        for w in workers:
            try:
                if w.process.is_alive():
                    w.conn.send(None)
            except OSError:
                pass
        for w in workers:
            w.process.join(30)
            if w.process.is_alive():
                w.process.kill()
                w.process.join(5)
            w.conn.close()

    def _replace(self, w: _Worker, died_before_ready: bool = False) -> _Worker:
        if w.process.is_alive():
            w.process.kill()
        w.process.join(10)
        w.conn.close()
        failures = w.startup_failures + 1 if died_before_ready else 0
        if failures >= MAX_STARTUP_FAILURES:
            raise UserError(
                f"worker {w.spec.name} on {w.spec.device} failed to start {failures} times in a row"
            )
        self.replacements += 1
        fresh = self._spawn(
            w.slot,
            replace(w.spec, name=f"{w.spec.name.split('.')[0]}.{self.replacements}", standby=False),
            failures,
        )
        self.workers[w.slot] = fresh
        return fresh

    def _failure(
        self, w: _Worker, task: Task, classification: str, message: str, exc: str
    ) -> dict[str, Any]:
        sig = _signal_name(w.process.exitcode)
        record = FailureRecord.of(
            (task.task_id, task.case_key, task.op, task.params, task.dtype),
            classification,
            exc,
            message,
            exit_code=w.process.exitcode,
            signal=sig,
            worker=w.spec.name,
            device=w.spec.device,
            run_index=task.run,
        )
        return {"type": "result", "task_id": task.task_id, "failure": record.to_json()}

    def execute(self, tasks: Iterable[Task], on_outcome: Callable[[dict[str, Any]], None]) -> None:
        """Run every task once; each produces exactly one `on_outcome` call.

        A task with a slot goes only to that slot's worker (or its replacement after a
        crash: same slot, same device); a task without one to any idle worker."""
        queues: dict[int | None, deque[Task]] = {}
        for t in tasks:
            slot = t.slot if t.slot is not None and 0 <= t.slot < len(self.workers) else None
            if slot is None and t.slot is not None:
                raise ValueError(f"task {t.task_id}: no device slot {t.slot}")
            queues.setdefault(slot, deque()).append(t)

        def pending_for(slot: int) -> deque[Task] | None:
            for q in (queues.get(slot), queues.get(None)):
                if q:
                    return q
            return None

        while any(queues.values()) or any(w.task is not None for w in self.workers):
            for w in self.workers:
                idle = w.ready and not w.retiring and w.task is None
                pending = pending_for(w.slot) if idle else None
                if pending and w.process.is_alive():
                    task = pending.popleft()
                    try:
                        w.conn.send(task.message())
                    except OSError:  # it died between tasks: replaced below, task kept
                        pending.appendleft(task)
                        w.retiring = True
                        continue
                    w.task = task
                    w.started = time.monotonic()
            waitables: list[Any] = [w.conn for w in self.workers]
            waitables += [w.process.sentinel for w in self.workers]
            wait(waitables, timeout=self._next_deadline())
            for slot in range(len(self.workers)):
                self._service(self.workers[slot], on_outcome)

    def _next_deadline(self) -> float:
        now = time.monotonic()
        deadlines = [w.started + self.case_timeout_s - now for w in self.workers if w.task]
        return max(0.05, min(deadlines, default=1.0))

    def _service(self, w: _Worker, on_outcome: Callable[[dict[str, Any]], None]) -> None:
        while w.conn.poll():
            try:
                msg = w.conn.recv()
            except (EOFError, OSError):
                break
            if msg["type"] in ("ready", "fatal"):
                self._handle_startup_message(w, msg)
            elif (
                msg["type"] == "result" and w.task is not None and msg["task_id"] == w.task.task_id
            ):
                w.task = None
                if "failure" in msg and poisons_context(msg["failure"]["classification"]):
                    w.retiring = True  # it exits on its own; never hand it another task
                on_outcome(msg)
        if not w.process.is_alive():
            w.process.join(1)
            if w.task is not None:
                task, w_dead = w.task, w
                sig = _signal_name(w.process.exitcode) or f"exit code {w.process.exitcode}"
                on_outcome(
                    self._failure(
                        w_dead,
                        task,
                        CRASH,
                        f"worker {w.spec.name} died ({sig}) while running {task.case_key}",
                        "WorkerCrash",
                    )
                )
                w.task = None
            self._replace(w, died_before_ready=not w.ready)
            return
        if w.task is not None and time.monotonic() - w.started > self.case_timeout_s:
            task = w.task
            w.process.kill()
            w.process.join(10)
            on_outcome(
                self._failure(
                    w,
                    task,
                    TIMEOUT,
                    f"{task.case_key} exceeded the {self.case_timeout_s:.0f} s watchdog; "
                    f"worker {w.spec.name} killed",
                    "CaseTimeout",
                )
            )
            w.task = None
            self._replace(w)

    def close(self) -> None:
        if self._start_method is not None:
            release(self._start_method)
            self._start_method = None
        workers, self.spares = [*self.workers, *self.spares], []
        for w in workers:
            try:
                if w.process.is_alive():
                    w.conn.send(None)
            except (OSError, BrokenPipeError):
                pass
        deadline = time.monotonic() + 10
        for w in workers:
            w.process.join(max(0.1, deadline - time.monotonic()))
            if w.process.is_alive():
                w.process.kill()
                w.process.join(5)
            w.conn.close()
