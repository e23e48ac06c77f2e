"""Cases whose two sides were measured on different GPUs (docs/fleet.md).

Per case: the GPU (UUID) that measured each side, from the perf rows (records before
per-row devices: the record's device). Same GPU: the usual verdict. Different GPUs with a
calibration panel on both: the case's ratio is divided by the GPUs' offset at its latency
(bot/compare/gpu_offset.py) and its interval widened by the offset's uncertainty (combined
in log space), so a verdict needs a change beyond the offset. Different GPUs without
panels: never regressed, improved or same; the case is inconclusive and the comparison says
that it crossed GPUs uncalibrated. Unknown on a side (old records): the usual verdict, with
the record-level warning.
"""

from __future__ import annotations

import math
from collections import Counter
from statistics import NormalDist
from typing import Any

import numpy as np
import pyarrow as pa

from bot.compare import stats
from bot.compare.gpu_offset import OffsetFit, fit_offset
from collector.panel import read_panel
from collector.record import RunRecord

SAME, CALIBRATED, UNCALIBRATED, UNKNOWN = "same", "calibrated", "uncalibrated", "unknown"
MATCHES = (SAME, CALIBRATED, UNCALIBRATED, UNKNOWN)
# The comparison's mode, as the headline states it.
MODE_SAME, MODE_CALIBRATED, MODE_UNCALIBRATED, MODE_UNKNOWN = (
    "same-gpu",
    "cross-gpu-calibrated",
    "cross-gpu-uncalibrated",
    "unknown",
)


def record_uuid(record: RunRecord) -> str | None:
    uuid = (record.meta.get("device") or {}).get("uuid")
    return str(uuid) if uuid else None


def case_gpus(record: RunRecord, rows: pa.Table) -> list[str | None]:
    """The measuring GPU of each row of `rows` (a perf table slice); several or none: the
    record's device when it names one, else None."""
    fallback = record_uuid(record)
    if "gpu_uuid" not in rows.column_names:
        return [fallback] * rows.num_rows
    out: list[str | None] = []
    for value in rows.column("gpu_uuid").to_pylist():
        out.append(str(value) if value and "|" not in str(value) else fallback)
    return out


def gpu_names(record: RunRecord) -> dict[str, str]:
    """UUID -> device name, from everything the record says about its devices."""
    names: dict[str, str] = {}
    device = record.meta.get("device") or {}
    for info in [device, *(device.get("devices") or [])]:
        if isinstance(info, dict) and info.get("uuid"):
            names[str(info["uuid"])] = str(info.get("name") or "")
    for table in record.perf.values():
        if {"gpu_uuid", "gpu_name"} <= set(table.column_names):
            pairs = table.select(["gpu_uuid", "gpu_name"]).group_by(["gpu_uuid", "gpu_name"])
            for row in pairs.aggregate([]).to_pylist():
                if row["gpu_uuid"] and row["gpu_name"]:
                    names.setdefault(str(row["gpu_uuid"]), str(row["gpu_name"]))
    return names


def pair_fits(
    base: RunRecord, cand: RunRecord, base_gpu: np.ndarray, cand_gpu: np.ndarray
) -> tuple[np.ndarray, dict[tuple[str, str], OffsetFit | None]]:
    """Each case's match (MATCHES) and the offset fit of every cross-GPU pair."""
    b_panel, c_panel = read_panel(base.meta.get("panel")), read_panel(cand.meta.get("panel"))
    fits: dict[tuple[str, str], OffsetFit | None] = {}
    match = np.empty(len(base_gpu), dtype=object)
    for i, (b, c) in enumerate(zip(base_gpu, cand_gpu, strict=True)):
        if not b or not c:
            match[i] = UNKNOWN
        elif b == c:
            match[i] = SAME
        else:
            if (b, c) not in fits:
                bp, cp = b_panel.get(b), c_panel.get(c)
                fits[(b, c)] = fit_offset(bp, cp) if bp and cp else None
            match[i] = CALIBRATED if fits[(b, c)] is not None else UNCALIBRATED
    return match, fits


