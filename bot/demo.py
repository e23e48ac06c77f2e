"""The embedded default: a baseline and a canary candidate on CPU, compared and rendered.

Both collections are driven case by case, each case's two sides measured back to back in
alternating order: the schedule that keeps drift from looking like a change
(docs/statistics.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from bot.collect_command import collect_command
from bot.compare.comparison import Baseline, Comparison, compare_runs, load_cases
from bot.compare.stats import Settings
from bot.render.comment import RenderOptions, render_comment
from bot.render.html import render_html_report
from bot.render.rendered import comparison_meta, write_rendered
from collector.canary import Canary
from collector.caseplan import CaseSelector
from collector.engine import CollectConfig, Collection, progress_bar
from collector.record import read_record
from collector.timing import Protocol

# The canary: these cases run 1.5x slower in the candidate, and this one case raises.
DEMO_SLOW = "gemm_dtype=bfloat16,m=128"
DEMO_FACTOR = 1.5
DEMO_FAIL = "gemm_dtype=float32,m=32,n=256,k=512"
# A CPU in a shared VM is noisier than a GPU: ask for a larger change before calling it one.
DEMO_SETTINGS = Settings(min_effect=0.10)
DEMO_PROTOCOL = Protocol(runs=8, samples=7, warmup=2, target_sample_ms=4.0, idle_ratio=0.0)


@dataclass
class DemoResult:
    out: Path
    comment: Path
    comparison: Path
    report: Path
    headline: str


def collect_alternating(
    base: Collection, cand: Collection, runs: int, console: Console, what: str
) -> None:
    """Both collections case by case, each case's runs alternating A B, B A, ..., each
    collection with its own progress bar, which ends at its total even when adaptive
    stopping ends a case's runs early. Measuring a case's two sides back to back keeps a
    shared machine's slow spells (seconds long) from landing on one side only."""
    keys = [c.key for c in base.plan.cases]
    with progress_bar(console) as progress:
        tasks = {
            id(c): progress.add_task(f"{what}: {name}", total=c.total_tasks, failures=0)
            for c, name in ((base, "baseline"), (cand, "canary candidate"))
        }
        for run in range(runs):
            for i, key in enumerate(keys):
                pair = (base, cand) if (run + i) % 2 == 0 else (cand, base)
                for collection in pair:
                    collection.run_round(run, progress, tasks[id(collection)], only={key})
        for collection in (base, cand):
            progress.update(
                tasks[id(collection)],
                completed=collection.done_tasks(),
                failures=len(collection.state.failures),
            )


def collect_paired(
    base: Collection, cand: Collection, runs: int, console: Console, label: str
) -> Comparison:
    """Both sides collected case by case, finished, and compared as one paired measurement."""
    collect_alternating(base, cand, runs, console, label)
    base.finish("complete")
    cand.finish("complete")
    paired = Baseline(kind="explicit-run", paired=True)
    return compare_runs(read_record(base.out), read_record(cand.out), DEMO_SETTINGS, paired)


def run_demo(out: Path, quiet: bool = False) -> DemoResult:
    base_cfg = CollectConfig(
        out=out / "base-run",
        case_set="demo",
        protocol=DEMO_PROTOCOL,
        quiet=quiet,
    )
    base_cfg.command = collect_command(base_cfg, "base-run")
    canary = Canary(
        slow=CaseSelector.parse(DEMO_SLOW),
        factor=DEMO_FACTOR,
        fail=CaseSelector.parse(DEMO_FAIL),
    )
    cand_cfg = CollectConfig(
        out=out / "cand-run",
        case_set="demo",
        protocol=DEMO_PROTOCOL,
        canary=canary,
        quiet=quiet,
    )
    cand_cfg.command = collect_command(cand_cfg, "cand-run")
    base, cand = Collection(base_cfg), Collection(cand_cfg)
    console = Console(stderr=True, quiet=quiet)
    result = collect_paired(base, cand, DEMO_PROTOCOL.runs, console, "demo")
    cmp_path = result.write(out / "comparison")
    comment = out / "comment.md"
    body = render_comment(result.data, RenderOptions(report_url="report.html"))
    meta = comparison_meta(result.data, body, None)
    write_rendered(comment, body, meta)
    report = out / "report.html"
    report.write_text(render_html_report(result.data, load_cases(cmp_path, result.data)))
    return DemoResult(
        out=out, comment=comment, comparison=cmp_path, report=report, headline=meta.headline
    )
