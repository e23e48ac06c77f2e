"""Render a comparison into the evidence comment.

Verdict first; details in `<details>` blocks; a hidden marker on the first line names the
bot, backend and GPU (so each posts and updates its own comment) and carries the run id and
head SHA (so an older run never overwrites a newer one). GitHub rejects bodies over 65,536
characters: details are trimmed until the comment fits, the verdict never.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import jinja2
from markupsafe import Markup

from bot import __version__
from bot.ci_config import settings_line
from bot.compare import stats
from bot.keys import Series
from bot.render.environment import template_environment
from bot.render.sanitize import clean, finalize, html_code, md_block, md_code, md_text, md_url

GITHUB_COMMENT_LIMIT = 65536
MARKER_PREFIX = "<!-- collectbot "
ICONS = {"red": "❌", "yellow": "⚠️", "green": "✅"}
# Marker values keep only these characters: nothing in them can close the HTML comment.
_MARKER_VALUE = re.compile(r"[^A-Za-z0-9 ._:/+*-]")


@dataclass(frozen=True)
class Marker:
    backend: str
    gpu: str
    run_id: str
    head_sha: str
    started_at: str

    def render(self) -> str:
        fields = {k: _MARKER_VALUE.sub("_", str(v))[:80] for k, v in self.__dict__.items()}
        return MARKER_PREFIX + json.dumps(fields, sort_keys=True) + " -->"

    def same_slot(self, other: Marker) -> bool:
        """One sticky comment per (backend, GPU)."""
        return (self.backend, self.gpu) == (other.backend, other.gpu)

    @classmethod
    def parse(cls, body: str) -> Marker | None:
        """Only a marker on the body's first line counts: text quoted later can't forge one."""
        first = body.split("\n", 1)[0].strip()
        if not first.startswith(MARKER_PREFIX) or not first.endswith("-->"):
            return None
        try:
            data = json.loads(first[len(MARKER_PREFIX) : -3].strip())
            return cls(**{k: str(data[k]) for k in cls.__dataclass_fields__})
        except (ValueError, KeyError, TypeError):
            return None


# How far ahead of the renderer's clock a run's start may be (clock skew between machines).
FUTURE_SLACK = timedelta(minutes=10)


def bounded_start(stamp: str, now: datetime | None = None) -> str:
    """A run's start time as its marker may carry it: never in the future.

    The start orders runs for the stale-run guard (a later run replaces an earlier one's
    comment), and it comes from run.json, which the pull request's code could write: a start
    in 2099 would make that comment outrank every later run of the same head. A start beyond
    the renderer's clock (plus slack) is replaced by the renderer's clock.
    """
    now = now or datetime.now(UTC)
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp  # unparsable: it sorts before any real time anyway
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    if when > now + FUTURE_SLACK:
        return now.isoformat(timespec="seconds")
    return stamp


def marker_for(comparison: dict[str, Any], head_sha: str | None = None) -> Marker:
    cand = comparison["candidate"]
    return Marker(
        backend=str(cand.get("backend") or "unknown"),
        gpu=str((cand.get("device") or {}).get("name") or "unknown"),
        run_id=str(cand.get("run_id") or ""),
        head_sha=str(head_sha or cand.get("git_sha") or ""),
        started_at=bounded_start(str(cand.get("started_at") or "")),
    )


def _env() -> jinja2.Environment:
    env = template_environment(autoescape=False, finalize=finalize, keep_trailing_newline=True)
    env.filters["code"] = md_code
    env.filters["block"] = md_block
    env.filters["text"] = md_text
    env.filters["html_code"] = html_code
    return env


def fmt_ms(ms: float | None) -> str:
    if ms is None or not math.isfinite(ms):
        return "–"
    if ms < 1:
        return f"{ms * 1000:.1f} µs"
    return f"{ms:.3f} ms"


def fmt_change(ratio: float | None) -> str:
    if ratio is None or not math.isfinite(ratio):
        return "–"
    return f"{(ratio - 1) * 100:+.1f}%"


def fmt_ci(case: dict[str, Any]) -> str:
    if case.get("method") == "size-only":
        return "no samples"
    lo, hi = case.get("lo"), case.get("hi")
    if lo is None or hi is None:
        return "–"
    return f"[{fmt_change(lo)}, {fmt_change(hi)}]"


# What a reader sees for each verdict: one word for a case that did not move, everywhere.
VERDICT_WORDS = {stats.SAME: "unchanged"}


# What a reader sees for each kind of baseline (bot/compare/comparison.py BASELINE_KINDS).
BASELINE_WORDS = {
    "previous-run": "previous stored run",
    "merge-base": "merge base's run",
    "imported-table": "imported table",
    "explicit-run": "named run",
}


def baseline_words(kind: str) -> str:
    return BASELINE_WORDS.get(kind, kind)


def verdict_word(verdict: str) -> str:
    return VERDICT_WORDS.get(verdict, verdict)


def short_sha(sha: object) -> str:
    text = str(sha or "")
    return text[:7] if re.fullmatch(r"[0-9a-fA-F]{8,64}", text) else text


def _side_ref(label: str, sha: object, branch: object, run_id: object) -> Markup:
    """`head 841efd6 (pr-42)`: the commit, and the branch or run when known (all escaped)."""
    commit = (
        md_code(short_sha(sha)) if sha else md_text(f"run {run_id}" if run_id else "unknown commit")
    )
    return Markup(f"**{label}** {commit}" + (f" ({md_code(branch)})" if branch else ""))


def _report_link(url: str | None) -> Markup | None:
    """An https URL, or a bare file name beside the comment (`report.html`, the demo's)."""
    if url is not None and re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]*\.html", url):
        return Markup(url)
    return md_url(url)


