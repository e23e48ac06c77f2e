"""The collection loop: plan, measure in rounds on a worker pool, checkpoint, finalize.

Runs are taken in rounds: round r measures run r of every case still in play, so one case's
runs spread over the whole collection and slow drifts (clock, heat, neighbours) spread over
all cases instead of biasing a few. A case that fails is recorded once and leaves play; with
adaptive stopping, a case whose interval is tight enough leaves play early.
"""

from __future__ import annotations

import json
import math
import signal
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from collector import levels
from collector.aggregate import RunResult
from collector.assignment import sticky_slots
from collector.attn_backends import AUTO, HONOURED_BY
from collector.attn_backends import FIELD as ATTN_FIELD
from collector.canary import Canary
from collector.caseplan import Case, CaseSelector, Plan, build_plan, take_shard
from collector.errors import RecordWriteError, UserError
from collector.failures import FailureRecord
from collector.panel import panel_cases, panel_runs, summarise_panel
from collector.pool import BackendStartupError, Task, WorkerPool
from collector.provenance import collector_hash, git_sha, library_versions
from collector.record import CHECKPOINT, RUN_JSON, Checkpoint, CheckpointState, finalize
from collector.rules import RuleOutcome, apply_rules, load_rules
from collector.timing import Protocol
from collector.worker import WorkerSpec

# Task ids of calibration-panel kernels start with this (a case key never does).
PANEL_TASK = "panel#"
# Re-finalize the partial record at most this often, so a killed run still reads as partial.
PARTIAL_EVERY_S = 30.0
# Two-sided 95% t quantiles by degrees of freedom, for adaptive stopping on few runs
# (scipy would cost a second of start-up).
_T95 = {
    1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
    10: 2.23, 11: 2.20, 12: 2.18, 13: 2.16, 14: 2.14, 15: 2.13, 16: 2.12, 17: 2.11,
    18: 2.10, 19: 2.09,
}  # fmt: skip


class Interrupted(Exception):
    """SIGTERM or SIGINT: stop cleanly and leave a valid record marked partial."""


@dataclass
class CollectConfig:
    out: Path
    backend: str = "torch"
    ops: tuple[str, ...] = ("gemm",)
    device: str = "cpu"
    case_file: Path | None = None
    case_set: str = "default"
    case_filter: CaseSelector | None = None
    limit: int | None = None
    shard: tuple[int, int] | None = None
    rules_file: Path | None = None
    protocol: Protocol = field(default_factory=Protocol)
    canary: Canary | None = None
    resume: bool = False
    command: list[str] = field(default_factory=list)
    image_ref: str | None = None
    image_digest: str | None = None
    quiet: bool = False
    # None: one worker per visible GPU (one for the CPU); 0: measure in this process.
    workers: int | None = None
    case_timeout_s: float = 600.0
    backend_options: dict[str, Any] = field(default_factory=dict)
    # Measure the calibration panel (collector/panel.py) on every device, in the first rounds.
    panel: bool = True
    # The run's attention backend (collector/attn_backends.py) for cases that name none.
    attn_backend: str = AUTO

    def base_plan(self) -> Plan:
        """The plan before device rules: case files, filter and shard (limit comes last)."""
        plan = build_plan(
            self.ops,
            case_file=self.case_file,
            case_set=self.case_set,
            case_filter=self.case_filter,
            run_values={ATTN_FIELD: self.attn_backend},
        )
        _check_dispatch_honoured(self.backend, plan.cases)
        return Plan(tuple(take_shard(plan.cases, self.shard)), plan.source, plan.case_set, plan.ops)


def _check_dispatch_honoured(backend: str, cases: Iterable[Case]) -> None:
    """A backend that cannot choose vLLM's attention backend refuses a plan that names one
    (its rows would claim a dispatch that never happened)."""
    if backend in HONOURED_BY:
        return
    for case in cases:
        chosen = case.params.get(ATTN_FIELD, AUTO)
        if chosen != AUTO:
            raise UserError(
                f"{ATTN_FIELD}={chosen} ({case.key}): only the {', '.join(HONOURED_BY)} "
                f"backend chooses an attention backend, not {backend}"
            )


