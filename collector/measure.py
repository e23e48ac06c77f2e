"""Measure one run of one case: prepare, time, and turn any exception into a failure record.

Shared by the in-process path and the worker processes, so both behave identically.
"""

from __future__ import annotations

import dataclasses
import os
import random
import time
from dataclasses import dataclass, field, replace
from typing import Any

from collector.aggregate import RunResult
from collector.backends import Backend
from collector.backends.base import Prepared
from collector.canary import Canary
from collector.caseplan import Case
from collector.device import ClockReader
from collector.failures import FailureRecord, record_from_exception
from collector.timing import Protocol, RunSamples, measure_cpu, measure_cuda


@dataclass
class MeasureContext:
    backend: Backend
    device: str
    protocol: Protocol
    l2_bytes: int
    clocks: ClockReader
    canary: Canary | None = None
    worker: str = "main"
    # The measuring device's identity, written into every run (docs/fleet.md).
    device_index: int | None = None
    device_uuid: str = ""
    device_name: str = ""
    # The fastest SM clock measured for each case in this process: the reference of the
    # clock floor (timing.Protocol.clock_floor), per case because heavy kernels sustain
    # lower clocks than light ones.
    case_clocks: dict[str, float] = field(default_factory=dict)

    # The context panel kernels are measured in (collector/panel.py), made on first use.
    _panel: MeasureContext | None = field(default=None, repr=False)

    def panel_context(self) -> MeasureContext:
        """This device and protocol with the bot's torch backend and no canary: the panel
        measures the GPU, never the code under test or a deliberate slowdown."""
        if self._panel is None:
            from collector.backends.torch_backend import TorchBackend

            backend = self.backend if isinstance(self.backend, TorchBackend) else TorchBackend()
            self._panel = replace(self, backend=backend, canary=None, _panel=None)
        return self._panel

    def adopt_clock_reference(self, key: str, mhz: float | None) -> None:
        """Take the fastest clock of a case's runs in earlier processes as its reference."""
        if mhz:
            self.case_clocks[key] = max(self.case_clocks.get(key, 0.0), float(mhz))


def _spacer(ctx: MeasureContext, rng: random.Random) -> Any:
    """A random amount of device memory held while a buffer set is allocated, so that the
    set lands elsewhere than the previous run's: runs in one process otherwise reuse one
    layout, and a short kernel's speed follows its layout (docs/benchmarks.md)."""
    mib = rng.randrange(0, ctx.protocol.spacer_max_mib + 1, 2) if ctx.protocol.spacer_max_mib else 0
    if mib == 0 or not ctx.device.startswith("cuda"):
        return None
    import torch

    return torch.empty(mib << 20, dtype=torch.uint8, device=ctx.device)


def relocated(prepared: Prepared) -> Prepared | None:
    """Another buffer set moved from `prepared`'s (`Prepared.relocate`), or None where the op
    has no such move or it failed: the set is then prepared afresh, as before."""
    if prepared.relocate is None:
        return None
    try:
        return prepared.relocate()
    except Exception:  # the fresh `prepare` reports what is really wrong
        return None


def _measure_once(ctx: MeasureContext, case: Case) -> tuple[RunSamples, str, int]:
    if ctx.device.startswith("cuda"):
        import torch

        # Fresh allocations for every run: blocks recycled by the caching allocator made
        # small kernels' run-to-run spread larger on the H200 (docs/benchmarks.md).
        torch.cuda.empty_cache()
    rng = random.Random()  # noqa: S311 (placement, not secrecy)
    spacers = [_spacer(ctx, rng)]
    prepared = ctx.backend.prepare(case, ctx.device, ctx.l2_bytes)

    # A set's captured graph keeps its addresses, so later sets may move the op's tensors.
    graphed = ctx.device.startswith("cuda") and ctx.protocol.use_graphs and prepared.graphable
    latest = [prepared]

    def another_placement() -> Prepared:
        spacers.append(_spacer(ctx, rng))
        moved = relocated(latest[0]) if graphed else None
        latest[0] = moved or ctx.backend.prepare(case, ctx.device, ctx.l2_bytes)
        return latest[0]

    slowdown = ctx.canary.slowdown_for(case) if ctx.canary else None
    if ctx.device == "cpu":
        samples = measure_cpu(prepared, ctx.protocol, slowdown, another_placement)
    else:
        reference = ctx.case_clocks.get(case.key)
        samples = measure_cuda(
            prepared, ctx.protocol, ctx.clocks, slowdown, another_placement, reference
        )
        measured = [c for c in samples.clock_mhz if c is not None]
        if measured:
            ctx.case_clocks[case.key] = max([*measured, reference or 0.0])
    spacers.clear()  # the buffers of this run are freed with them, before the next run
    return samples, prepared.kernel_source, prepared.copies


def mostly_throttled(samples: RunSamples) -> bool:
    """Half or more of the run's samples throttled: its median is then a throttled sample.
    Fewer throttled samples leave the median among the others (they were retaken first)."""
    return 2 * sum(samples.throttled) >= max(1, len(samples.throttled))


def measure_case(ctx: MeasureContext, case: Case, run: int) -> RunResult | FailureRecord:
    """One run of one case. A run mostly throttled is redone after a cool-down (up to
    `protocol.max_redos` times): a throttled run measures the clock, not the kernel."""
    start = time.perf_counter()
    try:
        if ctx.canary is not None:
            ctx.canary.inject(case)
        samples, kernel, copies = _measure_once(ctx, case)
        redos = 0
        while mostly_throttled(samples) and redos < ctx.protocol.max_redos:
            redos += 1
            time.sleep(ctx.protocol.cooldown_s)
            samples, kernel, copies = _measure_once(ctx, case)
        return RunResult(
            case_key=case.key,
            run=run,
            # The samples and what was seen taking them: every RunSamples field, as it is.
            **{f.name: getattr(samples, f.name) for f in dataclasses.fields(samples)},
            kernel_source=kernel,
            copies=copies,
            redos=redos,
            wall_s=time.perf_counter() - start,
            # Names repeat across a resume; the pid tells the processes apart.
            worker=f"{ctx.worker}@{os.getpid()}",
            device_index=ctx.device_index,
            device_uuid=ctx.device_uuid,
            device_name=ctx.device_name,
        )
    except Exception as exc:
        return record_from_exception(
            exc,
            task_id=f"{case.key}#run{run}",
            case_key=case.key,
            op=case.op,
            params=case.params,
            dtype=case.dtype,
            worker=ctx.worker,
            device=ctx.device,
            run_index=run,
        )