def _links(opts: RenderOptions) -> list[str]:
    return [
        f"[{name}]({url})"
        for name, url in (
            ("artifacts", md_url(opts.artifacts_url)),
            ("HTML report", _report_link(opts.report_url)),
        )
        if url
    ]


def decision_rule(settings: dict[str, Any]) -> str:
    """The verdict rule in one sentence, from the comparison's settings (plain text)."""
    return (
        f"Rule: a case is regressed or improved when its {settings['confidence'] * 100:g}% "
        f"interval excludes changes under {settings['min_effect'] * 100:g}% (and "
        f"{settings['noise_mult']:g}x its noise) and it passes Benjamini-Hochberg at FDR "
        f"{settings['alpha'] * 100:g}%; otherwise unchanged or inconclusive."
    )


def header_lines(comparison: dict[str, Any], opts: RenderOptions) -> dict[str, Any]:
    """The comment's first lines: what was compared with what, on which GPU and backend, the
    decision rule, and the links to the evidence."""
    base, cand = comparison["baseline"], comparison["candidate"]
    store = comparison["baseline"].get("store") or {}
    settings = comparison["settings"]
    ops = ", ".join(cand.get("ops") or [])
    device = (cand.get("device") or {}).get("name") or "unknown device"
    kind = baseline_words(base.get("kind") or "explicit-run")
    head = _side_ref(
        "head", opts.head_sha or cand.get("git_sha"), cand.get("branch"), cand.get("run_id")
    )
    against = _side_ref(
        "baseline",
        base.get("git_sha"),
        store.get("ref") or base.get("branch"),
        base.get("run_id"),
    )
    where = md_text(
        f"{kind}{', paired' if base.get('paired') else ''} · {cand.get('backend')} {ops} "
        f"on {device}"
    )
    rule = md_text(decision_rule(settings))
    links = _links(opts)
    return {
        "compared": Markup(f"{head} vs {against} · {where}"),
        "rule": rule,
        "links": Markup(" · ".join(links)) if links else None,
    }


def case_label(case: dict[str, Any]) -> str:
    params = case.get("params") or {}
    return f"{case['op']} " + " ".join(
        str(v) if k.endswith("dtype") else f"{k}={v}" for k, v in params.items()
    )


_SITE_DIR = re.compile(r"[a-z0-9][a-z0-9._+-]{0,100}")


def check_site_url(url: str | None) -> None:
    """A site URL is a plain https URL (it becomes a link in a comment), or an error."""
    if url is not None and md_url(url) is None:
        from collector.errors import UserError

        raise UserError(f"site URL {clean(url, 100)!r}: not a plain https URL")


def _case_page(site_url: str | None, site_dir: object, key: str) -> Markup | None:
    """The case's page on the store's `collectbot site` (https, else None)."""
    if site_url is None or not isinstance(site_dir, str) or not _SITE_DIR.fullmatch(site_dir):
        return None
    from bot.keys import case_file

    return md_url(f"{site_url.rstrip('/')}/{site_dir}/{case_file(key)}")


