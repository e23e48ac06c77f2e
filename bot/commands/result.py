"""`collectbot result make|verify`: the result bundle the trusted publisher reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from bot.commands.options import PlanFile, WorkflowRun
from bot.errors import one_line_errors
from bot.options import option_group

result_app = typer.Typer(
    name="result",
    help="The result bundle: what an untrusted collection job hands to the trusted publisher "
    "(data only, checksummed; the publisher renders the comment itself).",
    no_args_is_help=True,
)


@result_app.command("make")
@one_line_errors
@option_group(WorkflowRun, "workflow_run")
def make(
    out: Annotated[Path, typer.Option("--out", help="Bundle directory to write (new or empty).")],
    plan: PlanFile,
    comparison: Annotated[
        Path | None, typer.Option(help="A comparison directory (or comparison.json) to publish.")
    ] = None,
    run: Annotated[
        Path | None, typer.Option(help="A run record that could not be compared (or what is left).")
    ] = None,
    stage: Annotated[str | None, typer.Option(help="The stage that failed, if one did.")] = None,
    error: Annotated[str | None, typer.Option(help="What failed, in words.")] = None,
    log: Annotated[
        Path | None, typer.Option(help="A log whose last lines go into the bundle.")
    ] = None,
    workflow_run: WorkflowRun = WorkflowRun(),
    repo: Annotated[str | None, typer.Option(help="owner/name (default: the plan's).")] = None,
    head_sha: Annotated[
        str | None, typer.Option(help="The commit the run measured (default: the plan's).")
    ] = None,
) -> None:
    """Write a result bundle: a skipped plan, a comparison, or a run that failed."""
    from bot.result_bundle import make_result

    path = make_result(
        out,
        plan_path=plan,
        **workflow_run.config(),
        repo=repo,
        head_sha=head_sha,
        comparison=comparison,
        run=run,
        stage=stage,
        error=error,
        log=log,
    )
    meta = json.loads(path.read_text())
    typer.echo(f"{meta['kind']} bundle for run {meta['workflow_run_id']}: {out}")


@result_app.command("verify")
@one_line_errors
def verify(
    bundle: Annotated[Path, typer.Argument(help="Result bundle directory.")],
    event: Annotated[
        Path | None,
        typer.Option(help="A workflow_run payload the bundle must belong to (repo, run, head)."),
    ] = None,
) -> None:
    """Check a bundle as the publisher does: checksums, sizes, shapes, and its run."""
    from bot.result_bundle import load_result

    loaded = load_result(bundle)
    if event is not None:
        from bot.github.deliver import check_binding
        from bot.github.events import load_payload, parse_workflow_run_event

        check_binding(loaded, parse_workflow_run_event(load_payload(event), str(event)))
    typer.echo(
        f"ok: {loaded.kind} bundle of {loaded.meta['repo']} run {loaded.meta['workflow_run_id']}"
        f" at {loaded.head_sha[:12]}, {len(loaded.meta['files'])} files"
    )