def resolve_plan(cfg: CollectConfig, sm: str | None) -> tuple[Plan, RuleOutcome]:
    base = cfg.base_plan()
    outcome = apply_rules(list(base.cases), load_rules(cfg.rules_file), cfg.backend, sm)
    kept = outcome.kept[: cfg.limit] if cfg.limit is not None else outcome.kept
    outcome.unverified = {k: v for k, v in outcome.unverified.items() if k in {c.key for c in kept}}
    return Plan(tuple(kept), base.source, base.case_set, base.ops), outcome


@contextmanager
def signal_handler(handler: Callable[[int, FrameType | None], None]) -> Iterator[None]:
    """`handler` for SIGTERM and SIGINT while the block runs; the previous handlers after."""
    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(signal.Signals(signum).name)

    with signal_handler(handler):
        yield


def visible_devices(device: str, workers: int | None) -> list[str]:
    if device == "cpu":
        return ["cpu"] * max(1, workers or 1)
    if not device.startswith("cuda"):
        raise UserError(f"--device: unknown device {device!r} (use cpu, cuda or cuda:N)")
    import torch

    count = torch.cuda.device_count()
    if count == 0:
        raise UserError(f"--device {device}: no CUDA device is visible to torch")
    _, _, idx = device.partition(":")
    if idx:
        if not idx.isdigit() or int(idx) >= count:
            raise UserError(f"--device {device}: only {count} CUDA devices are visible")
        return [device]
    chosen = [f"cuda:{i}" for i in range(count)]
    return chosen[:workers] if workers else chosen


def relative_halfwidth(run_ms: list[list[float]]) -> float:
    """Relative half-width of a 95% t-interval on the mean log run value: each run's trimmed
    mean, or where its samples sit on placement levels that mix inside runs, its value level
    by level (collector/levels.py), as the comparison reads them."""
    means = np.log(levels.side_values([np.asarray(r, dtype=float) for r in run_ms]))
    n = means.size
    if n < 2:
        return math.inf
    t = _T95.get(n - 1, 1.96 + 2.4 / (n - 1))
    return float(t * np.std(means, ddof=1) / math.sqrt(n))