def case_url(site_url: str, series: Series, key: str) -> str | None:
    """The address of a case's page on a site served at `site_url` (https only, else None)."""
    from bot.keys import series_dir

    url = _case_page(site_url, series_dir(series), key)
    return None if url is None else str(url)


def history_cells(
    case: dict[str, Any], history: dict[str, Any] | None, site_url: str | None = None
) -> dict[str, Any]:
    """A changed case's trend over the stored baselines (a sparkline, the candidate after
    the arrow, linked to its site page) and its range; empty when there is none."""
    found = (history or {}).get("cases", {}).get(case["key"])
    if not found:
        return {"trend": "", "range": ""}
    import numpy as np

    from bot.render.sparkline import sparkline

    values = np.array(
        [np.nan if v is None else float(v) for v in found["points"]] + [found["cand_level_ms"]]
    )
    bars = sparkline(values, [False] * values.size)
    trend = f"{bars[:-1]}→{bars[-1]}"
    page = _case_page(site_url, (history or {}).get("site_dir"), case["key"])
    low, high = found["range"]
    where = "within its history" if found["within"] else "outside its history"
    return {
        "trend": Markup(f"[{trend}]({page})") if page else trend,
        "range": f"{where}: {fmt_change(low)} to {fmt_change(high)} of the baseline over "
        f"{found['measured']} runs (wandered {found['wandered'] * 100:.1f}%)",
        "within": found["within"],
    }


def _case_row(
    case: dict[str, Any], history: dict[str, Any] | None = None, site_url: str | None = None
) -> dict[str, Any]:
    verdict = verdict_word(case["verdict"]) + (
        " (size only)" if case.get("method") == "size-only" else ""
    )
    if case.get("confirmed"):
        verdict += " · confirmed"
    if case.get("remeasured") and case.get("first_verdict") != case["verdict"]:
        verdict += f" (first pass: {verdict_word(str(case.get('first_verdict')))}; re-measured)"
    kernel = case.get("kernel_cand", "")
    if case.get("dispatch_change"):
        # Two kernels compared: a dispatch change, not the same kernel moving.
        verdict += " · dispatch change"
        kernel = f"{case.get('kernel_base', '')} → {kernel}"
    return {
        "label": case_label(case),
        "kernel": kernel,
        "base": fmt_ms(case.get("base_ms")),
        "cand": fmt_ms(case.get("cand_ms")),
        "change": fmt_change(case.get("ratio")),
        "ci": fmt_ci(case),
        "verdict": verdict,
        **history_cells(case, history, site_url),
    }


_BINS = (0.9, 0.95, 0.98, 0.99, 1.01, 1.02, 1.05, 1.1)


def ratio_chart(cases: list[dict[str, Any]], histogram: dict[str, Any] | None = None) -> str | None:
    """A Mermaid bar chart of the ratio distribution: GitHub renders it, no image hosting.

    `histogram` (the comparison's, over every matched case) wins over counting `cases`."""
    if histogram is not None:
        edges = [float(e) for e in histogram["edges"]]
        counts = [int(c) for c in histogram["counts"]]
        if not sum(counts):
            return None
    else:
        ratios = [
            c["ratio"] for c in cases if c.get("ratio") is not None and math.isfinite(c["ratio"])
        ]
        if not ratios:
            return None
        edges = list(_BINS)
        counts = [0] * (len(edges) + 1)
        for r in ratios:
            counts[sum(1 for e in edges if r >= e)] += 1

    def pct(ratio: float) -> str:
        return f"{(ratio - 1) * 100:+g}%"

    # Words, not `<`/`>` (Mermaid shows them as `&lt;`); bars run sideways so that each label
    # has a line of its own; each label ends with its bar's count (a count drawn on the bar
    # lands on the axis labels when the bar is short) and the count axis has no ticks (they
    # fall on fractions of a case for small counts; a range would need `-->`, which no
    # comment body carries outside its marker).
    labels = [f"under {pct(edges[0])}"]
    labels += [f"{pct(a)} to {pct(b)}" for a, b in itertools.pairwise(edges)]
    labels.append(f"over {pct(edges[-1])}")
    labels = [f"{label}: {n}" for label, n in zip(labels, counts, strict=True)]
    x_axis = ", ".join(json.dumps(label) for label in labels)
    return (
        "%%{init: " + json.dumps(_CHART_CONFIG) + "}%%\n"
        "xychart-beta horizontal\n"
        '  title "Cases by latency change (candidate vs baseline)"\n'
        f"  x-axis [{x_axis}]\n"
        '  y-axis "cases"\n'
        f"  bar [{', '.join(str(c) for c in counts)}]"
    )


