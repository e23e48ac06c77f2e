"""The HTML report for the artifacts: sortable tables and plots, one self-contained file.

No CDN, no fetch: CSS, JS and SVG are inline, so the report opens offline and from an
artifact store. Everything from runs goes through Jinja's HTML autoescape (and
`markupsafe.escape` inside the SVG built here); the only script is ours.
"""

from __future__ import annotations

import math
from typing import Any

import jinja2
from markupsafe import Markup, escape

from bot import __version__
from bot.render.comment import ICONS, case_label, fmt_change, fmt_ms, side_gpus, verdict_word

VERDICT_COLORS = {
    "regressed": "#d1242f",
    "improved": "#1a7f37",
    "same": "#8c959f",
    "inconclusive": "#bf8700",
}
# What the provenance table calls each run.json key.
PROVENANCE_NAMES = {
    "run_id": "run id",
    "status": "status",
    "git_sha": "git SHA",
    "backend": "backend",
    "framework": "framework",
    "framework_version": "framework version",
    "plan_hash": "plan hash",
    "case_set": "case set",
    "collector_hash": "collector hash",
    "started_at": "started",
    "finished_at": "finished",
}
MAX_TABLE_ROWS = 20000
MAX_POINTS = 4000


def html_environment(package: str = "bot.render") -> jinja2.Environment:
    """Jinja for HTML pages from `package`'s templates: autoescaped, strict about names."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader(package, "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )


def _pct(ratio: float) -> float:
    return (ratio - 1.0) * 100.0


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and math.isfinite(v)


def nice_ticks(lo: float, hi: float, most: int = 7) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten apart) inside [lo, hi]."""
    span = max(hi - lo, 1e-9)
    raw = span / max(1, most - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def histogram_svg(cases: list[dict[str, Any]], width: int = 1200, height: int = 260) -> Markup:
    """Cases by latency change, each bar stacked by verdict (an unchanged case is grey
    whatever its sign); integer count ticks."""
    rows = sorted(
        ((_pct(c["ratio"]), str(c.get("verdict", ""))) for c in cases if _finite(c.get("ratio"))),
        key=lambda r: r[0],
    )
    if not rows:
        return Markup("<p>No latency ratios to plot.</p>")
    lo_i, hi_i = int(0.01 * (len(rows) - 1)), int(0.99 * (len(rows) - 1))
    lo, hi = min(rows[lo_i][0], -1.0), max(rows[hi_i][0], 1.0)
    bins = 40
    step = (hi - lo) / bins
    counts: list[dict[str, int]] = [{} for _ in range(bins)]
    for v, verdict in rows:
        b = counts[min(bins - 1, max(0, int((v - lo) / step)))]
        b[verdict] = b.get(verdict, 0) + 1
    top = max(sum(b.values()) for b in counts)
    pad_l, pad_b, pad_t = 44, 30, 34  # the legend sits above the bars
    w, h = width - pad_l - 10, height - pad_b - pad_t
    parts = [
        f'<svg class="plot" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'role="img" '
        'aria-label="Histogram of latency changes, coloured by verdict">'
    ]
    for i, b in enumerate(counts):
        x = pad_l + w * i / bins
        left = lo + i * step
        y = float(pad_t + h)
        for verdict in ("same", "inconclusive", "improved", "regressed"):
            n = b.get(verdict, 0)
            if not n:
                continue
            bh = h * n / top
            y -= bh
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{w / bins - 1:.1f}" height="{bh:.1f}" '
                f'fill="{VERDICT_COLORS.get(verdict, "#57606a")}"><title>{left:+.1f}%..'
                f"{left + step:+.1f}%: {n} {escape(verdict_word(verdict))}</title></rect>"
            )
    zero = pad_l + w * (0 - lo) / (hi - lo)
    parts.append(
        f'<line x1="{zero:.1f}" x2="{zero:.1f}" y1="{pad_t}" y2="{pad_t + h}" stroke="#333" '
        'stroke-dasharray="3,3"/>'
    )
    for v in nice_ticks(lo, hi, 9):
        parts.append(
            f'<text x="{pad_l + w * (v - lo) / (hi - lo):.1f}" y="{height - 8}" '
            f'text-anchor="middle">{_tick(v)}</text>'
        )
    for n in sorted({int(t) for t in nice_ticks(0, top, 5) if float(t).is_integer()}):
        parts.append(
            f'<text x="{pad_l - 6}" y="{pad_t + h - h * n / top + 4:.1f}" '
            f'text-anchor="end">{n}</text>'
        )
    parts.append(_legend(pad_l + 8, 16))
    parts.append("</svg>")
    return Markup("".join(parts))


