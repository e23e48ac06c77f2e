"""The HTML report for the artifacts: sortable tables and plots, one self-contained file.

No CDN, no fetch: CSS, JS and SVG are inline, so the report opens offline and from an
artifact store. Everything from runs goes through Jinja's HTML autoescape (and
`markupsafe.escape` inside the SVG built here); the only script is ours.
"""

from __future__ import annotations

import json
import math
from typing import Any

import jinja2
from markupsafe import Markup, escape

from bot import __version__
from bot.render.comment import (
    ICONS,
    baseline_words,
    case_label,
    decision_rule,
    fmt_change,
    fmt_ms,
    short_sha,
    side_gpus,
    verdict_word,
)
from bot.render.environment import template_environment

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
# Provenance rows that only a comparison's report shows (a failed run's page leaves them out).
_COMPARISON_ONLY_PROVENANCE = ("plan_hash", "case_set", "collector_hash")
MAX_TABLE_ROWS = 20000
# Changed cases written as table rows; past this many cases the table is paged from JSON.
MAX_SHOWN_ROWS = 300
# Rows the script adds to a long case table per "show more" (a table of thousands of rows
# takes a browser seconds to lay out).
PAGE_ROWS = 500
# Changed cases with their own marker and tooltip in the scatter plot.
MAX_MARKED = 400
# A histogram whose tallest bar holds more cases than this is drawn on a square-root scale.
ROOT_SCALE_ABOVE = 50
VERDICT_ORDER = {"regressed": 0, "improved": 1, "inconclusive": 2}


def html_environment(package: str = "bot.render") -> jinja2.Environment:
    """Jinja for HTML pages from `package`'s templates: autoescaped, strict about names."""
    return template_environment(package, autoescape=True)


def _pct(ratio: float) -> float:
    return (ratio - 1.0) * 100.0


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and math.isfinite(v)


def _tick_step(lo: float, hi: float, most: int) -> float:
    """1, 2 or 5 times a power of ten: the smallest such step giving at most `most` ticks."""
    raw = max(hi - lo, 1e-9) / max(1, most - 1)
    power = 10.0 ** math.floor(math.log10(raw))
    return float(next(m * power for m in (1, 2, 5, 10) if m * power >= raw))


