"""Small inline SVG plots for the site: a trend with intervals, and a sparkline.

Pure functions of numbers and labels; every label is escaped here (`markupsafe.escape`), so
the result is safe to mark as Markup inside an autoescaped template.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

LINE = "#0969da"
STEP = "#d1242f"
FAIL = "#bf8700"


@dataclass(frozen=True)
class Point:
    """One x position: a value with an optional interval, or a failure, or nothing."""

    label: str  # tooltip text
    value: float = math.nan
    lo: float = math.nan
    hi: float = math.nan
    failed: bool = False


def _finite(*values: float) -> bool:
    return all(math.isfinite(v) for v in values)


def _bounds(points: Sequence[Point]) -> tuple[float, float]:
    values = [v for p in points for v in (p.value, p.lo, p.hi) if math.isfinite(v)]
    if not values:
        return 0.0, 1.0
    lo, hi = min(values), max(values)
    if hi <= lo:
        pad = abs(lo) * 0.01 or 1.0
        return lo - pad, hi + pad
    pad = (hi - lo) * 0.08
    return lo - pad, hi + pad


def tick(value: float, span: float) -> str:
    """A tick label with as many decimals as the axis' span needs (0 to 4)."""
    decimals = 0 if span <= 0 else min(4, max(0, 2 - math.floor(math.log10(span))))
    return f"{value:.{decimals}f}"


def trend_svg(
    points: Sequence[Point],
    *,
    steps: Sequence[int] = (),
    unit: str = "",
    title: str = "",
    width: int = 720,
    height: int = 240,
) -> Markup:
    """Points left to right with their intervals, a line through them, failures as crosses
    at the bottom and dashed verticals before each index in `steps`."""
    n = len(points)
    pad_l, pad_r, pad_t, pad_b = 64, 12, 12, 28
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    y0, y1 = _bounds(points)

    def x(i: float) -> float:
        return pad_l + (w * (i + 0.5) / n if n else w / 2)

    def y(v: float) -> float:
        return pad_t + h * (y1 - v) / (y1 - y0)

    parts = [
        f'<svg class="plot" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}">'
    ]
    parts.append(
        f'<rect x="{pad_l}" y="{pad_t}" width="{w}" height="{h}" fill="none" stroke="#d0d7de"/>'
    )
    for frac in (0.0, 0.5, 1.0):
        v = y1 - (y1 - y0) * frac
        parts.append(
            f'<text x="{pad_l - 6}" y="{pad_t + h * frac + 4:.1f}" text-anchor="end">'
            f"{escape(tick(v, y1 - y0) + unit)}</text>"
        )
    for i in steps:
        if 0 < i < n:
            xs = (x(i - 1) + x(i)) / 2
            parts.append(
                f'<line class="step" x1="{xs:.1f}" x2="{xs:.1f}" y1="{pad_t}" y2="{pad_t + h}" '
                f'stroke="{STEP}" stroke-dasharray="4,3"/>'
            )
    line = [f"{x(i):.1f},{y(p.value):.1f}" for i, p in enumerate(points) if _finite(p.value)]
    if len(line) > 1:
        parts.append(
            f'<polyline points="{" ".join(line)}" fill="none" stroke="{LINE}" '
            'stroke-opacity="0.5"/>'
        )
    for i, p in enumerate(points):
        tip = f"<title>{escape(p.label)}</title>"
        if p.failed and not _finite(p.value):
            cx, cy = x(i), pad_t + h - 6
            parts.append(
                f'<g class="fail"><path d="M{cx - 4:.1f},{cy - 4:.1f}L{cx + 4:.1f},{cy + 4:.1f}'
                f'M{cx - 4:.1f},{cy + 4:.1f}L{cx + 4:.1f},{cy - 4:.1f}" stroke="{FAIL}" '
                f'stroke-width="2"/>{tip}</g>'
            )
            continue
        if not _finite(p.value):
            continue
        if _finite(p.lo, p.hi):
            parts.append(
                f'<line class="ci" x1="{x(i):.1f}" x2="{x(i):.1f}" y1="{y(p.lo):.1f}" '
                f'y2="{y(p.hi):.1f}" stroke="{LINE}" stroke-width="2"/>'
            )
        parts.append(
            f'<circle class="pt" cx="{x(i):.1f}" cy="{y(p.value):.1f}" r="3.5" '
            f'fill="{FAIL if p.failed else LINE}">{tip}</circle>'
        )
    if n:
        for i in sorted({0, n // 2, n - 1}):
            parts.append(
                f'<text x="{x(i):.1f}" y="{height - 8}" text-anchor="middle">{i + 1}</text>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))


def sparkline_svg(
    values: Sequence[float],
    failed: Sequence[bool] = (),
    width: int = 120,
    height: int = 22,
    min_span: float = 0.02,
) -> Markup:
    """A line over the finite values, ticks at failures; no labels. The vertical scale spans
    at least `min_span` of the values' level, so small noise stays flat."""
    n = len(values)
    finite = [v for v in values if math.isfinite(v)]
    parts = [
        f'<svg class="spark" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" aria-hidden="true">'
    ]
    if finite and n:
        lo, hi = min(finite), max(finite)
        mid = (lo + hi) / 2
        span = max(hi - lo, min_span * abs(mid)) or 1.0
        hi = mid + span / 2

        def x(i: int) -> float:
            return 2 + (width - 4) * (i / (n - 1) if n > 1 else 0.5)

        pts = [
            f"{x(i):.1f},{2 + (height - 4) * (hi - v) / span:.1f}"
            for i, v in enumerate(values)
            if math.isfinite(v)
        ]
        parts.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke="{LINE}"/>')
        for i, bad in enumerate(failed):
            if bad:
                parts.append(
                    f'<line x1="{x(i):.1f}" x2="{x(i):.1f}" y1="{height - 6}" y2="{height}" '
                    f'stroke="{FAIL}" stroke-width="2"/>'
                )
    parts.append("</svg>")
    return Markup("".join(parts))