_CHART_CONFIG = {
    "xyChart": {"showDataLabel": False, "yAxis": {"showLabel": False, "showTick": False}},
    "themeVariables": {"xyChart": {"plotColorPalette": "steelblue"}},
}


def short_uuid(uuid: str | None) -> str:
    """A GPU UUID as the comment shows it: its first 12 characters (GPU-11f4dd46)."""
    return str(uuid)[:12] if uuid else "–"


def side_gpus(comparison: dict[str, Any]) -> tuple[str, str]:
    """Which GPUs measured each side's cases (per case, from latency.gpu), as text."""
    gpu = comparison["latency"].get("gpu") or {}
    sides: tuple[dict[str, str], dict[str, str]] = ({}, {})
    for g in gpu.get("same_gpus") or []:
        for side in sides:
            side[str(g.get("uuid"))] = str(g.get("name") or "")
    for pair in gpu.get("pairs") or []:
        for side, key in zip(sides, ("base", "cand"), strict=True):
            side[str(pair[key].get("uuid"))] = str(pair[key].get("name") or "")
    return tuple(  # type: ignore[return-value]
        ", ".join(f"{name} {short_uuid(u)}".strip() for u, name in sorted(side.items())) or "–"
        for side in sides
    )


def gpu_line(comparison: dict[str, Any]) -> str | None:
    """One sentence on which GPUs measured the sides and what that did to the verdict."""
    gpu = comparison["latency"].get("gpu") or {}
    cases = gpu.get("cases") or {}
    mode = gpu.get("mode")
    if mode in (None, "unknown"):
        return None
    if mode == "same-gpu":
        return "Both sides of every case were measured on the same GPU."
    parts = []
    if cases.get("same"):
        parts.append(f"{cases['same']} cases were measured on the same GPU on both sides")
    for pair in gpu.get("pairs") or []:
        where = f"{short_uuid(pair['base'].get('uuid'))} → {short_uuid(pair['cand'].get('uuid'))}"
        fit = pair.get("fit") or {}
        if pair.get("calibrated"):
            lo, hi = fit.get("offset_range") or (None, None)
            span = (
                f"{fmt_change(lo)} to {fmt_change(hi)} by kernel size"
                if lo is not None and hi is not None
                else "an unknown offset"
            )
            parts.append(
                f"{pair['cases']} cases crossed GPUs ({where}): by the calibration panels the "
                f"candidate's GPU differs by {span} (per-kernel scatter "
                f"{fit.get('scatter', 0) * 100:.2f}%); that offset is divided out and its "
                "uncertainty added to each interval"
            )
        else:
            parts.append(
                f"{pair['cases']} cases crossed GPUs ({where}) with no calibration panel on "
                "both sides: they are not judged"
            )
    return "; ".join(parts) + "."


def _panel_text(side: dict[str, Any]) -> str:
    panel = side.get("panel")
    if not panel:
        return "none"
    seconds = panel.get("device_seconds")
    cost = f", {seconds:.1f} device s" if isinstance(seconds, (int, float)) else ""
    n = len(panel.get("devices") or [])
    return f"{panel.get('kernels')} kernels x {panel.get('runs')} runs on {n} GPU(s){cost}"


def _provenance_rows(base: dict[str, Any], cand: dict[str, Any]) -> list[dict[str, Any]]:
    def dev(side: dict[str, Any], key: str) -> str:
        return str((side.get("device") or {}).get(key) or "–")

    def ver(side: dict[str, Any], key: str) -> str:
        return str((side.get("versions") or {}).get(key) or "–")

    def img(side: dict[str, Any]) -> str:
        image = side.get("image") or {}
        return str(image.get("digest") or image.get("ref") or "none (local)")

    rows: list[tuple[str, Callable[[dict[str, Any]], object]]] = [
        ("run id", lambda s: s.get("run_id") or "–"),
        ("status", lambda s: s.get("status") or "–"),
        ("git SHA", lambda s: s.get("git_sha") or "–"),
        (
            "backend",
            lambda s: f"{s.get('backend')} ({s.get('framework')} {s.get('framework_version')})",
        ),
        ("device", lambda s: dev(s, "name")),
        ("device UUID", lambda s: dev(s, "uuid")),
        ("calibration panel", _panel_text),
        ("driver / CUDA", lambda s: f"{dev(s, 'driver')} / {dev(s, 'cuda')}"),
        ("torch", lambda s: ver(s, "torch")),
        ("vLLM", lambda s: ver(s, "vllm")),
        ("FlashInfer", lambda s: ver(s, "flashinfer")),
        ("image", img),
        ("collector hash", lambda s: s.get("collector_hash") or "–"),
        ("plan hash", lambda s: f"{s.get('plan_hash')} ({s.get('case_set')})"),
        ("protocol", lambda s: _protocol_text(s.get("protocol"))),
        ("started", lambda s: s.get("started_at") or "–"),
    ]
    return [{"name": name, "base": fn(base), "cand": fn(cand)} for name, fn in rows]


