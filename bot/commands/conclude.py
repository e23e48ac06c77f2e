"""`collectbot conclude`: the collection workflow's last job, in one command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bot.commands.options import PlanFile, WorkflowRun
from bot.errors import one_line_errors
from bot.options import option_group


@one_line_errors
@option_group(WorkflowRun, "workflow_run")
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
    store: Annotated[
        str | None,
        typer.Option(
            envvar="COLLECTBOT_STORE",
            help="Run store holding the baseline (env COLLECTBOT_STORE).",
        ),
    ] = None,
    baseline_ref: Annotated[
        str | None,
        typer.Option(
            help="Compare with the latest stored run under this ref (default: the PR's base "
            "branch; main for a dispatched run)."
        ),
    ] = None,
    campaign: Annotated[
        Path | None,
        typer.Option(help="A paired campaign directory (collectbot campaign --out) instead."),
    ] = None,
    workflow_run: WorkflowRun = WorkflowRun(),
    artifacts_url: Annotated[
        str | None, typer.Option(help="Link to the run's artifacts, for the comment.")
    ] = None,
    site_url: Annotated[
        str | None,
        typer.Option(
            envvar="COLLECTBOT_SITE_URL",
            help="Where the store's `collectbot site` is served (https): the comment's trends "
            "link to each case's page.",
        ),
    ] = None,
    log: Annotated[
        Path | None, typer.Option(help="A log to quote when the run cannot be compared.")
    ] = None,
    error: Annotated[
        str | None,
        typer.Option(help="A failure seen before this step: skip the stages, report it."),
    ] = None,
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
    from bot.render.comment import check_site_url
    from bot.render.sanitize import clean

    check_site_url(site_url or None)
    found = sorted(p for p in shards_dir.iterdir() if p.is_dir()) if shards_dir else []
    result = run_conclude(
        ConcludeOptions(
            plan=plan,
            out=out,
            shards=found,
            shard_count=shards,
            store=store or None,
            baseline_ref=baseline_ref or None,
            campaign=campaign,
            workflow_run_id=workflow_run.id,
            run_attempt=workflow_run.attempt,
            artifacts_url=artifacts_url,
            site_url=site_url or None,
            log=log,
            error=error,
            config=config,
        )
    )
    for note in result.notes:
        typer.echo(clean(note, 2000))
    typer.echo(clean(f"{result.level}: {result.headline}", 600))
    if result.error:
        typer.echo(clean(f"{result.stage or 'collection'} failed: {result.error}", 2000))
    typer.echo(str(result.bundle))