def _tick(v: float) -> str:
    return "0%" if abs(v) < 1e-9 else f"{v:+g}%"


def _legend(x: float, y: float) -> str:
    out = []
    for i, verdict in enumerate(("regressed", "improved", "inconclusive", "same")):
        cx = x + i * 110
        out.append(
            f'<rect x="{cx:.0f}" y="{y - 9:.0f}" width="10" height="10" '
            f'fill="{VERDICT_COLORS[verdict]}"/><text x="{cx + 14:.0f}" y="{y:.0f}">'
            f"{verdict_word(verdict)}</text>"
        )
    return "".join(out)


def forest_svg(cases: list[dict[str, Any]], top: int = 30, width: int = 1200) -> Markup:
    rows = [c for c in cases if _finite(c.get("ratio")) and c["ratio"] > 0]
    rows.sort(key=lambda c: -abs(math.log(c["ratio"])))
    rows = rows[:top]
    if not rows:
        return Markup("<p>No cases to plot.</p>")
    values = [_pct(c["ratio"]) for c in rows]
    values += [_pct(c[k]) for c in rows for k in ("lo", "hi") if _finite(c.get(k))]
    lo, hi = min(min(values), -1.0), max(max(values), 1.0)
    label_w, row_h = 420, 20
    plot_w = width - label_w - 30
    height = row_h * len(rows) + 34

    def x(v: float) -> float:
        return label_w + plot_w * (v - lo) / (hi - lo)

    parts = [
        f'<svg class="plot" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'role="img" '
        'aria-label="Largest changes with confidence intervals">'
    ]
    parts.append(
        f'<line x1="{x(0):.1f}" x2="{x(0):.1f}" y1="0" y2="{height - 20}" stroke="#333" '
        'stroke-dasharray="3,3"/>'
    )
    for i, c in enumerate(rows):
        y = 12 + i * row_h
        color = VERDICT_COLORS.get(c.get("verdict", ""), "#57606a")
        label = escape(case_label(c)[:60])
        parts.append(f'<text x="{label_w - 6}" y="{y + 4}" text-anchor="end">{label}</text>')
        if _finite(c.get("lo")) and _finite(c.get("hi")):
            parts.append(
                f'<line x1="{x(_pct(c["lo"])):.1f}" x2="{x(_pct(c["hi"])):.1f}" y1="{y}" '
                f'y2="{y}" stroke="{color}" stroke-width="2"/>'
            )
        parts.append(
            f'<circle cx="{x(_pct(c["ratio"])):.1f}" cy="{y}" r="4" fill="{color}">'
            f"<title>{label}: {escape(fmt_change(c['ratio']))} "
            f"({escape(verdict_word(str(c.get('verdict', ''))))})"
            "</title></circle>"
        )
    for v in nice_ticks(lo, hi, 8):
        parts.append(
            f'<text x="{x(v):.1f}" y="{height - 4}" text-anchor="middle">{_tick(v)}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def scatter_svg(cases: list[dict[str, Any]], width: int = 1200, height: int = 320) -> Markup:
    pts = [
        c
        for c in cases
        if _finite(c.get("ratio")) and _finite(c.get("base_ms")) and c["base_ms"] > 0
    ]
    if not pts:
        return Markup("<p>No cases to plot.</p>")
    if len(pts) > MAX_POINTS:
        pts.sort(key=lambda c: -abs(c["ratio"] - 1))
        pts = pts[: MAX_POINTS // 2] + pts[MAX_POINTS // 2 :: max(1, len(pts) // MAX_POINTS)]
    xs = [math.log10(c["base_ms"]) for c in pts]
    ys = [_pct(c["ratio"]) for c in pts]
    x0, x1 = min(xs), max(xs) + 1e-9
    y0, y1 = min(min(ys), -1.0), max(max(ys), 1.0)
    pad_l, pad_b = 50, 30
    w, h = width - pad_l - 10, height - pad_b - 10
    parts = [
        f'<svg class="plot" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'role="img" '
        'aria-label="Change against baseline latency">'
    ]
    zero = 10 + h * (y1 - 0) / (y1 - y0)
    parts.append(
        f'<line x1="{pad_l}" x2="{pad_l + w}" y1="{zero:.1f}" y2="{zero:.1f}" stroke="#333" '
        'stroke-dasharray="3,3"/>'
    )
    for c, xv, yv in zip(pts, xs, ys, strict=True):
        px = pad_l + w * (xv - x0) / (x1 - x0) if x1 > x0 else pad_l + w / 2
        py = 10 + h * (y1 - yv) / (y1 - y0)
        color = VERDICT_COLORS.get(c.get("verdict", ""), "#57606a")
        parts.append(
            f'<circle cx="{px:.1f}" cy="{py:.1f}" r="2.5" fill="{color}" fill-opacity="0.7">'
            f"<title>{escape(case_label(c)[:80])}: {escape(fmt_ms(c['base_ms']))}, "
            f"{escape(fmt_change(c['ratio']))}</title></circle>"
        )
    parts.append(
        f'<text x="{pad_l}" y="{height - 8}">{escape(fmt_ms(10**x0))}</text>'
        f'<text x="{pad_l + w}" y="{height - 8}" text-anchor="end">{escape(fmt_ms(10**x1))}'
        f" (baseline latency, log scale)</text>"
        f'<text x="4" y="18">{y1:+.0f}%</text><text x="4" y="{10 + h}">{y0:+.0f}%</text>'
    )
    parts.append("</svg>")
    return Markup("".join(parts))


def _num(v: Any) -> str:
    return f"{v:.9g}" if _finite(v) else ""


def _case_rows(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for c in cases[:MAX_TABLE_ROWS]:
        ratio = c.get("ratio")
        rows.append(
            {
                "label": case_label(c),
                "op": c.get("op", ""),
                "dtype": c.get("dtype", ""),
                "kernel": c.get("kernel_cand", ""),
                "base": fmt_ms(c.get("base_ms")),
                "base_v": _num(c.get("base_ms")),
                "cand": fmt_ms(c.get("cand_ms")),
                "cand_v": _num(c.get("cand_ms")),
                "change": fmt_change(ratio),
                "change_v": _num(ratio),
                "lo": fmt_change(c.get("lo")),
                "lo_v": _num(c.get("lo")),
                "hi": fmt_change(c.get("hi")),
                "hi_v": _num(c.get("hi")),
                "p": _num(c.get("q", c.get("p"))),
                "p_text": f"{c.get('q', c.get('p')):.2g}"
                if _finite(c.get("q", c.get("p")))
                else "–",
                "verdict": verdict_word(str(c.get("verdict", ""))),
                "verdict_class": c.get("verdict", ""),
                "confirmed": bool(c.get("confirmed")),
            }
        )
    return rows


def render_html_report(
    comparison: dict[str, Any], all_cases: list[dict[str, Any]] | None = None
) -> str:
    """The report; `all_cases` (from cases.parquet) when given, else the JSON's notable cases."""
    verdict = comparison["verdict"]
    cases = all_cases if all_cases is not None else comparison["latency"]["cases"]
    fg = comparison["failure_groups"]
    groups = (
        [{**g, "change": "new"} for g in fg.get("new", [])]
        + [{**g, "change": "persisting"} for g in fg.get("persisting", [])]
        + [{**g, "change": "resolved"} for g in fg.get("resolved", [])]
    )
    coverage = [
        {
            "op": op,
            **(row.get("cand") or {}),
            "status": row.get("status"),
            "missing": row.get("missing_count", 0),
        }
        for op, row in comparison["coverage"]["ops"].items()
    ]
    base, cand = comparison["baseline"], comparison["candidate"]
    prov_keys = (
        "run_id",
        "status",
        "git_sha",
        "backend",
        "framework",
        "framework_version",
        "plan_hash",
        "case_set",
        "collector_hash",
        "started_at",
        "finished_at",
    )
    provenance = (
        [{"name": PROVENANCE_NAMES[k], "base": base.get(k), "cand": cand.get(k)} for k in prov_keys]
        + [
            {
                "name": f"GPU {'UUID' if k == 'uuid' else k.upper() if k == 'cuda' else k}",
                "base": (base.get("device") or {}).get(k),
                "cand": (cand.get("device") or {}).get(k),
            }
            for k in ("name", "uuid", "driver", "cuda")
        ]
        + [
            dict(
                zip(
                    ("name", "base", "cand"),
                    ("measured on (GPUs)", *side_gpus(comparison)),
                    strict=True,
                )
            )
        ]
        + [
            {
                "name": f"{k} version",
                "base": (base.get("versions") or {}).get(k),
                "cand": (cand.get("versions") or {}).get(k),
            }
            for k in sorted(set(base.get("versions") or {}) | set(cand.get("versions") or {}))
        ]
    )
    return (
        html_environment()
        .get_template("report.html.j2")
        .render(
            mode="comparison",
            icon=ICONS.get(verdict["level"], ""),
            level=verdict["level"],
            headline=verdict["headline"],
            reasons=verdict.get("reasons", []),
            warnings=comparison.get("warnings", []),
            generated_at=comparison.get("generated_at", ""),
            cases=_case_rows(cases),
            cases_total=len(cases),
            groups=groups,
            coverage=coverage,
            coverage_findings=comparison["coverage"].get("findings", []),
            group_rows=comparison["latency"].get("groups", []),
            dispatch=comparison["latency"].get("dispatch_changes", []),
            provenance=provenance,
            histogram=histogram_svg(cases),
            forest=forest_svg(cases),
            scatter=scatter_svg(cases),
            fmt_change=fmt_change,
            version=__version__,
            colors=VERDICT_COLORS,
        )
    )


def render_run_html_report(info: Any) -> str:
    from bot.render.run_summary import run_verdict

    level, headline, reasons = run_verdict(info)
    meta = info.meta
    return (
        html_environment()
        .get_template("report.html.j2")
        .render(
            mode="run",
            icon=ICONS.get(level, ""),
            level=level,
            headline=headline,
            reasons=reasons,
            warnings=[],
            generated_at="",
            cases=[],
            cases_total=0,
            groups=[{**g, "change": "in this run"} for g in info.groups],
            coverage=[
                {"op": op, **row, "status": "", "missing": 0}
                for op, row in sorted(info.per_op.items())
            ],
            coverage_findings=[],
            group_rows=[],
            dispatch=[],
            provenance=[
                {"name": k, "base": None, "cand": meta.get(k)}
                for k in (
                    "run_id",
                    "status",
                    "git_sha",
                    "backend",
                    "framework",
                    "framework_version",
                    "started_at",
                    "finished_at",
                )
            ],
            histogram=None,
            forest=None,
            scatter=None,
            fmt_change=fmt_change,
            version=__version__,
            colors=VERDICT_COLORS,
            error=info.error,
            problem=info.problem,
            log_tail=info.log_tail,
        )
    )
