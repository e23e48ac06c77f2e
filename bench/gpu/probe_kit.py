"""What the H200 noise probes share: their command line, their cases, and run spreads."""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collector.caseplan import Case, build_plan

DEVICE = "cuda:0"


def probe_args(runs: int) -> argparse.Namespace:
    """`--runs` (per variant and case) and `--out` (the JSON record, rewritten per case)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--out", type=Path)
    return parser.parse_args()


def cases_by_key(keys: Sequence[str], ops: tuple[str, ...] = ("gemm",)) -> list[Case]:
    """The named cases of the default case set, in the given order."""
    by_key = {c.key: c for c in build_plan(ops, case_set="default").cases}
    return [by_key[k] for k in keys if k in by_key]


def l2_bytes() -> int:
    import torch

    return int(torch.cuda.get_device_properties(0).L2_cache_size)


def run_spread(medians: Sequence[float]) -> dict[str, float]:
    """Median of the run medians, their max/min spread and their sd, both in % of it."""
    centre = statistics.median(medians)
    return {
        "median_us": round(centre, 3),
        "spread_pct": round((max(medians) / min(medians) - 1) * 100, 2),
        "run_sd_pct": round(statistics.stdev(medians) / centre * 100, 2),
    }


def summarise(runs: dict[str, list[list[float]]]) -> dict[str, dict[str, Any]]:
    """Per variant: its run medians (from each run's samples, us) and their spread."""
    out: dict[str, dict[str, Any]] = {}
    for name, samples in runs.items():
        medians = [statistics.median(r) for r in samples]
        out[name] = {"run_medians_us": [round(m, 3) for m in medians], **run_spread(medians)}
    return out


def save(report: list[dict[str, Any]], out: Path | None) -> None:
    """Written after every case: a probe cut short keeps what it measured."""
    if out:
        out.write_text(json.dumps(report, indent=1))
