"""Per-case statistics from raw samples: the numbers a perf row carries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from collector.timing import RunSamples

# Share of a case's pooled samples cut from each end before averaging: its latency. The
# samples of memory-sensitive GEMMs sit on two levels a few % apart; a median lands on
# either or in the gap as the mix shifts, a trimmed mean moves with the mix smoothly
# (docs/statistics.md).
LATENCY_TRIM = 0.1

# Scale that makes the median absolute deviation estimate a normal distribution's sigma.
MAD_TO_SIGMA = 1.4826


@dataclass(kw_only=True)
class RunResult(RunSamples):
    """One run of one case, as the engine checkpoints it: the run's samples and what was seen
    taking them (every `RunSamples` field), which case and run, and where it was measured."""

    case_key: str
    run: int
    kernel_source: str
    copies: int
    # Times this run was redone because the GPU throttled while it was measured.
    redos: int = 0
    # Wall time the run held its device, set-up and idle gaps included (the cost of a case).
    wall_s: float = 0.0
    # The worker process that took it: its name and pid (name@pid).
    worker: str = ""
    # The device that measured it: index in the collection, UUID (a CPU's stand-in
    # identity on a CPU) and name; every run of a case has the same (docs/fleet.md).
    device_index: int | None = None
    device_uuid: str = ""
    device_name: str = ""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunResult:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def trimmed_mean(values: np.ndarray, trim: float = LATENCY_TRIM) -> float:
    """Mean of the sorted values with int(trim * n) cut from each end (scipy's trim_mean)."""
    n = values.size
    cut = int(trim * n)
    return float(np.mean(np.sort(values)[cut : n - cut]))


def robust_cv(values: np.ndarray) -> float:
    med = float(np.median(values))
    if med <= 0 or values.size < 2:
        return 0.0
    return float(MAD_TO_SIGMA * np.median(np.abs(values - med)) / med)


def summarise(runs: list[RunResult]) -> dict[str, Any]:
    """Latency is the 10% trimmed mean of all samples over every run (the comparison's
    estimate too): robust to outlying samples, it uses every sample, and it follows a
    bimodal case's mix of levels smoothly where a median jumps between them."""
    all_ms = np.concatenate([np.asarray(r.ms, dtype=float) for r in runs])
    run_medians = np.array([np.median(r.ms) for r in runs], dtype=float)
    clocks = [c for r in runs for c in r.sm_mhz if c is not None]
    kernels = sorted({r.kernel_source for r in runs})
    return {
        "latency": trimmed_mean(all_ms),
        "p10": float(np.percentile(all_ms, 10)),
        "p90": float(np.percentile(all_ms, 90)),
        "robust_cv": robust_cv(all_ms),
        "run_cv": robust_cv(run_medians) if run_medians.size > 2 else _plain_cv(run_medians),
        "runs": len(runs),
        "samples": int(all_ms.size),
        "inner": int(max(r.inner for r in runs)),
        "copies": int(max(r.copies for r in runs)),
        "timing_mode": ",".join(sorted({r.timing_mode for r in runs})),
        "sm_mhz_mean": float(np.mean(clocks)) if clocks else None,
        "throttled": any(t for r in runs for t in r.throttled),
        "redos": int(sum(r.redos for r in runs)),
        "retakes": int(sum(r.retakes for r in runs)),
        "placements": int(max(r.placements for r in runs)),
        # Worker processes the runs came from (fresh workers: one per round; 0: unknown).
        "processes": len({r.worker for r in runs if r.worker}),
        "device_seconds": float(sum(r.wall_s for r in runs)),
        "kernel_source": kernels[0] if len(kernels) == 1 else "|".join(kernels),
        **measuring_device(runs),
    }


def measuring_device(runs: list[RunResult]) -> dict[str, Any]:
    """The device that took a case's runs (several joined by '|', which the comparison
    treats as unknown; none recorded: nulls, as in records before docs/fleet.md)."""
    uuids = sorted({r.device_uuid for r in runs if r.device_uuid})
    names = sorted({r.device_name for r in runs if r.device_name})
    indices = sorted({r.device_index for r in runs if r.device_index is not None})
    return {
        "gpu_index": indices[0] if len(indices) == 1 else None,
        "gpu_uuid": "|".join(uuids) or None,
        "gpu_name": "|".join(names) or None,
    }


def _plain_cv(values: np.ndarray) -> float:
    if values.size < 2 or float(np.mean(values)) <= 0:
        return 0.0
    return float(np.std(values, ddof=1) / np.mean(values))