def nice_ticks(lo: float, hi: float, most: int = 7) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten apart) inside [lo, hi]."""
    step = _tick_step(lo, hi, most)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def widen_to_ticks(lo: float, hi: float, most: int = 7) -> tuple[float, float]:
    """[lo, hi] widened to the nearest round ticks outside it, so every point has a tick
    beyond it (nice_ticks' step)."""
    step = _tick_step(lo, hi, most)
    return math.floor(lo / step) * step, math.ceil(hi / step) * step


def histogram_svg(cases: list[dict[str, Any]], width: int = 1200, height: int = 260) -> Markup:
    """Cases by latency change, each bar stacked by verdict (an unchanged case is grey
    whatever its sign); integer count ticks."""
    rows = sorted(
        ((_pct(c["ratio"]), str(c.get("verdict", ""))) for c in cases if _finite(c.get("ratio"))),
        key=lambda r: r[0],
    )
    if not rows:
        return Markup("<p>No latency ratios to plot.</p>")
    # The 1st to 99th percentile, widened to every changed case: a regression is never folded
    # into an edge bar labelled with a smaller change.
    lo_i, hi_i = int(0.01 * (len(rows) - 1)), int(0.99 * (len(rows) - 1))
    changed = [v for v, verdict in rows if verdict != "same"] or [0.0]
    lo = min(rows[lo_i][0], min(changed), -1.0)
    hi = max(rows[hi_i][0], max(changed), 1.0)
    bins = 40
    step = (hi - lo) / bins
    counts: list[dict[str, int]] = [{} for _ in range(bins)]
    for v, verdict in rows:
        b = counts[min(bins - 1, max(0, int((v - lo) / step)))]
        b[verdict] = b.get(verdict, 0) + 1
    top = max(sum(b.values()) for b in counts)
    # With many cases the unchanged peak would flatten every changed bar: heights go by the
    # square root of the count then (and the axis says so).
    root = top > ROOT_SCALE_ABOVE
    pad_l, pad_b, pad_t = 44, 30, 34  # the legend sits above the bars
    w, h = width - pad_l - 10, height - pad_b - pad_t

    def up(n: float) -> float:
        return h * (math.sqrt(n / top) if root else n / top)

    parts = [
        f'<svg class="plot" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'role="img" '
        'aria-label="Histogram of latency changes, coloured by verdict">'
    ]
    for i, b in enumerate(counts):
        x = pad_l + w * i / bins
        left = lo + i * step
        below = 0
        for verdict in ("same", "inconclusive", "improved", "regressed"):
            n = b.get(verdict, 0)
            if not n:
                continue
            y, bh = pad_t + h - up(below + n), up(below + n) - up(below)
            below += n
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
    ticks = {int(t) for t in nice_ticks(0, top, 5) if float(t).is_integer()}
    if root:
        ticks |= {10**k for k in range(1, len(str(top)))}
    last = -100.0
    for n in sorted(ticks):
        if up(n) - last < 16:  # no two count labels on top of each other
            continue
        last = up(n)
        parts.append(
            f'<text x="{pad_l - 6}" y="{pad_t + h - up(n) + 4:.1f}" text-anchor="end">{n}</text>'
        )
    parts.append(_legend(pad_l + 8, 16))
    if root:
        parts.append(
            f'<text x="{width - 10}" y="16" text-anchor="end">bar height: square root of the '
            "number of cases</text>"
        )
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
    # The largest slowdowns and the largest speed-ups, changed cases first, fastest at the bottom.
    usable = sorted(
        (c for c in cases if _finite(c.get("ratio")) and c["ratio"] > 0 and c["ratio"] != 1),
        key=lambda c: (c.get("verdict") == "same", -abs(math.log(c["ratio"]))),
    )
    ups = [c for c in usable if c["ratio"] > 1]
    downs = [c for c in usable if c["ratio"] < 1]
    n_up = min(len(ups), max(top // 2, top - len(downs)))
    rows = sorted(ups[:n_up] + downs[: top - n_up], key=lambda c: -c["ratio"])
    if not rows:
        return Markup("<p>No cases to plot.</p>")
    values = [_pct(c["ratio"]) for c in rows]
    values += [_pct(c[k]) for c in rows for k in ("lo", "hi") if _finite(c.get(k))]
    lo, hi = widen_to_ticks(min(min(values), -1.0), max(max(values), 1.0), 8)
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
    """Change against baseline latency (log scale), every case. Points of one verdict are one
    <path> of round dots on whole-pixel positions (a few bytes a point, duplicates dropped);
    only changed cases get their own marker with a tooltip."""
    pts = [
        c
        for c in cases
        if _finite(c.get("ratio")) and _finite(c.get("base_ms")) and c["base_ms"] > 0
    ]
    if not pts:
        return Markup("<p>No cases to plot.</p>")
    xs = [math.log10(c["base_ms"]) for c in pts]
    ys = [_pct(c["ratio"]) for c in pts]
    x0, x1 = min(xs), max(xs)
    if x1 - x0 < 1e-9:
        x0, x1 = x0 - 0.5, x1 + 0.5
    x0, x1 = x0 - 0.01 * (x1 - x0), x1 + 0.01 * (x1 - x0)  # no dot cut by the edges
    y0, y1 = min(min(ys), -1.0), max(max(ys), 1.0)
    margin = 0.04 * (y1 - y0)  # no dot cut in half by the plot's edge
    y0, y1 = y0 - margin, y1 + margin
    pad_l, pad_b, pad_t = 56, 30, 12
    w, h = width - pad_l - 10, height - pad_b - pad_t

    def px(xv: float) -> float:
        return pad_l + w * (xv - x0) / (x1 - x0)

    def py(yv: float) -> float:
        return pad_t + h * (y1 - yv) / (y1 - y0)

    parts = [
        f'<svg class="plot" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'role="img" aria-label="Change against baseline latency">'
    ]
    for v in nice_ticks(y0, y1, 7):
        grid = 'stroke="#333" stroke-dasharray="3,3"' if abs(v) < 1e-9 else 'stroke="#eaeef2"'
        parts.append(
            f'<line x1="{pad_l}" x2="{pad_l + w}" y1="{py(v):.1f}" y2="{py(v):.1f}" {grid}/>'
            f'<text x="{pad_l - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{_tick(v)}</text>'
        )
    # 1-2-5 ticks over up to two decades, decades alone beyond that.
    steps = (1,) if x1 - x0 > 2 else (1, 2, 5)
    for e in range(math.floor(x0) - 1, math.ceil(x1) + 1):
        for m in steps:
            t = e + math.log10(m)
            if x0 - 1e-9 <= t <= x1 + 1e-9 and px(t) < pad_l + w - 200:  # clear of the title
                parts.append(
                    f'<text x="{px(t):.1f}" y="{height - 10}" text-anchor="middle">'
                    f"{_latency_tick(m, e)}</text>"
                )
    parts.append(
        f'<text x="{pad_l + w}" y="{height - 10}" text-anchor="end">'
        "baseline latency (log scale)</text>"
    )
    dots: dict[str, set[tuple[int, int]]] = {}
    marked: list[tuple[dict[str, Any], float, float]] = []
    for c, xv, yv in zip(pts, xs, ys, strict=True):
        verdict = str(c.get("verdict", ""))
        if verdict in ("regressed", "improved") and len(marked) < MAX_MARKED:
            marked.append((c, px(xv), py(yv)))
        else:
            dots.setdefault(verdict, set()).add((round(px(xv)), round(py(yv))))
    for verdict in sorted(dots, key=lambda v: v != "same"):  # changed drawn over unchanged
        path = "".join(f"M{x} {y}h0" for x, y in sorted(dots[verdict]))
        parts.append(
            f'<path d="{path}" stroke="{VERDICT_COLORS.get(verdict, "#57606a")}" '
            'stroke-width="6" stroke-linecap="round" stroke-opacity="0.7" fill="none"/>'
        )
    for c, cx, cy in marked:
        verdict = str(c.get("verdict", ""))
        parts.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3.5" '
            f'fill="{VERDICT_COLORS.get(verdict, "#57606a")}">'
            f"<title>{escape(case_label(c)[:80])}: {escape(fmt_ms(c['base_ms']))}, "
            f"{escape(fmt_change(c['ratio']))} ({escape(verdict_word(verdict))})</title></circle>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _latency_tick(m: int, e: int) -> str:
    """m * 10**e milliseconds, as an axis reads it: 200 µs, 1 ms, 50 ms."""
    return f"{m * 10.0 ** (e + 3):g} µs" if e < 0 else f"{m * 10.0**e:g} ms"


def _num(v: Any) -> str:
    return f"{v:.9g}" if _finite(v) else ""


def _change(v: Any) -> float | None:
    """A ratio as a change in percent (None when there is none)."""
    return _pct(float(v)) if _finite(v) else None


def _round(v: Any, digits: int) -> float | None:
    return round(float(v), digits) if _finite(v) else None


def _order(c: dict[str, Any]) -> tuple[int, float]:
    """Changed cases first (regressed, improved, inconclusive), each by size of the change."""
    ratio: Any = c.get("ratio")
    size = abs(math.log(ratio)) if _finite(ratio) and ratio > 0 else 0.0
    return VERDICT_ORDER.get(str(c.get("verdict", "")), len(VERDICT_ORDER)), -size


def _case_rows(cases: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str, int]:
    """Table rows for the first MAX_SHOWN_ROWS cases (only the changed ones when there are
    more), and, when some are left out, every case in one compact JSON block from which the
    report's script sorts, filters and pages the table, so the report stays small and quick
    for thousands of cases. Returns (rows, JSON text safe inside <script>, cases left out)."""
    ordered = sorted(cases, key=_order)[:MAX_TABLE_ROWS]  # past the cap, unchanged ones go
    shown = ordered[:MAX_SHOWN_ROWS]
    if len(ordered) > MAX_SHOWN_ROWS:  # a long table: its unchanged cases wait for the reader
        shown = [c for c in shown if c.get("verdict") != "same"]
    rows = []
    for c in shown:
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
                "change_v": _num(_change(ratio)),
                "lo": fmt_change(c.get("lo")),
                "lo_v": _num(_change(c.get("lo"))),
                "hi": fmt_change(c.get("hi")),
                "hi_v": _num(_change(c.get("hi"))),
                "p": _num(c.get("q", c.get("p"))),
                "p_text": _q_text(c),
                "verdict": verdict_word(str(c.get("verdict", ""))),
                "verdict_class": c.get("verdict", ""),
                "confirmed": bool(c.get("confirmed")),
            }
        )
    strings: dict[str, int] = {}

    def ref(text: Any) -> int:
        return strings.setdefault(str(text or ""), len(strings))

    rest = []
    verdicts = set()
    # A long table's JSON holds every case, so the script sorts and filters all of them.
    for c in ordered if len(shown) < len(ordered) else []:
        verdicts.add(str(c.get("verdict", "")))
        pct = {k: _change(c.get(k)) for k in ("ratio", "lo", "hi")}
        rest.append(
            [
                case_label(c),
                ref(c.get("op")),
                ref(c.get("dtype")),
                ref(c.get("kernel_cand")),
                *(
                    _round(c.get(k), 4 if _finite(c.get(k)) and c[k] < 1 else 3)
                    for k in ("base_ms", "cand_ms")
                ),
                *(_round(pct[k], 1) for k in ("ratio", "lo", "hi")),
                _q_text(c),
                ref(c.get("verdict")),
                1 if c.get("confirmed") else 0,
            ]
        )
    data = {
        "strings": list(strings),
        "words": {v: verdict_word(v) for v in sorted(verdicts)},
        "rows": rest,
    }
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # Inside <script>, "</script" or "<!--" from a case or kernel name must not end the block.
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return rows, text, len(ordered) - len(shown)


def _q_text(c: dict[str, Any]) -> str:
    q = c.get("q", c.get("p"))
    return f"{q:.2g}" if _finite(q) else "–"


def _side(sha: object, branch: object, run_id: object) -> str:
    """`841efd6 (main)`: the commit, else the run, and the branch when known (plain text)."""
    what = short_sha(sha) if sha else (f"run {run_id}" if run_id else "unknown commit")
    return what + (f" ({branch})" if branch else "")


def _device_name(device: object) -> str | None:
    return str(device.get("name")) if isinstance(device, dict) and device.get("name") else None


def compared_line(comparison: dict[str, Any]) -> str:
    """What was compared with what, as the comment's first line says it (plain text)."""
    base, cand = comparison["baseline"], comparison["candidate"]
    ref = (base.get("store") or {}).get("ref") or base.get("branch")
    device = _device_name(cand.get("device")) or "unknown device"
    return (
        f"head {_side(cand.get('git_sha'), cand.get('branch'), cand.get('run_id'))} vs "
        f"baseline {_side(base.get('git_sha'), ref, base.get('run_id'))} · "
        f"{baseline_words(base.get('kind') or 'explicit-run')}"
        f"{', paired' if base.get('paired') else ''} · {cand.get('backend')} "
        f"{', '.join(cand.get('ops') or [])} on {device}"
    )


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
    shown_rows, cases_json, cases_rest = _case_rows(cases)
    provenance = (
        [
            {"name": name, "base": base.get(k), "cand": cand.get(k)}
            for k, name in PROVENANCE_NAMES.items()
        ]
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
    return _render_report(
        mode="comparison",
        icon=ICONS.get(verdict["level"], ""),
        level=verdict["level"],
        headline=verdict["headline"],
        compared=compared_line(comparison),
        rule=decision_rule(comparison["settings"]),
        reasons=verdict.get("reasons", []),
        warnings=comparison.get("warnings", []),
        generated_at=comparison.get("generated_at", ""),
        cases=shown_rows,
        cases_json=Markup(cases_json),
        cases_rest=cases_rest,
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
    )


# What a run-only report lacks: every section drawn from a comparison, empty.
_NO_COMPARISON: dict[str, Any] = {
    "rule": None,
    "warnings": [],
    "generated_at": "",
    "cases": [],
    "cases_json": Markup("{}"),
    "cases_rest": 0,
    "cases_total": 0,
    "coverage_findings": [],
    "group_rows": [],
    "dispatch": [],
    "histogram": None,
    "forest": None,
    "scatter": None,
}


def _render_report(**fields: Any) -> str:
    """report.html.j2 with `fields` and what every report shows the same way."""
    return (
        html_environment()
        .get_template("report.html.j2")
        .render(
            **fields,
            table_limit=MAX_TABLE_ROWS,
            page=PAGE_ROWS,
            fmt_change=fmt_change,
            # Sort keys to 9 digits: a library's last-digit rounding is no change of order.
            num=_num,
            version=__version__,
            colors=VERDICT_COLORS,
        )
    )


def render_run_html_report(info: Any) -> str:
    from bot.render.run_summary import run_verdict

    level, headline, reasons = run_verdict(info)
    meta = info.meta
    return _render_report(
        mode="run",
        icon=ICONS.get(level, ""),
        level=level,
        headline=headline,
        compared=(
            f"head {_side(meta.get('git_sha'), meta.get('branch'), meta.get('run_id'))} · "
            f"{meta.get('backend') or 'unknown backend'} on "
            f"{_device_name(meta.get('device')) or 'unknown GPU'}"
        ),
        reasons=reasons,
        groups=[{**g, "change": "in this run"} for g in info.groups],
        coverage=[
            {"op": op, **row, "status": "", "missing": 0} for op, row in sorted(info.per_op.items())
        ],
        provenance=[
            {"name": name, "base": None, "cand": meta.get(k)}
            for k, name in PROVENANCE_NAMES.items()
            if k not in _COMPARISON_ONLY_PROVENANCE
        ],
        error=info.error,
        problem=info.problem,
        log_tail=info.log_tail,
        **_NO_COMPARISON,
    )
