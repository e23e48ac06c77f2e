"""Write the site: an index of histories, per history an overview by op and dtype, pages of
cases, and a page per case with its trend, intervals, failures and each point's provenance.

Every page is a plain file with relative links (opens from disk, an artifact or GitHub
Pages); the only shared asset is style.css, written here. Text from records goes through
Jinja's HTML autoescape; the SVG comes from `bot.site.svg`, which escapes its own labels.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
import numpy as np

from bot import __version__
from bot.compare.stats import Settings, geomean_interval
from bot.history import source
from bot.history.changepoints import ChangePoint, by_commit, change_points
from bot.history.core import History, HistorySettings, read_history
from bot.history.export import case_summary, half_width
from bot.keys import case_file, series_dir, slug
from bot.render.comment import case_label, fmt_change, fmt_ms
from bot.render.html import html_environment
from bot.site.svg import Point, sparkline_svg, trend_svg
from collector.errors import UserError

SITE_MARKER = ".collectbot-site"
# Cases per page of a group's table: a page stays near 200 KB however many cases there are.
PAGE_CASES = 200
STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:16px;color:#1f2328}
a{color:#0969da;text-decoration:none}a:hover{text-decoration:underline}
table{border-collapse:collapse;margin:8px 0 16px}
th,td{padding:3px 8px;border-bottom:1px solid #d0d7de;text-align:left;vertical-align:middle}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;
white-space:nowrap}
code{font-size:12px;white-space:nowrap}.muted{color:#59636e}.up{color:#d1242f}.down{color:#1a7f37}
.plot text{font-size:11px;fill:#59636e}.groups{display:flex;flex-wrap:wrap;gap:16px}
.group{border:1px solid #d0d7de;border-radius:6px;padding:8px}nav{margin-bottom:12px}
.fail{color:#9a6700}
"""


def group_file(op: str, dtype: str, page: int) -> str:
    return f"group-{slug(op + '-' + (dtype or 'any'))}-{page}.html"


@dataclass
class _Written:
    pages: int = 0
    largest: int = 0
    largest_page: str = ""
    total: int = 0

    def write(self, path: Path, text: str) -> None:
        data = text.encode()
        path.write_bytes(data)
        self.pages += 1
        self.total += len(data)
        if len(data) > self.largest:
            self.largest, self.largest_page = len(data), str(path)


def _label(history: History, row: int) -> str:
    case = history.cases[row]
    return case_label({"op": case.op, "params": case.params}) if case.params else case.key


def _group_trend(history: History, rows: np.ndarray, settings: Settings) -> list[Point]:
    """Per run, the geometric mean over the group's cases of each case's point divided by
    its median over the window, as a % change, with a bootstrap-over-cases interval."""
    rng = np.random.default_rng(settings.seed)
    ms = history.ms[rows]
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        # Cases that only failed have no median: their rows stay NaN.
        warnings.simplefilter("ignore", RuntimeWarning)
        ref = np.nanmedian(ms, axis=1)
        logs = np.log(ms / ref[:, None])
    out = []
    for col, run in enumerate(history.runs):
        values = logs[:, col][np.isfinite(logs[:, col])]
        failed = sum(1 for f in history.failure[rows, col] if f is not None)
        label = f"run {run.index} ({run.commit})"
        if not values.size:
            out.append(Point(f"{label}: no points", failed=failed > 0))
            continue
        point, lo, hi = geomean_interval(values, settings, rng)
        text = f"{label}: {fmt_change(point)} over {values.size} cases"
        if failed:
            text += f", {failed} failed"
        out.append(Point(text, (point - 1) * 100, (lo - 1) * 100, (hi - 1) * 100, failed > 0))
    return out


def _case_points(history: History, row: int) -> list[Point]:
    out = []
    for col, run in enumerate(history.runs):
        ms, failure = float(history.ms[row, col]), history.failure[row, col]
        label = f"run {run.index} ({run.commit}, {run.started_at or run.stored_at})"
        if math.isfinite(ms):
            label += f": {fmt_ms(ms)}"
        if failure is not None:
            label += f": failed ({failure[:120]})"
        out.append(
            Point(
                label,
                ms * 1000.0,
                float(history.lo[row, col]) * 1000.0,
                float(history.hi[row, col]) * 1000.0,
                failure is not None,
            )
        )
    return out


def _case_row(history: History, row: int, steps: list[ChangePoint]) -> dict[str, Any]:
    summary = case_summary(history, row)
    latest = summary["latest"]
    share = half_width(latest)
    half = "" if share is None else f"±{share * 100:.1f}%"
    spread = summary["range"]
    failed = [f is not None for f in history.failure[row]]
    return {
        "label": _label(history, row),
        "file": case_file(history.cases[row].key),
        "latest": fmt_ms(latest["ms"]) if latest else "–",
        "half": half,
        "spark": sparkline_svg(list(history.ms[row]), failed),
        "range": f"{(spread[1] - spread[0]) * 100:.1f}%" if spread else "–",
        "failed": sum(failed),
        "steps": [
            {"change": fmt_change(cp.ratio), "run": cp.run, "up": cp.ratio > 1} for cp in steps
        ],
    }


def _run_rows(history: History) -> list[dict[str, Any]]:
    return [
        {
            **run.to_json(),
            "commit": run.commit,
            # "2026-11-02T00:00:00+00:00" -> "2026-11-02 00:00": a table column, not a record.
            "when": (run.started_at or run.stored_at or "")[:16].replace("T", " "),
            "versions_text": ", ".join(f"{k} {v}" for k, v in run.versions.items() if v),
            "gpu_text": " · ".join(v for v in run.gpu.values() if v),
        }
        for run in history.runs
    ]


