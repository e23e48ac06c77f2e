"""The calibration panel: fixed reference kernels measured on every device of a collection.

Two GPUs of one model differ by a size-dependent 0.1-2.8% (docs/fleet.md); the panel gives
each device's speed on known kernels, so a comparison across GPUs can measure that offset
instead of calling it a regression. The panel is declared here, in the bot's own code,
never read from a case file that a pull request could change, and it is measured with the
torch backend, without any canary, in the collection's own rounds (same clocks and heat as
the cases). Its result goes into run.json under "panel".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from collector.aggregate import RunResult, trimmed_mean
from collector.caseplan import Case
from collector.jsonfile import is_json_type

# Version of the definition below: panels of different versions are never compared.
PANEL_VERSION = "2026-12-01"
# Panel runs per kernel and device, one per round of the collection (the first rounds).
PANEL_RUNS = 5
# GPU panel: bf16 GEMMs about 10 us to 3 ms apart by a factor ~1.8 on an H200 (latencies of
# the H200 vLLM 0.24 reference table), and three fp8 ones; shapes of common projections.
GPU_PANEL: tuple[tuple[str, int, int, int], ...] = (
    ("bfloat16", 256, 4096, 2048),  # ~10 us
    ("bfloat16", 256, 4096, 4096),  # ~17 us
    ("bfloat16", 256, 4096, 8192),  # ~31 us
    ("bfloat16", 256, 4096, 16384),  # ~51 us
    ("bfloat16", 8192, 2048, 2048),  # ~92 us
    ("bfloat16", 2048, 16384, 2048),  # ~180 us
    ("bfloat16", 2048, 16384, 4096),  # ~330 us
    ("bfloat16", 16384, 4096, 4096),  # ~0.8 ms
    ("bfloat16", 16384, 8192, 4096),  # ~1.7 ms
    ("bfloat16", 16384, 16384, 4096),  # ~2.9 ms
    ("fp8", 512, 8192, 2048),  # ~20 us
    ("fp8", 8192, 4096, 2048),  # ~150 us
    ("fp8", 16384, 4096, 8192),  # ~1 ms
)
# CPU stand-in: tiny shapes, so the path runs for real in tests.
CPU_PANEL: tuple[tuple[str, int, int, int], ...] = (
    ("float32", 8, 256, 256),
    ("float32", 32, 256, 512),
    ("float32", 64, 512, 512),
    ("bfloat16", 64, 512, 512),
)


def panel_cases(device: str) -> list[Case]:
    shapes = GPU_PANEL if device.startswith("cuda") else CPU_PANEL
    return [Case.build("gemm", {"gemm_dtype": d, "m": m, "n": n, "k": k}) for d, m, n, k in shapes]


def panel_runs(protocol_runs: int) -> int:
    """Panel runs a collection takes: PANEL_RUNS, or fewer when it has fewer rounds."""
    return max(1, min(PANEL_RUNS, protocol_runs))


def summarise_panel(runs: Iterable[RunResult], planned_runs: int) -> dict[str, Any] | None:
    """run.json's "panel": per device UUID, each kernel's latency (the 10% trimmed mean of
    its pooled samples, as a case's) and its per-run trimmed means (for an uncertainty)."""
    by_device: dict[str, list[RunResult]] = {}
    for r in runs:
        by_device.setdefault(r.device_uuid or "unknown", []).append(r)
    if not by_device:
        return None
    devices: dict[str, Any] = {}
    total_s = 0.0
    for uuid, results in sorted(by_device.items()):
        kernels: dict[str, list[RunResult]] = {}
        for r in results:
            kernels.setdefault(r.case_key, []).append(r)
        rows = []
        for key, kruns in sorted(kernels.items()):
            kruns = sorted(kruns, key=lambda r: r.run)
            pooled = np.concatenate([np.asarray(r.ms, dtype=float) for r in kruns])
            rows.append(
                {
                    "key": key,
                    "latency_ms": trimmed_mean(pooled),
                    "run_ms": [trimmed_mean(np.asarray(r.ms, dtype=float)) for r in kruns],
                    "samples": int(pooled.size),
                }
            )
        seconds = float(sum(r.wall_s for r in results))
        total_s += seconds
        devices[uuid] = {
            "index": results[0].device_index,
            "name": results[0].device_name,
            "kernels": rows,
            "device_seconds": round(seconds, 3),
        }
    return {
        "version": PANEL_VERSION,
        "runs_planned": planned_runs,
        "devices": devices,
        "device_seconds": round(total_s, 3),
    }


def read_panel(panel: Any) -> dict[str, dict[str, tuple[float, list[float]]]]:
    """A record's panel as {uuid: {kernel key: (latency ms, per-run ms)}}, keeping only
    well-formed entries (run.json is written by the measured side: judge, never trust)."""
    out: dict[str, dict[str, tuple[float, list[float]]]] = {}
    if not isinstance(panel, dict) or panel.get("version") != PANEL_VERSION:
        return out
    devices = panel.get("devices")
    if not isinstance(devices, dict):
        return out
    for uuid, device in devices.items():
        rows = device.get("kernels") if isinstance(device, dict) else None
        if not isinstance(uuid, str) or not isinstance(rows, list):
            continue
        kernels: dict[str, tuple[float, list[float]]] = {}
        for row in rows:
            if not isinstance(row, dict) or not isinstance(row.get("key"), str):
                continue
            lat, run_ms = row.get("latency_ms"), row.get("run_ms")
            if not isinstance(lat, (int, float)) or not _positive(lat):
                continue
            values = [float(v) for v in run_ms if _positive(v)] if isinstance(run_ms, list) else []
            if values:
                kernels[row["key"]] = (float(lat), values)
        if kernels:
            out[uuid] = kernels
    return out


def _positive(value: Any) -> bool:
    return is_json_type(value, int, float) and math.isfinite(value) and value > 0