def apply_offsets(
    cols: dict[str, np.ndarray],
    fits: dict[tuple[str, str], OffsetFit | None],
    run_values: dict[int, tuple[np.ndarray, np.ndarray]],
    settings: stats.Settings,
) -> None:
    """Divide each calibrated case's ratio by its offset and widen its interval; p is the
    larger of the run test on offset-corrected run values (each run's trimmed mean,
    `stats.run_values`) and a normal test that counts the offset's uncertainty (where a case
    has runs)."""
    z = NormalDist().inv_cdf(1.0 - (1.0 - settings.confidence) / 2.0)
    n = len(cols["key"])
    cols["offset"] = np.full(n, np.nan)
    cols["offset_sd"] = np.full(n, np.nan)
    cols["raw_ratio"] = cols["ratio"].copy()
    for (b, c), fit in fits.items():
        if fit is None:
            continue
        rows = np.flatnonzero(
            (cols["gpu_match"] == CALIBRATED) & (cols["base_gpu"] == b) & (cols["cand_gpu"] == c)
        )
        if not rows.size:
            continue
        mean, sd = fit.predict(cols["base_ms"][rows])
        cols["offset"][rows] = np.exp(mean)
        cols["offset_sd"][rows] = sd
        with np.errstate(divide="ignore", invalid="ignore"):
            log_r = np.log(cols["ratio"][rows])
            below = log_r - np.log(cols["lo"][rows])
            above = np.log(cols["hi"][rows]) - log_r
        corrected = log_r - mean
        cols["ratio"][rows] = np.exp(corrected)
        cols["lo"][rows] = np.exp(corrected - np.hypot(below, z * sd))
        cols["hi"][rows] = np.exp(corrected + np.hypot(above, z * sd))
        for j, i in enumerate(rows):
            if int(i) not in run_values:
                continue
            bm, cm = run_values[int(i)]
            welch = stats.run_test_pvalues([(bm, cm / math.exp(mean[j]))])[0]
            half = max(below[j], above[j]) / z if np.isfinite(below[j]) else 0.0
            total = math.hypot(half, sd[j])
            normal = 2.0 * (1.0 - NormalDist().cdf(abs(corrected[j]) / total)) if total else 1.0
            cols["p"][i] = max(float(welch) if np.isfinite(welch) else 1.0, normal)


def gpu_section(
    cols: dict[str, np.ndarray],
    fits: dict[tuple[str, str], OffsetFit | None],
    base: RunRecord,
    cand: RunRecord,
) -> dict[str, Any]:
    """comparison.json's latency.gpu: the mode, cases per match, and each GPU pair."""
    counts = Counter(str(m) for m in cols["gpu_match"])
    names = {**gpu_names(base), **gpu_names(cand)}
    if counts[UNCALIBRATED]:
        mode = MODE_UNCALIBRATED
    elif counts[CALIBRATED]:
        mode = MODE_CALIBRATED
    elif counts[SAME]:
        mode = MODE_SAME
    else:
        mode = MODE_UNKNOWN
    pairs = []
    for (b, c), fit in sorted(fits.items()):
        rows = (cols["base_gpu"] == b) & (cols["cand_gpu"] == c)
        pair: dict[str, Any] = {
            "base": {"uuid": b, "name": names.get(b)},
            "cand": {"uuid": c, "name": names.get(c)},
            "cases": int(np.count_nonzero(rows)),
            "calibrated": fit is not None,
        }
        if fit is not None:
            pair["fit"] = fit.to_json(cols["base_ms"][rows & np.isfinite(cols["base_ms"])])
        pairs.append(pair)
    same = sorted({str(b) for b in cols["base_gpu"][cols["gpu_match"] == SAME]})
    ranges = [p["fit"]["offset_range"] for p in pairs if "offset_range" in p.get("fit", {})]
    return {
        "mode": mode,
        "cases": {m: int(counts[m]) for m in MATCHES},
        "same_gpus": [{"uuid": u, "name": names.get(u)} for u in same],
        "pairs": pairs,
        "offset_range": [min(r[0] for r in ranges), max(r[1] for r in ranges)] if ranges else None,
    }
