"""The collection loop: plan, measure in rounds, checkpoint, finalize.

Runs are taken in rounds: round r measures run r of every case still in play, so one case's
runs are spread over the whole collection and slow drifts (clock, heat, neighbours) spread
over all cases instead of biasing a few. A case that fails is recorded once and leaves play.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from collector.aggregate import RunResult
from collector.backends import Backend, get_backend
from collector.canary import Canary
from collector.caseplan import Case, CaseSelector, Plan, build_plan
from collector.device import ClockReader, fingerprint
from collector.errors import UserError
from collector.failures import FailureRecord, poisons_context, record_from_exception
from collector.provenance import collector_hash, git_sha, library_versions
from collector.record import CHECKPOINT, RUN_JSON, Checkpoint, CheckpointState, finalize
from collector.timing import Protocol, measure_cpu, measure_cuda

# Re-finalize the partial record at most this often, so a killed run still reads as partial.
PARTIAL_EVERY_S = 30.0


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
    protocol: Protocol = field(default_factory=Protocol)
    canary: Canary | None = None
    resume: bool = False
    command: list[str] = field(default_factory=list)
    image_ref: str | None = None
    image_digest: str | None = None
    quiet: bool = False

    def plan(self) -> Plan:
        return build_plan(
            self.ops,
            case_file=self.case_file,
            case_set=self.case_set,
            case_filter=self.case_filter,
            limit=self.limit,
        )


@contextmanager
def _stop_on_signals() -> Iterator[None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(signal.Signals(signum).name)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _check_device(device: str) -> None:
    if device == "cpu":
        return
    if not device.startswith("cuda"):
        raise UserError(f"--device: unknown device {device!r} (use cpu or cuda[:N])")
    import torch

    if not torch.cuda.is_available():
        raise UserError(f"--device {device}: no CUDA device is visible to torch")


class Collection:
    """One run record being written. `run_round` can be driven from outside (A/B campaigns)."""

    def __init__(self, cfg: CollectConfig, plan: Plan | None = None) -> None:
        self.cfg = cfg
        self.plan = plan if plan is not None else cfg.plan()
        if not self.plan.cases:
            raise UserError("the plan selects no cases (check --ops, --cases and --case-filter)")
        _check_device(cfg.device)
        self.backend: Backend = get_backend(cfg.backend)
        unsupported = sorted(set(cfg.ops) - self.backend.supported_ops())
        if unsupported:
            raise UserError(f"backend {cfg.backend!r} does not implement op {unsupported[0]!r}")
        self.out = cfg.out
        self._prepare_out_dir()
        self.device_info = fingerprint(cfg.device)
        self.clocks = ClockReader(cfg.device, _device_index(cfg.device))
        self.state = (
            CheckpointState.load(self.out / CHECKPOINT) if cfg.resume else CheckpointState()
        )
        self.checkpoint = Checkpoint(self.out / CHECKPOINT)
        self.meta = self._meta()
        self._last_partial = 0.0
        self._write_partial(force=True)

    def _prepare_out_dir(self) -> None:
        if self.out.exists() and not self.out.is_dir():
            raise UserError(f"{self.out}: exists and is not a directory")
        if self.out.exists() and any(self.out.iterdir()) and not self.cfg.resume:
            raise UserError(f"{self.out}: not empty (choose a new --out, or pass --resume)")
        if self.cfg.resume and not (self.out / CHECKPOINT).exists():
            raise UserError(f"{self.out}: nothing to resume (no {CHECKPOINT})")
        self.out.mkdir(parents=True, exist_ok=True)

    def _meta(self) -> dict[str, Any]:
        previous: dict[str, Any] = {}
        if self.cfg.resume and (self.out / RUN_JSON).exists():
            import json

            previous = json.loads((self.out / RUN_JSON).read_text())
            if previous.get("plan_hash") not in (None, self.plan.hash):
                raise UserError(
                    f"{self.out / RUN_JSON}: plan hash {previous.get('plan_hash')} differs from "
                    f"this plan's {self.plan.hash}; resume with the same options"
                )
        return {
            "run_id": previous.get("run_id") or uuid.uuid4().hex[:12],
            "backend": self.backend.name,
            "framework": self.backend.framework,
            "framework_version": self.backend.framework_version(),
            "ops": list(self.cfg.ops),
            "plan_hash": self.plan.hash,
            "plan_source": self.plan.source,
            "case_set": self.plan.case_set,
            "case_filter": self.cfg.case_filter.text if self.cfg.case_filter else None,
            "collector_hash": collector_hash(),
            "image": {"ref": self.cfg.image_ref, "digest": self.cfg.image_digest},
            "git_sha": git_sha(),
            "device": self.device_info,
            "versions": library_versions(),
            "command": self.cfg.command,
            "protocol": self.cfg.protocol.to_json(),
            "canary": self.cfg.canary.to_json() if self.cfg.canary else None,
            "started_at": previous.get("started_at") or _now(),
            "resumed_at": [*previous.get("resumed_at", []), _now()] if self.cfg.resume else [],
            "finished_at": None,
        }

    @property
    def total_tasks(self) -> int:
        return len(self.plan.cases) * self.cfg.protocol.runs

    def done_tasks(self) -> int:
        failed = self.state.failed_keys
        done = sum(len(runs) for key, runs in self.state.runs.items() if key not in failed)
        return done + len(failed) * self.cfg.protocol.runs

    def pending(self, run: int) -> list[Case]:
        failed = self.state.failed_keys
        have = {key for key, runs in self.state.runs.items() if any(r.run == run for r in runs)}
        return [c for c in self.plan.cases if c.key not in failed and c.key not in have]

    def measure(self, case: Case, run: int) -> RunResult | FailureRecord:
        """One run of one case; an exception becomes a failure record, never a crash."""
        try:
            if self.cfg.canary is not None:
                self.cfg.canary.check_fail(case)
            l2 = int(self.device_info.get("l2_bytes") or 0)
            prepared = self.backend.prepare(case, self.cfg.device, l2)
            slowdown = self.cfg.canary.slowdown_for(case) if self.cfg.canary else None
            if self.cfg.device == "cpu":
                samples = measure_cpu(prepared, self.cfg.protocol, slowdown)
            else:
                samples = measure_cuda(prepared, self.cfg.protocol, self.clocks, slowdown)
            return RunResult(
                case_key=case.key,
                run=run,
                ms=samples.ms,
                sm_mhz=samples.sm_mhz,
                power_w=samples.power_w,
                throttled=samples.throttled,
                inner=samples.inner,
                timing_mode=samples.timing_mode,
                kernel_source=prepared.kernel_source,
                copies=prepared.copies,
            )
        except Interrupted:
            raise
        except Exception as exc:
            return record_from_exception(
                exc,
                task_id=f"{case.key}#run{run}",
                case_key=case.key,
                op=case.op,
                params=case.params,
                dtype=case.dtype,
                worker="main",
                device=self.cfg.device,
                run_index=run,
            )

    def record(self, outcome: RunResult | FailureRecord) -> None:
        if isinstance(outcome, RunResult):
            self.state.runs.setdefault(outcome.case_key, []).append(outcome)
            self.checkpoint.append("run", outcome.to_json())
        else:
            self.state.failures.append(outcome)
            self.checkpoint.append("failure", outcome.to_json())
            if poisons_context(outcome.classification) and self.cfg.device != "cpu":
                # In-process collection cannot replace its CUDA context: stop, keep what we have.
                raise Interrupted(f"CUDA context poisoned by {outcome.case_key}")

    def run_round(self, run: int, progress: Progress | None = None, task: Any = None) -> None:
        for case in self.pending(run):
            outcome = self.measure(case, run)
            self.record(outcome)
            if progress is not None:
                advance = 1 if isinstance(outcome, RunResult) else self.cfg.protocol.runs - run
                progress.update(task, advance=advance, failures=len(self.state.failures))
            self._write_partial()

    def _write_partial(self, force: bool = False) -> None:
        if force or time.monotonic() - self._last_partial > PARTIAL_EVERY_S:
            finalize(self.out, self.meta, list(self.plan.cases), self.state, "partial")
            self._last_partial = time.monotonic()

    def finish(self, status: str) -> Path:
        self.checkpoint.close()
        self.meta["finished_at"] = _now()
        return finalize(self.out, self.meta, list(self.plan.cases), self.state, status)


def _device_index(device: str) -> int:
    _, _, idx = device.partition(":")
    return int(idx) if idx.isdigit() else 0


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
    collection = Collection(cfg)
    console = Console(stderr=True, quiet=cfg.quiet)
    status = "partial"
    with _stop_on_signals(), progress_bar(console) as progress:
        task = progress.add_task(
            f"{cfg.backend} {','.join(cfg.ops)} on {cfg.device}",
            total=collection.total_tasks,
            completed=collection.done_tasks(),
            failures=len(collection.state.failures),
        )
        try:
            for run in range(cfg.protocol.runs):
                collection.run_round(run, progress, task)
            status = "complete"
        except Interrupted as why:
            console.print(f"stopped ({why}); the record is marked partial")
        finally:
            path = collection.finish(status)
    ok = len([k for k in collection.state.runs if k not in collection.state.failed_keys])
    console.print(
        f"{status}: {ok} cases with rows, {len(collection.state.failures)} failed, "
        f"of {len(collection.plan.cases)} planned -> {path.parent}"
    )
    return path
