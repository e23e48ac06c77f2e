"""A text sparkline: one character per point, for tables and comments."""

from __future__ import annotations

import math

import numpy as np

BARS = "▁▂▃▄▅▆▇█"
# A sparkline spans at least this share of the case's level, so that noise well below the
# smallest change worth a verdict stays flat instead of filling every bar.
MIN_SPAN = 0.02


def sparkline(values: np.ndarray, failed: list[bool]) -> str:
    """One character per run: a bar by level, a cross for a failure, a space for no point."""
    finite = values[np.isfinite(values)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    mid, span = (lo + hi) / 2, max(hi - lo, MIN_SPAN * abs(lo + hi) / 2)
    lo, hi = mid - span / 2, mid + span / 2
    out = []
    for value, fail in zip(values, failed, strict=True):
        if fail:
            out.append("×")
        elif not math.isfinite(value):
            out.append(" ")
        elif hi <= lo:
            out.append(BARS[len(BARS) // 2])
        else:
            out.append(BARS[min(len(BARS) - 1, int((value - lo) / (hi - lo) * len(BARS)))])
    return "".join(out)