def _protocol_text(protocol: dict[str, Any] | None) -> str:
    if not protocol:
        return "–"
    return f"{protocol.get('runs')} runs x {protocol.get('samples')} samples"


def reproduce_commands(comparison: dict[str, Any]) -> str:
    lines = ["# from a checkout of this bot: make setup && . .venv/bin/activate"]
    outs = []
    for side in ("baseline", "candidate"):
        command = [str(c) for c in comparison[side].get("command") or []]
        if command:
            lines.append(f"# {side}")
            lines.append(shlex.join(command))
            outs.append(command[command.index("--out") + 1] if "--out" in command else side)
        else:
            outs.append(f"{side.upper()}_RUN")
    lines.append(f"collectbot compare {shlex.join(outs)} --out cmp")
    lines.append("collectbot render cmp --out comment.md")
    return "\n".join(lines)


@dataclass
class RenderOptions:
    head_sha: str | None = None
    artifacts_url: str | None = None
    # Where the HTML report is served (an https URL; a relative path for local files).
    report_url: str | None = None
    # Where the store's `collectbot site` is served (https): trends link to case pages.
    site_url: str | None = None
    top: int = 10
    detail_rows: int = 200
    max_groups: int = 50
    tracebacks: int = 5
    limit: int = GITHUB_COMMENT_LIMIT
    # Marker fields for a run whose record does not say (it died before writing one).
    backend: str | None = None
    gpu: str | None = None
    run_id: str | None = None
    started_at: str | None = None
    # "Since the previous run of this PR" (bot/github/pull_history.py summarise); None: none.
    since_previous: dict[str, Any] | None = None


def _since_context(since: dict[str, Any] | None, rows: int) -> dict[str, Any] | None:
    """The PR's previous run against this one: groups fixed and new, latencies moved."""
    if since is None:
        return None
    moved = since["moved"]
    return {
        "run": since["previous_run_id"],
        "sha": since["previous_sha"][:12],
        "fixed": since["fixed"][:rows],
        "new": since["new"][:rows],
        "omitted": max(0, len(since["fixed"]) - rows) + max(0, len(since["new"]) - rows),
        "line": (
            f"{since['matched']} cases matched: {since['regressed']} slower, "
            f"{since['improved']} faster since that run."
        ),
        "moved": [_case_row(c) for c in moved[:rows]],
        "moved_omitted": max(0, since["regressed"] + since["improved"] - min(rows, len(moved))),
    }


