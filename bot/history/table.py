"""The history in a terminal: one row per case, then the steps grouped by commit.

Every text from a record (case keys, kernels, messages, versions) goes into rich `Text`
after `clean`, so none of it is read as markup or reaches the terminal as an escape.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from bot.history.changepoints import ChangePoint, CommitGroup
from bot.history.core import History
from bot.history.export import case_summary, half_width
from bot.render.comment import case_label, fmt_change, fmt_ms
from bot.render.sanitize import clean
from bot.render.sparkline import sparkline


def _t(text: object, limit: int = 80) -> Text:
    return Text(clean(text, limit).replace("\n", " "))


def print_history(
    history: History,
    points: list[ChangePoint],
    groups: list[CommitGroup],
    console: Console,
    limit: int | None = None,
) -> None:
    runs = history.runs
    console.print(_t(f"History of {history.series.label}: {len(runs)} runs", 300))
    if runs:
        first, last = runs[0], runs[-1]
        console.print(
            _t(
                f"runs 1-{last.index}: {first.started_at or first.stored_at} .. "
                f"{last.started_at or last.stored_at}; commits {first.commit} .. {last.commit}",
                300,
            )
        )
    for skipped in history.skipped:
        console.print(_t(skipped["reason"], 300), style="yellow")
    steps: dict[int, list[ChangePoint]] = {}
    for cp in points:
        steps.setdefault(cp.case, []).append(cp)
    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    for name, justify in (
        ("case", "left"),
        ("latest", "right"),
        ("±95%", "right"),
        ("trend (runs 1..N)", "left"),
        ("range", "right"),
        ("kernel", "left"),
        ("failed", "right"),
        ("steps", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    rows = range(len(history.cases)) if limit is None else range(min(limit, len(history.cases)))
    for row in rows:
        case = history.cases[row]
        summary = case_summary(history, row)
        latest = summary["latest"]
        share = half_width(latest)
        half = "–" if share is None else f"{share * 100:.1f}%"
        spread = summary["range"]
        kernels = summary["kernels"]
        kernel = (latest or {}).get("kernel") or (kernels[-1] if kernels else "–")
        if len(kernels) > 1:
            kernel = f"{kernel} (+{len(kernels) - 1} other)"
        failed = [f is not None for f in history.failure[row]]
        table.add_row(
            _t(case_label({"op": case.op, "params": case.params}) if case.params else case.key),
            fmt_ms(latest["ms"]) if latest else "–",
            half,
            sparkline(history.ms[row], failed),
            f"{(spread[1] - spread[0]) * 100:.1f}%" if spread else "–",
            _t(kernel, 40),
            f"{sum(failed)}/{len(runs)}" if any(failed) else "",
            _t(", ".join(f"{fmt_change(cp.ratio)} at run {cp.run}" for cp in steps.get(row, []))),
        )
    console.print(table)
    if limit is not None and len(history.cases) > limit:
        console.print(_t(f"... {len(history.cases) - limit} more cases (--limit)"))
    if not groups:
        console.print("No change points.")
        return
    console.print(Text("Change points by commit", style="bold"))
    for group in groups:
        json_group = group.to_json()
        span = f"{(group.previous_commit or '?')[:12]}..{(group.commit or '?')[:12]}"
        console.print(
            _t(
                f"run {group.run}: {span} - {len(group.changes)} cases "
                f"({json_group['regressed']} slower, "
                f"{json_group['improved']} faster)",
                300,
            )
        )
        for cp in group.changes[:20]:
            console.print(
                _t(
                    f"  {fmt_change(cp.ratio)} {cp.key} ({fmt_ms(cp.before_ms)} -> "
                    f"{fmt_ms(cp.after_ms)}, noise {cp.noise * 100:.1f}%)",
                    300,
                )
            )
        if len(group.changes) > 20:
            console.print(_t(f"  ... {len(group.changes) - 20} more"))