def write_history(
    env: jinja2.Environment, history: History, out: Path, written: _Written
) -> dict[str, Any]:
    """One history's overview, group pages and case pages under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    points = change_points(history)
    groups = by_commit(history, points)
    steps: dict[int, list[ChangePoint]] = {}
    for cp in points:
        steps.setdefault(cp.case, []).append(cp)
    settings = Settings()
    runs = _run_rows(history)
    keys = sorted({(c.op, c.dtype) for c in history.cases})
    overview = []
    for op, dtype in keys:
        rows = np.array(
            [i for i, c in enumerate(history.cases) if (c.op, c.dtype) == (op, dtype)],
            dtype=np.int64,
        )
        stepped = sorted(rows, key=lambda r: (r not in steps, _label(history, int(r))))
        pages = max(1, math.ceil(len(stepped) / PAGE_CASES))
        files = [group_file(op, dtype, p + 1) for p in range(pages)]
        for p, file in enumerate(files):
            chunk = stepped[p * PAGE_CASES : (p + 1) * PAGE_CASES]
            written.write(
                out / file,
                env.get_template("group.html.j2").render(
                    series=history.series.label,
                    op=op,
                    dtype=dtype,
                    page=p + 1,
                    pages=files,
                    first=p * PAGE_CASES + 1,
                    total=len(stepped),
                    rows=[_case_row(history, int(r), steps.get(int(r), [])) for r in chunk],
                    version=__version__,
                ),
            )
        overview.append(
            {
                "op": op,
                "dtype": dtype,
                "cases": int(rows.size),
                "stepped": sum(1 for r in rows if int(r) in steps),
                "pages": files,
                "plot": trend_svg(
                    _group_trend(history, rows, settings),
                    unit="%",
                    title=f"{op} {dtype}: geometric-mean change against each case's median",
                    width=520,
                    height=180,
                ),
            }
        )
    case_template = env.get_template("case.html.j2")
    for row, case in enumerate(history.cases):
        case_steps = steps.get(row, [])
        points_rows = []
        for col, run in enumerate(runs):
            ms = float(history.ms[row, col])
            if not math.isfinite(ms) and history.failure[row, col] is None:
                continue
            points_rows.append(
                {
                    **run,
                    "ms": fmt_ms(ms),
                    "lo": fmt_ms(float(history.lo[row, col])),
                    "hi": fmt_ms(float(history.hi[row, col])),
                    "kernel": history.kernel[row, col] or "",
                    "failure": history.failure[row, col],
                }
            )
        written.write(
            out / case_file(case.key),
            case_template.render(
                series=history.series.label,
                label=_label(history, row),
                case=case,
                group=group_file(case.op, case.dtype, 1),
                plot=trend_svg(
                    _case_points(history, row),
                    steps=[cp.run - 1 for cp in case_steps],
                    unit=" µs",
                    title=f"latency of {_label(history, row)} by run",
                ),
                steps=[
                    {
                        **cp.to_json(),
                        "change": fmt_change(cp.ratio),
                        "before": fmt_ms(cp.before_ms),
                        "after": fmt_ms(cp.after_ms),
                        "span": f"{(cp.previous_commit or '?')[:12]}..{(cp.commit or '?')[:12]}",
                    }
                    for cp in case_steps
                ],
                points=points_rows,
                version=__version__,
            ),
        )
    written.write(
        out / "index.html",
        env.get_template("series.html.j2").render(
            series=history.series.label,
            runs=runs,
            skipped=history.skipped,
            overview=overview,
            groups=[
                {
                    **g.to_json(),
                    "span": f"{(g.previous_commit or '?')[:12]}..{(g.commit or '?')[:12]}",
                    "top": [
                        {
                            "label": _label(history, cp.case),
                            "file": case_file(cp.key),
                            "change": fmt_change(cp.ratio),
                            "up": cp.ratio > 1,
                        }
                        for cp in g.changes[:10]
                    ],
                }
                for g in groups
            ],
            cases=len(history.cases),
            version=__version__,
        ),
    )
    return {
        "label": history.series.label,
        "runs": len(history.runs),
        "cases": len(history.cases),
        "change_points": len(points),
        "skipped": len(history.skipped),
    }


def build_site(
    url: str,
    out: Path,
    selection: source.Selection,
    settings: HistorySettings | None = None,
    warn: source.Warn | None = None,
) -> dict[str, Any]:
    """Write the site of every series `selection` matches; returns what was written."""
    found = source.list_series(url, selection)
    if not found:
        raise UserError(f"{url}: no stored runs match the selection")
    out.mkdir(parents=True, exist_ok=True)
    env = html_environment("bot.site")
    written = _Written()
    (out / "style.css").write_text(STYLE.strip() + "\n")
    index = []
    for series in sorted(found, key=lambda s: s.label):
        history = read_history(url, series, found[series], settings, warn)
        directory = series_dir(series)
        info = write_history(env, history, out / directory, written)
        index.append({**info, "dir": directory})
    written.write(
        out / "index.html",
        env.get_template("index.html.j2").render(
            histories=index,
            generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
            version=__version__,
        ),
    )
    (out / SITE_MARKER).write_text(f"collectbot {__version__}\n")
    return {
        "out": str(out),
        "histories": len(index),
        "cases": sum(h["cases"] for h in index),
        "change_points": sum(h["change_points"] for h in index),
        "pages": written.pages,
        "bytes": written.total,
        "largest_page_bytes": written.largest,
        "largest_page": written.largest_page,
    }