class Collection:
    """One run record being written. `run_round` can be driven from outside (A/B schedules)."""

    def __init__(self, cfg: CollectConfig) -> None:
        self.cfg = cfg
        cfg.base_plan()  # validate options before starting any process
        self.out = cfg.out
        self._prepare_out_dir()
        self.devices = visible_devices(cfg.device, cfg.workers)
        self.pool: WorkerPool | None = None
        self.ctx: Any = None
        self.startup_failure: BackendStartupError | None = None
        # Each device slot's fingerprint (one per worker; one for in-process collection).
        self.device_infos: list[dict[str, Any]] = []
        # Whatever stops the set-up (a bad plan, a full disk, SIGTERM while the workers
        # start) must not leave workers behind: they ignore SIGTERM, and an exiting
        # interpreter would wait for them forever.
        try:
            self.device_info = self._start_measuring()
            sm = self.device_info.get("sm") if cfg.device != "cpu" else None
            self.plan, self.rules = resolve_plan(cfg, sm)
            if not self.plan.cases:
                raise UserError(
                    "the plan selects no cases (check --ops, --cases, --case-filter, --shard)"
                )
            self.state = (
                CheckpointState.load(self.out / CHECKPOINT) if cfg.resume else CheckpointState()
            )
            self.converged: set[str] = set()
            self._update_converged()
            self.slots = self._assign_devices()
            self.checkpoint = Checkpoint(self.out / CHECKPOINT)
            self.meta = self._meta()
            self._last_partial = 0.0
            self._round_begun = -1  # the last round `run_round` began (workers recycle once)
            if self.startup_failure is not None:
                self._record_startup_failure(self.startup_failure)
            self._write_partial(force=True)
        except BaseException:
            self.close()
            if hasattr(self, "checkpoint"):
                self.checkpoint.close()
            raise

    # --- set-up -------------------------------------------------------------------------
    def _prepare_out_dir(self) -> None:
        if self.out.exists() and not self.out.is_dir():
            raise UserError(f"{self.out}: exists and is not a directory")
        if self.out.exists() and any(self.out.iterdir()) and not self.cfg.resume:
            raise UserError(f"{self.out}: not empty (choose a new --out, or pass --resume)")
        if self.cfg.resume and not (self.out / CHECKPOINT).exists():
            raise UserError(f"{self.out}: nothing to resume (no {CHECKPOINT})")
        self.out.mkdir(parents=True, exist_ok=True)

    def _spec(self, i: int, device: str) -> WorkerSpec:
        return WorkerSpec(
            backend=self.cfg.backend,
            device=device,
            protocol=self.cfg.protocol,
            name=f"w{i}",
            canary=self.cfg.canary.to_json() if self.cfg.canary else None,
            backend_options=self.cfg.backend_options,
            slot=i,
        )

    def _start_measuring(self) -> dict[str, Any]:
        """Start the workers (or the in-process context) and return the device fingerprint."""
        try:
            if self.cfg.workers == 0:
                return self._start_in_process()
            self.pool = WorkerPool(
                [self._spec(i, d) for i, d in enumerate(self.devices)],
                self.cfg.case_timeout_s,
                prestart=self.cfg.protocol.prestart_workers_on(self.cfg.device),
                start_method=self.cfg.protocol.worker_start,
            )
            infos = self.pool.wait_ready()  # Collection.__init__ closes the pool on any error
            self.device_infos = [dict(i) for i in infos]
        except BackendStartupError as exc:
            # The backend cannot run here: every planned case is recorded as failing with
            # that classification, and the run is marked failed (no silent success).
            self.startup_failure = exc
            self.close()
            from collector.device import fingerprint

            return fingerprint(self.devices[0]) if self.devices[0] == "cpu" else {"name": "unknown"}
        info = dict(infos[0])
        if len(infos) > 1:
            info["devices"] = infos
        return info

    def _start_in_process(self) -> dict[str, Any]:
        from collector.backends import get_backend
        from collector.device import ClockReader, fingerprint
        from collector.measure import MeasureContext

        device = self.devices[0]
        info = fingerprint(device)
        self.device_infos = [dict(info)]
        try:
            backend = get_backend(self.cfg.backend, **self.cfg.backend_options)
        except ImportError as exc:
            from collector.failures import classify_exception

            raise BackendStartupError(
                f"backend {self.cfg.backend!r} could not start: {exc}",
                classify_exception(exc),
                {"exception_type": type(exc).__name__, "message": str(exc), "traceback": ""},
            ) from None
        self.ctx = MeasureContext(
            backend=backend,
            device=device,
            protocol=self.cfg.protocol,
            l2_bytes=int(info.get("l2_bytes") or 0),
            clocks=ClockReader(device),
            canary=self.cfg.canary,
            device_index=0,
            device_uuid=str(info.get("uuid") or ""),
            device_name=str(info.get("name") or ""),
        )
        info["framework_version"] = backend.framework_version()
        return info

    def _meta(self) -> dict[str, Any]:
        previous: dict[str, Any] = {}
        if self.cfg.resume and (self.out / RUN_JSON).exists():
            try:
                previous = json.loads((self.out / RUN_JSON).read_text())
            except (OSError, ValueError) as exc:
                raise UserError(
                    f"{self.out / RUN_JSON}: unreadable, cannot resume ({exc}); the checkpoint "
                    "is intact: move run.json aside to resume from the checkpoint alone"
                ) from None
            if not isinstance(previous, dict):
                raise UserError(f"{self.out / RUN_JSON}: not a JSON object, cannot resume")
            if previous.get("plan_hash") not in (None, self.plan.hash):
                raise UserError(
                    f"{self.out / RUN_JSON}: plan hash {previous.get('plan_hash')} differs from "
                    f"this plan's {self.plan.hash}; resume with the same options"
                )
        device = {k: v for k, v in self.device_info.items() if k != "framework_version"}
        return {
            "run_id": previous.get("run_id") or uuid.uuid4().hex[:12],
            "backend": self.cfg.backend,
            "framework": _framework_name(self.cfg.backend),
            "framework_version": self.device_info.get("framework_version", "unknown"),
            "ops": list(self.cfg.ops),
            "plan_hash": self.plan.hash,
            "plan_source": self.plan.source,
            "case_set": self.plan.case_set,
            "case_filter": self.cfg.case_filter.text if self.cfg.case_filter else None,
            "attn_backend": self.cfg.attn_backend,
            "shard": list(self.cfg.shard) if self.cfg.shard else None,
            "rules": {
                **self.rules.summary(),
                "unverified_keys": sorted(self.rules.unverified),
            },
            "collector_hash": collector_hash(),
            "image": {"ref": self.cfg.image_ref, "digest": self.cfg.image_digest},
            "git_sha": git_sha(),
            "device": device,
            "workers": len(self.devices) if self.cfg.workers != 0 else 0,
            "versions": library_versions(),
            "command": self.cfg.command,
            "protocol": self.cfg.protocol.to_json(),
            "canary": self.cfg.canary.to_json() if self.cfg.canary else None,
            "started_at": previous.get("started_at") or _now(),
            "resumed_at": [*previous.get("resumed_at", []), _now()] if self.cfg.resume else [],
            "finished_at": None,
            "error": None,
        }

    def _slot_uuids(self) -> list[str]:
        n = max(1, len(self.device_infos))
        return [
            str((self.device_infos[i] if i < len(self.device_infos) else {}).get("uuid") or "")
            for i in range(n)
        ]

    def _assign_devices(self) -> dict[str, int]:
        """Each case's device slot for the whole collection (collector/assignment.py); a
        resumed case stays on the device that took its earlier runs."""
        measured_on = {
            key: runs[0].device_uuid
            for key, runs in self.state.runs.items()
            if runs and runs[0].device_uuid
        }
        return sticky_slots([c.key for c in self.plan.cases], self._slot_uuids(), measured_on)

    def _assignment_meta(self) -> dict[str, Any]:
        counts: dict[int, int] = {}
        for slot in self.slots.values():
            counts[slot] = counts.get(slot, 0) + 1
        devices = []
        for i, slot_uuid in enumerate(self._slot_uuids()):
            info = self.device_infos[i] if i < len(self.device_infos) else {}
            devices.append(
                {
                    "index": i,
                    "uuid": slot_uuid or None,
                    "name": info.get("name"),
                    "cases": counts.get(i, 0),
                }
            )
        return {"rule": "hash-rank", "devices": devices}

    def _record_startup_failure(self, exc: BackendStartupError) -> None:
        detail = exc.detail
        self.meta["error"] = str(exc)
        for case in self.plan.cases:
            if case.key in self.state.failed_keys:
                continue
            record = FailureRecord.of(
                (f"{case.key}#startup", case.key, case.op, case.params, case.dtype),
                exc.classification,
                str(detail.get("exception_type")),
                str(detail.get("message")),
                traceback=str(detail.get("traceback") or ""),
                worker="startup",
                device=self.devices[0],
                run_index=0,
            )
            self.record(record)

    # --- progress and accounting --------------------------------------------------------
    @property
    def total_tasks(self) -> int:
        return len(self.plan.cases) * self.cfg.protocol.runs

    def done_tasks(self) -> int:
        runs = self.cfg.protocol.runs
        failed = self.state.failed_keys
        done = 0
        for case in self.plan.cases:
            if case.key in failed or case.key in self.converged:
                done += runs
            else:
                done += len(self.state.runs.get(case.key, []))
        return done

    def pending(self, run: int) -> list[Case]:
        failed = self.state.failed_keys
        have = {key for key, runs in self.state.runs.items() if any(r.run == run for r in runs)}
        return [
            c
            for c in self.plan.cases
            if c.key not in failed and c.key not in have and c.key not in self.converged
        ]

    def clock_reference(self, key: str) -> float | None:
        """The fastest SM clock measured in the case's earlier runs (None: none measured)."""
        clocks = [c for r in self.state.runs.get(key, []) for c in r.clock_mhz if c is not None]
        return max(clocks, default=None)

    def _update_converged(self) -> None:
        p = self.cfg.protocol
        if p.target_ci <= 0:
            return
        for key, runs in self.state.runs.items():
            if len(runs) >= p.min_runs and relative_halfwidth([r.ms for r in runs]) <= p.target_ci:
                self.converged.add(key)

    # --- measuring ----------------------------------------------------------------------
    def record(self, outcome: RunResult | FailureRecord, panel: bool = False) -> None:
        if panel:
            # A panel kernel's run; a panel failure only leaves the panel short (not a case).
            if isinstance(outcome, RunResult):
                self.state.panel.append(outcome)
                self.checkpoint.append("panel", outcome.to_json())
            else:
                self.state.panel_failures += 1
                self.checkpoint.append("panel_failure", outcome.to_json())
            return
        if isinstance(outcome, RunResult):
            self.state.runs.setdefault(outcome.case_key, []).append(outcome)
            self.checkpoint.append("run", outcome.to_json())
        else:
            self.state.failures.append(outcome)
            self.checkpoint.append("failure", outcome.to_json())

    def run_round(
        self,
        run: int,
        progress: Progress | None = None,
        task: TaskID | None = None,
        only: AbstractSet[str] | None = None,
    ) -> None:
        """Round `run` of every pending case, or of the cases keyed in `only` (a round can be
        driven case by case, e.g. to interleave two collections; its panel goes first)."""
        if self.startup_failure is not None:
            return
        cases = [c for c in self.pending(run) if only is None or c.key in only]
        panel = self.panel_pending(run)
        if not cases and not panel:
            return
        if (
            run > 0
            and run != self._round_begun
            and self.pool is not None
            and self.cfg.protocol.fresh_workers_on(self.cfg.device)
        ):
            self.pool.recycle()
        self._round_begun = run
        if self.pool is not None:
            self.pool.prestart()  # the next round's spares import while this one measures

        def on_outcome(outcome: RunResult | FailureRecord) -> None:
            self.record(outcome)
            if progress is not None and task is not None:
                progress.update(
                    task, completed=self.done_tasks(), failures=len(self.state.failures)
                )
            self._write_partial()

        if self.pool is None:
            from collector.measure import measure_case

            for _, case in panel:
                self.record(measure_case(self.ctx.panel_context(), case, run), panel=True)
            for case in cases:
                on_outcome(measure_case(self.ctx, case, run))
        else:
            tasks = self._round_tasks(run, panel, cases)

            def on_message(msg: dict[str, Any]) -> None:
                if str(msg.get("task_id", "")).startswith(PANEL_TASK):
                    outcome = (
                        RunResult.from_json(msg["run"])
                        if "run" in msg
                        else FailureRecord.from_json(msg["failure"])
                    )
                    self.record(outcome, panel=True)
                elif "run" in msg:
                    on_outcome(RunResult.from_json(msg["run"]))
                else:
                    on_outcome(FailureRecord.from_json(msg["failure"]))

            self.pool.execute(tasks, on_message)
        if run + 1 >= self.cfg.protocol.min_runs:
            self._update_converged()
            if progress is not None and task is not None:
                progress.update(task, completed=self.done_tasks())

    def _round_tasks(
        self, run: int, panel: list[tuple[int, Case]], cases: list[Case]
    ) -> list[Task]:
        """The round's panel kernels first on every device, then its cases, each case on its
        own device."""
        tasks = [
            Task.of(
                case,
                run,
                f"{PANEL_TASK}{case.key}#run{run}#slot{slot}",
                self.panel_clock_reference(slot, case.key),
                slot,
                panel=True,
            )
            for slot, case in panel
        ]
        return tasks + [
            Task.of(
                c, run, f"{c.key}#run{run}", self.clock_reference(c.key), self.slots.get(c.key, 0)
            )
            for c in cases
        ]

    def panel_pending(self, run: int) -> list[tuple[int, Case]]:
        """(slot, kernel) pairs of the calibration panel that round `run` still owes."""
        if not self.cfg.panel or run >= panel_runs(self.cfg.protocol.runs):
            return []
        uuids = self._slot_uuids()
        done = {(r.device_uuid, r.case_key) for r in self.state.panel if r.run == run}
        kernels = panel_cases(self.cfg.device)
        return [
            (slot, case)
            for slot, uuid in enumerate(uuids)
            for case in kernels
            if (uuid, case.key) not in done
        ]

    def panel_clock_reference(self, slot: int, key: str) -> float | None:
        """The fastest SM clock of a panel kernel's earlier runs on this slot's device."""
        uuids = self._slot_uuids()
        uuid = uuids[slot] if slot < len(uuids) else ""
        clocks = [
            c
            for r in self.state.panel
            if r.case_key == key and r.device_uuid == uuid
            for c in r.clock_mhz
            if c is not None
        ]
        return max(clocks, default=None)

    def _panel_meta(self) -> None:
        self.meta["assignment"] = self._assignment_meta()
        panel = summarise_panel(self.state.panel, panel_runs(self.cfg.protocol.runs))
        if panel is not None:
            panel["failures"] = self.state.panel_failures
        self.meta["panel"] = panel

    def _write_partial(self, force: bool = False) -> None:
        if force or time.monotonic() - self._last_partial > PARTIAL_EVERY_S:
            self._panel_meta()
            finalize(self.out, self.meta, list(self.plan.cases), self.state, "partial")
            self._last_partial = time.monotonic()

    def close(self) -> None:
        if self.pool is not None:
            # What starting worker processes cost this run, beside the cases' own seconds.
            if hasattr(self, "meta"):
                self.meta["worker_starts"] = {
                    "method": self.pool.start_method,
                    "recycles": self.pool.recycles,
                    "replacements": self.pool.replacements,
                    "prestarted": self.pool.prestarted,
                    "seconds": round(self.pool.startup_seconds, 3),
                    "server_seconds": round(self.pool.server_seconds, 3),
                    "standby_warm": self.pool.warm_summary(),
                }
            self.pool.close()
            self.pool = None

    def abandon(self) -> None:
        """Stop without writing anything more (the record could not be written)."""
        self.close()
        self.checkpoint.close()

    def finish(self, status: str) -> Path:
        self.close()
        self.checkpoint.close()
        if self.startup_failure is not None:
            status = "failed"
        self.meta["finished_at"] = _now()
        self._panel_meta()
        self.meta["converged_early"] = len(self.converged)
        return finalize(self.out, self.meta, list(self.plan.cases), self.state, status)


