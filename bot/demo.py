"""The embedded default: a baseline and a canary candidate on CPU, compared and rendered.

Both collections are driven round by round in alternation (A B B A ...), the schedule that
keeps drift from looking like a change (docs/statistics.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from bot.collect_command import collect_command
from bot.compare.comparison import Baseline, compare_runs
from bot.compare.stats import Settings
from bot.render.comment import render_comment
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
DEMO_SETTINGS = Settings(min_effect=0.05)
DEMO_PROTOCOL = Protocol(runs=6, samples=7, warmup=2, target_sample_ms=4.0, idle_ratio=0.0)


@dataclass
class DemoResult:
    out: Path
    comment: Path
    comparison: Path


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
    with progress_bar(console) as progress:
        task = progress.add_task(
            "demo: baseline and canary candidate, alternating",
            total=base.total_tasks + cand.total_tasks,
            failures=0,
        )
        for run in range(DEMO_PROTOCOL.runs):
            first, second = (base, cand) if run % 2 == 0 else (cand, base)
            for collection in (first, second):
                collection.run_round(run, progress, task)
    base.finish("complete")
    cand.finish("complete")
    result = compare_runs(
        read_record(out / "base-run"),
        read_record(out / "cand-run"),
        DEMO_SETTINGS,
        Baseline(kind="explicit-run", paired=True),
    )
    cmp_path = result.write(out / "comparison")
    comment = out / "comment.md"
    body = render_comment(result.data)
    write_rendered(comment, body, comparison_meta(result.data, body, None))
    return DemoResult(out=out, comment=comment, comparison=cmp_path)