def _context(comparison: dict[str, Any], opts: RenderOptions) -> dict[str, Any]:
    verdict = comparison["verdict"]
    base, cand = comparison["baseline"], comparison["candidate"]
    latency = comparison["latency"]
    cases = latency["cases"]
    regressed = sorted(
        (c for c in cases if c["verdict"] == stats.REGRESSED), key=lambda c: -c["ratio"]
    )
    improved = sorted(
        (c for c in cases if c["verdict"] == stats.IMPROVED), key=lambda c: c["ratio"]
    )
    shown = {c["key"] for c in regressed[: opts.top]} | {c["key"] for c in improved[: opts.top]}
    others = sorted(
        (c for c in cases if c["verdict"] != stats.SAME and c["key"] not in shown),
        key=lambda c: -abs(math.log(c["ratio"])) if c["ratio"] and c["ratio"] > 0 else 0,
    )
    fg = comparison["failure_groups"]
    budget = opts.max_groups
    new, persisting, resolved = fg["new"][:budget], [], []
    budget -= len(new)
    persisting = fg["persisting"][: max(0, budget)]
    budget -= len(persisting)
    resolved = fg["resolved"][: max(0, budget)]
    omitted = sum(len(fg[k]) for k in ("new", "persisting", "resolved")) - (
        len(new) + len(persisting) + len(resolved)
    )
    summary = latency["summary"]
    v = summary["verdicts"]
    latency_line = (
        f"{summary['matched']} cases matched "
        f"({summary['added']} added, {summary['removed']} removed): "
        f"{v['regressed']} regressed, {v['improved']} improved, {v['inconclusive']} inconclusive, "
        f"{v['same']} unchanged."
    )
    confirmation = comparison.get("confirmation") or {}
    if confirmation.get("performed"):
        latency_line += (
            f" Re-measured in a paired confirmation round: {confirmation.get('remeasured', 0)} "
            f"cases; {confirmation.get('confirmed', 0)} verdicts confirmed, "
            f"{confirmation.get('overturned', 0)} not replicated, "
            f"{confirmation.get('resolved', 0)} inconclusive resolved."
        )
    elif v["regressed"] or v["improved"] or v["inconclusive"]:
        latency_line += " Verdicts are from one pass (no confirmation round)."
    if matched := summary.get("level_matched"):
        latency_line += (
            f" {matched} {'case sat' if matched == 1 else 'cases sat'} on placement levels "
            "(buffer sets on discrete levels, mixed inside runs) and "
            f"{'was' if matched == 1 else 'were'} compared level by level."
        )
    if summary.get("size_only"):
        latency_line += (
            f" {summary['size_only']} cases had no samples on one side and were judged by size "
            f"alone (±{comparison['settings']['size_only_threshold'] * 100:.0f}%)."
        )
    coverage = []
    for op, row in comparison["coverage"]["ops"].items():
        c = row["cand"] or {}
        coverage.append(
            {
                "op": op,
                "planned": c.get("planned", 0),
                "attempted": c.get("attempted", 0),
                "rows": c.get("rows", 0),
                "failed": c.get("failed", 0),
                "missing": row["missing_count"],
                "status": row["status"],
                "status_icon": ICONS.get(row["status"], "✅"),
            }
        )
    base_gpus, cand_gpus = side_gpus(comparison)
    history = comparison.get("history")
    if history and not history.get("cases") and not history.get("skipped"):
        history = None  # no changed case has enough history: nothing to show
    return {
        "marker": Markup(marker_for(comparison, opts.head_sha).render()),
        "icon": ICONS[verdict["level"]],
        "title": f"collectbot: {verdict['headline']}",
        **header_lines(comparison, opts),
        "reasons": verdict["reasons"],
        "warnings": comparison.get("warnings", []),
        "groups": {
            "new": new,
            "persisting": persisting,
            "resolved": resolved,
            "omitted": omitted,
            "new_with_traceback": [g for g in new[: opts.tracebacks] if g.get("traceback")],
        },
        "coverage": coverage,
        "coverage_findings": comparison["coverage"]["findings"],
        "latency_line": latency_line,
        "settings_line": md_text(settings_line(comparison["settings"])),
        "settings_source": comparison.get("settings_source"),
        "ci_label": f"{comparison['settings']['confidence'] * 100:.0f}% CI",
        "history": md_text(line, limit=1000) if (line := history_line(history)) else None,
        "regressions": [_case_row(c, history, opts.site_url) for c in regressed[: opts.top]],
        "improvements": [_case_row(c, history, opts.site_url) for c in improved[: opts.top]],
        "group_rows": [
            {
                "op": g["op"],
                "dtype": g["dtype"],
                "kernel": g["kernel_source"],
                "cases": g["cases"],
                "change": fmt_change(g["geomean"]),
                "ci": f"[{fmt_change(g['lo'])}, {fmt_change(g['hi'])}]",
                "regressed": g["verdicts"]["regressed"],
                "improved": g["verdicts"]["improved"],
                "inconclusive": g["verdicts"]["inconclusive"],
            }
            for g in latency["groups"][: opts.detail_rows]
        ],
        "chart": Markup(chart) if (chart := ratio_chart(cases, latency.get("histogram"))) else None,
        "other_cases": [_case_row(c, history, opts.site_url) for c in others[: opts.detail_rows]],
        "other_omitted": max(0, len(others) - opts.detail_rows),
        "dispatch": [
            {
                "op": d["op"],
                "from": d["from"],
                "to": d["to"],
                "count": d["count"],
                "sample": d["sample_cases"][0],
            }
            for d in latency["dispatch_changes"][: opts.detail_rows]
        ],
        "outliers": _outlier_context(latency.get("outliers"), opts.detail_rows),
        "drift": _drift_context(latency.get("drift"), opts.detail_rows),
        "since": _since_context(opts.since_previous, min(opts.detail_rows, opts.max_groups)),
        "anomalies": [
            {"side": side, **a}
            for side, key in (("baseline", "base"), ("candidate", "cand"))
            for a in comparison["anomalies"][key]
        ][: opts.detail_rows],
        "provenance": [
            *_provenance_rows(base, cand),
            {"name": "measured on (GPUs)", "base": base_gpus, "cand": cand_gpus},
        ],
        # Escaped here, with room for several GPU pairs (UUIDs and names come from run.json).
        "gpu_line": md_text(line, limit=1500) if (line := gpu_line(comparison)) else None,
        "reproduce": reproduce_commands(comparison),
        "artifacts_url": md_url(opts.artifacts_url),
        "version": __version__,
        "schema_version": comparison["schema_version"],
        "baseline_kind": baseline_words(comparison["baseline"].get("kind", "run"))
        + (" (paired)" if comparison["baseline"].get("paired") else ""),
        "cand_status": cand.get("status") or "complete",
        "cand_planned": (cand.get("counts") or {}).get("planned", "?"),
        "cand_attempted": (cand.get("counts") or {}).get("attempted", "?"),
        "cand_failed": (cand.get("counts") or {}).get("failed", "?"),
    }


