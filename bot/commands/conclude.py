"""`collectbot conclude`: the collection workflow's last job, in one command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bot.commands.options import ConcludeBaseline, ConcludeReport, PlanFile, WorkflowRun
from bot.errors import one_line_errors
from bot.options import option_group


@one_line_errors
@option_group(WorkflowRun, "workflow_run")
@option_group(ConcludeBaseline, "baseline")
@option_group(ConcludeReport, "report")
def conclude(
    plan: PlanFile,
    out: Annotated[Path, typer.Option("--out", help="Directory to write (new or empty).")],
    shards_dir: Annotated[
        Path | None,
        typer.Option(help="Directory whose subdirectories are the shard records (any missing)."),
    ] = None,
    shards: Annotated[
        int | None, typer.Option(min=1, help="How many shards the plan was cut into.")
    ] = None,
    baseline: ConcludeBaseline = ConcludeBaseline(),
    workflow_run: WorkflowRun = WorkflowRun(),
    report: ConcludeReport = ConcludeReport(),
    config: Annotated[
        Path | None,
        typer.Option(
            help="Thresholds and statistics settings (YAML); default: the base branch's "
            "copy that the plan carries, else the defaults (never the checkout's own file)."
        ),
    ] = None,
) -> None:
    """Merge the shards (or take a campaign), compare with the baseline, render, bundle.

    A stage that fails becomes the comment (which stage, and why); the exit code is 0 when a
    bundle was written, so the publisher always has something to say.
    """
    from bot.conclude import ConcludeOptions
    from bot.conclude import conclude as run_conclude
    from bot.render.sanitize import clean

    reporting = report.config()
    found = sorted(p for p in shards_dir.iterdir() if p.is_dir()) if shards_dir else []
    result = run_conclude(
        ConcludeOptions(
            plan=plan,
            out=out,
            shards=found,
            shard_count=shards,
            **baseline.config(),
            **workflow_run.config(),
            **reporting,
            config=config,
        )
    )
    for note in result.notes:
        typer.echo(clean(note, 2000))
    typer.echo(clean(f"{result.level}: {result.headline}", 600))
    if result.error:
        typer.echo(clean(f"{result.stage or 'collection'} failed: {result.error}", 2000))
    typer.echo(str(result.bundle))