def _framework_name(backend: str) -> str:
    return {"vllm": "vllm", "flashinfer": "flashinfer"}.get(backend, "torch")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def progress_bar(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("failures: {task.fields[failures]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


def run_collection(cfg: CollectConfig) -> Path:
    """Collect a whole run record; returns the path of its run.json."""
    console = Console(stderr=True, quiet=cfg.quiet)
    status = "partial"
    with stop_on_signals():
        try:
            collection = Collection(cfg)
        except Interrupted as why:
            raise UserError(
                f"stopped ({why}) while the workers were starting: nothing was measured"
            ) from None
        try:
            with progress_bar(console) as progress:
                task = progress.add_task(
                    f"{cfg.backend} {','.join(cfg.ops)} on {cfg.device}",
                    total=collection.total_tasks,
                    completed=collection.done_tasks(),
                    failures=len(collection.state.failures),
                )
                for run in range(cfg.protocol.runs):
                    collection.run_round(run, progress, task)
                status = "complete"
        except Interrupted as why:
            console.print(f"stopped ({why}); the record is marked partial")
        except RecordWriteError:
            # The disk is full (or the like): writing again would fail the same way. The
            # record on disk is the last consistent one and the checkpoint holds the rest.
            collection.abandon()
            raise
        except BaseException:
            collection.finish("partial")
            raise
        path = collection.finish(status)
    summarise(console, collection, path)
    return path


def summarise(console: Console, collection: Collection, path: Path) -> None:
    state = collection.state
    failed = state.failed_keys
    ok = len([k for k in state.runs if k not in failed])
    by_class: dict[str, int] = {}
    for f in state.failures:
        by_class[f.classification] = by_class.get(f.classification, 0) + 1
    status = json.loads(path.read_text())["status"]
    console.print(
        f"{status}: {ok} cases with rows, {len(failed)} failed "
        f"({', '.join(f'{k}: {v}' for k, v in sorted(by_class.items())) or 'none'}), "
        f"{len(collection.converged)} stopped early, of {len(collection.plan.cases)} planned "
        f"-> {path.parent}"
    )