def history_line(history: dict[str, Any] | None) -> str | None:
    """What the history column is, and that it annotates (None without a history)."""
    if not history:
        return None
    runs = len(history.get("runs") or [])
    within = sum((history.get("within") or {}).values())
    line = (
        f"History: each changed case's latency over the last {runs} stored baselines "
        f"(oldest first; → the candidate). Changed cases within their own history: {within} "
        "(the case has been there before; it can still be a real change: history annotates, "
        "it never changes a verdict)."
    )
    if history.get("skipped"):
        line += f" {len(history['skipped'])} stored runs failed their checksums and were left out."
    return line


def _outlier_context(outliers: dict[str, Any] | None, rows: int) -> dict[str, Any] | None:
    """The cases with many outlying samples, for the comment (None: nothing to show)."""
    if not outliers or not outliers.get("cases_with_many"):
        return None
    return {
        "rule": f"more than {outliers['distance'] * 100:g}% from the case's median",
        "share": f"{outliers['many_share'] * 100:g}%",
        "count": outliers["cases_with_many"],
        "omitted": max(0, outliers["cases_with_many"] - min(rows, len(outliers["cases"]))),
        "rows": [
            {
                "label": c["key"],
                "side": "baseline" if c["side"] == "base" else "candidate",
                "outliers": c["outliers"],
                "samples": c["samples"],
                "share": f"{c['outliers'] / max(1, c['samples']) * 100:.0f}%",
            }
            for c in outliers["cases"][:rows]
        ],
    }


def _drift_context(drift: dict[str, Any] | None, rows: int) -> dict[str, Any] | None:
    """The cases whose runs trended on a side, for the comment (None: nothing to show)."""
    if not drift or not drift.get("cases_drifting"):
        return None
    return {
        "count": drift["cases_drifting"],
        "alpha": f"{drift['alpha']:g}",
        "min": f"{drift['min'] * 100:g}%",
        "omitted": max(0, len(drift["cases"]) - rows),
        "rows": [
            {
                "label": c["key"],
                "side": "baseline" if c["side"] == "base" else "candidate",
                "drift": f"{c['drift'] * 100:+.1f}%",
                "runs": c["runs"],
                "verdict": c["verdict"],
            }
            for c in drift["cases"][:rows]
        ],
    }


