"""The speed offset between two GPUs, measured by their calibration panels (docs/fleet.md).

Two GPUs of one model time the same kernels up to ~3% apart, and the gap grows with kernel
size. Each side's record carries the panel (collector/panel.py) measured on its GPU in the
same collection; per panel kernel, log(cand / base) is one reading of the offset at that
kernel's latency. A weighted polynomial in log latency (quadratic from 8 kernels, linear
from 4) is fitted through them, weights 1/(sampling variance + scatter), where the scatter
(tau^2, estimated by moments) is how far single kernels sit off the curve: a case's own
offset differs from the curve by as much. The offset at a case's latency comes with an sd
that adds the fit's own uncertainty and that scatter; outside the panel's latencies the
curve is held flat at its edge.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

# Fewer common panel kernels than this: no calibration (the comparison says so).
MIN_KERNELS = 4
# Kernels for the quadratic term (fewer: a line in log latency).
QUADRATIC_FROM = 8
# A kernel measured in one run only has no spread of its own: this sd of log(latency) instead.
SINGLE_RUN_SD = 0.01
# The offset's sd is never below this: panel kernels are not the PR's cases, and a dozen
# kernels estimate the scatter loosely (the H200s' size classes were ~0.3% wide).
MIN_OFFSET_SD = 0.002

Panel = dict[str, tuple[float, list[float]]]


@dataclass(frozen=True)
class OffsetFit:
    """log(cand GPU / base GPU speed ratio) as a polynomial in x = ln(latency in ms)."""

    coef: np.ndarray  # lowest power first
    cov: np.ndarray
    tau: float  # per-kernel scatter around the curve (sd of log ratio)
    x_min: float
    x_max: float
    kernels: list[dict[str, float | str]]

    def predict(self, latency_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(log offset, its sd) at each latency."""
        with np.errstate(divide="ignore", invalid="ignore"):
            x = np.log(np.asarray(latency_ms, dtype=float))
        x = np.clip(np.where(np.isfinite(x), x, self.x_min), self.x_min, self.x_max)
        design = np.vander(x, len(self.coef), increasing=True)
        mean = design @ self.coef
        var = np.einsum("ij,jk,ik->i", design, self.cov, design) + self.tau**2
        return mean, np.maximum(np.sqrt(np.maximum(var, 0.0)), MIN_OFFSET_SD)

    def to_json(self, latencies_ms: np.ndarray | None = None) -> dict[str, Any]:
        """The fit as comparison.json keeps it; with the cases' latencies, the range of the
        offset over them (the headline's 'GPUs differ by ... by size')."""
        grid = np.exp(np.linspace(self.x_min, self.x_max, 5))
        mean, sd = self.predict(grid)
        out: dict[str, Any] = {
            "degree": len(self.coef) - 1,
            "coef": [float(c) for c in self.coef],
            "scatter": float(self.tau),
            "kernels": self.kernels,
            "latency_range_ms": [float(math.exp(self.x_min)), float(math.exp(self.x_max))],
            "curve": [
                {"latency_ms": float(g), "offset": float(math.exp(m)), "sd": float(s)}
                for g, m, s in zip(grid, mean, sd, strict=True)
            ],
        }
        if latencies_ms is not None and np.size(latencies_ms):
            at, _ = self.predict(latencies_ms)
            out["offset_range"] = [float(np.exp(at.min())), float(np.exp(at.max()))]
        return out


def _log_spread(run_ms: list[float]) -> tuple[float, int]:
    logs = np.log(np.asarray(run_ms, dtype=float))
    if logs.size < 2:
        return SINGLE_RUN_SD**2, 1
    return float(np.var(logs, ddof=1)), int(logs.size)


def _wls(x: np.ndarray, y: np.ndarray, w: np.ndarray, degree: int) -> tuple[np.ndarray, np.ndarray]:
    design = np.vander(x, degree + 1, increasing=True)
    info = design.T @ (design * w[:, None])
    cov = np.linalg.pinv(info)
    coef = cov @ (design.T @ (w * y))
    return coef, cov


def fit_offset(base: Panel, cand: Panel) -> OffsetFit | None:
    """The offset curve from two panels (one device each), or None with too few kernels."""
    keys = sorted(set(base) & set(cand))
    if len(keys) < MIN_KERNELS:
        return None
    x: list[float] = []
    y: list[float] = []
    se2: list[float] = []
    rows: list[dict[str, float | str]] = []
    for key in keys:
        (lb, rb), (lc, rc) = base[key], cand[key]
        vb, nb = _log_spread(rb)
        vc, nc = _log_spread(rc)
        x.append(math.log(math.sqrt(lb * lc)))
        y.append(math.log(lc / lb))
        se2.append(vb / nb + vc / nc)
        rows.append({"key": key, "base_ms": lb, "cand_ms": lc, "ratio": lc / lb})
    xa, ya, s2 = np.array(x), np.array(y), np.maximum(np.array(se2), 1e-12)
    degree = 2 if len(keys) >= QUADRATIC_FROM else 1
    if np.ptp(xa) < 0.5:  # the kernels barely differ in size: a constant
        degree = 0
    dof = max(1, len(keys) - (degree + 1))
    tau2 = 0.0
    for _ in range(50):  # fixed point of the moment estimator of the scatter
        coef, cov = _wls(xa, ya, 1.0 / (s2 + tau2), degree)
        resid = ya - np.vander(xa, degree + 1, increasing=True) @ coef
        new = max(0.0, float(np.sum(resid**2) / dof - np.mean(s2)))
        if abs(new - tau2) < 1e-10:
            break
        tau2 = new
    coef, cov = _wls(xa, ya, 1.0 / (s2 + tau2), degree)
    for row, r in zip(rows, resid, strict=True):
        row["residual"] = float(r)
    return OffsetFit(coef, cov, math.sqrt(tau2), float(xa.min()), float(xa.max()), rows)