def _fit(
    template_name: str, make: Callable[[RenderOptions], dict[str, Any]], opts: RenderOptions
) -> str:
    """Render, halving the detail budgets until the body fits; the head is never trimmed."""
    template = _env().get_template(template_name)
    current = RenderOptions(**opts.__dict__)
    while True:
        body = template.render(**make(current))
        if len(body) <= current.limit:
            return body
        if current.detail_rows == 0 and current.max_groups == 0 and current.tracebacks == 0:
            break
        current.detail_rows //= 2
        current.max_groups //= 2
        current.tracebacks = 0 if current.tracebacks <= 1 else current.tracebacks // 2
        current.top = max(3, current.top // 2) if current.detail_rows else 3
    # Last resort: keep the head (marker, verdict, reasons) and cut the rest.
    note = "\n\n_(comment truncated to GitHub's size limit; see the artifacts)_\n"
    return body[: current.limit - len(note)] + note


def render_comment(comparison: dict[str, Any], opts: RenderOptions | None = None) -> str:
    """The comment markdown, trimmed to GitHub's size limit; the verdict always survives."""
    return _fit("comment.md.j2", lambda o: _context(comparison, o), opts or RenderOptions())


def run_marker(meta: dict[str, Any], opts: RenderOptions) -> Marker:
    device = meta.get("device") if isinstance(meta.get("device"), dict) else {}
    return Marker(
        backend=str(meta.get("backend") or opts.backend or "unknown"),
        gpu=str((device or {}).get("name") or opts.gpu or "unknown"),
        run_id=str(meta.get("run_id") or opts.run_id or ""),
        head_sha=str(opts.head_sha or meta.get("git_sha") or ""),
        started_at=bounded_start(
            str(
                meta.get("started_at")
                or opts.started_at
                or datetime.now(UTC).isoformat(timespec="seconds")
            )
        ),
    )


def _known(*values: object) -> str:
    """The values that are known, joined by spaces ('' when none is: never 'None')."""
    return " ".join(str(v) for v in values if v not in (None, ""))


def _run_context(info: Any, opts: RenderOptions) -> dict[str, Any]:
    from bot.render.run_summary import run_verdict

    level, headline, reasons = run_verdict(info)
    meta = info.meta
    groups = info.groups[: opts.max_groups]
    ops = []
    for op, row in sorted(info.per_op.items()):
        ops.append(
            {
                "op": op,
                "planned": row.get("planned", "–"),
                "attempted": row.get("attempted", "–"),
                "ok": row.get("ok", row.get("rows", "–")),
                "failed": row.get("failed", "–"),
            }
        )
    device = (meta.get("device") if isinstance(meta.get("device"), dict) else None) or {}
    framework = _known(meta.get("framework"), meta.get("framework_version"))
    backend = _known(meta.get("backend") or opts.backend)
    provenance = [
        ("run id", meta.get("run_id")),
        ("status", info.status),
        ("git SHA", opts.head_sha or meta.get("git_sha")),
        ("backend", backend + (f" ({framework})" if backend and framework else framework)),
        ("device", device.get("name") or opts.gpu),
        ("driver / CUDA", " / ".join(_known(device.get(k)) or "–" for k in ("driver", "cuda"))),
        (
            "image",
            (meta.get("image") or {}).get("digest")
            if isinstance(meta.get("image"), dict)
            else None,
        ),
        ("plan hash", meta.get("plan_hash")),
        ("started", meta.get("started_at")),
        ("finished", meta.get("finished_at")),
        ("record", str(info.path)),
    ]
    command = [str(c) for c in meta.get("command") or []]
    return {
        "marker": Markup(run_marker(meta, opts).render()),
        "compared": Markup(
            _side_ref("head", opts.head_sha or meta.get("git_sha"), None, meta.get("run_id"))
            + md_text(
                f" · {_known(backend, ', '.join(meta.get('ops') or [])) or 'unknown backend'} "
                f"on {device.get('name') or opts.gpu or 'unknown GPU'}"
            )
        ),
        "links": Markup(" · ".join(links)) if (links := _links(opts)) else None,
        "icon": ICONS[level],
        "level": level,
        "title": f"collectbot: {headline}",
        "reasons": reasons,
        "stage": info.stage,
        "error": info.error,
        "problem": info.problem,
        "status": info.status,
        "ops": ops,
        "groups": groups,
        "groups_omitted": max(0, len(info.groups) - len(groups)),
        "with_traceback": [g for g in groups[: opts.tracebacks] if g.get("traceback")],
        "log_tail": info.log_tail if opts.detail_rows else None,
        "provenance": [{"name": n, "value": v or "–"} for n, v in provenance],
        "reproduce": shlex.join(command) if command else None,
        "artifacts_url": md_url(opts.artifacts_url),
        "version": __version__,
    }


def render_run_comment(info: Any, opts: RenderOptions | None = None) -> str:
    """The comment for a run that cannot be compared: what failed, what was measured."""
    return _fit("run.md.j2", lambda o: _run_context(info, o), opts or RenderOptions())
