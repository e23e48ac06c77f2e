"""`collectbot render`: the evidence comment (and its sidecar) and the HTML report.

Two inputs: a comparison (`CMP_DIR`), or a run alone (`--run RUN_DIR`) for a run that
failed, stopped early or has nothing to compare with; the latter reads whatever the run
left, even no record at all, and says what failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bot.errors import one_line_errors
from collector.errors import UserError


@one_line_errors
def render(
    cmp_dir: Annotated[
        Path | None,
        typer.Argument(help="Directory holding comparison.json (or the file); or use --run."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Markdown comment to write (its sidecar .json goes beside it)."),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option("--html", help="Self-contained HTML report to write (tables and plots)."),
    ] = None,
    run: Annotated[
        Path | None,
        typer.Option(
            "--run", help="Render from this run directory alone (failed, partial or unpaired)."
        ),
    ] = None,
    head_sha: Annotated[str | None, typer.Option(help="PR head SHA for the hidden marker.")] = None,
    artifacts_url: Annotated[str | None, typer.Option(help="Link to the full artifacts.")] = None,
    report_url: Annotated[
        str | None,
        typer.Option(help="Link to the HTML report (https URL, or a file name beside OUT)."),
    ] = None,
    site_url: Annotated[
        str | None,
        typer.Option(
            help="Where the store's `collectbot site` is served (https): the trends link to "
            "each case's page."
        ),
    ] = None,
    stage: Annotated[
        str | None, typer.Option(help="--run: the stage that failed (image, collect, compare...).")
    ] = None,
    error: Annotated[
        str | None, typer.Option(help="--run: what failed, in words (shown as a code block).")
    ] = None,
    log: Annotated[
        Path | None, typer.Option(help="--run: a log file whose last lines the comment shows.")
    ] = None,
    backend: Annotated[
        str | None, typer.Option(help="--run: backend for the marker when the run left no record.")
    ] = None,
    gpu: Annotated[
        str | None, typer.Option(help="--run: GPU name for the marker when the run left no record.")
    ] = None,
    run_id: Annotated[
        str | None, typer.Option(help="--run: run id for the marker when the run left no record.")
    ] = None,
    started_at: Annotated[
        str | None,
        typer.Option(help="--run: ISO start time for the marker when the run left no record."),
    ] = None,
) -> None:
    """Render the evidence comment (under GitHub's 65,536-character limit) and/or HTML report.

    Writes OUT (markdown) and OUT with a .json suffix (verdict and marker, for publish).
    """
    from bot.render.comment import (
        RenderOptions,
        check_site_url,
        render_comment,
        render_run_comment,
    )
    from bot.render.rendered import comparison_meta, run_meta, write_rendered

    if out is None and html is None:
        raise UserError("give --out (markdown comment), --html (report) or both")
    if (cmp_dir is None) == (run is None):
        raise UserError("give either a comparison directory or --run RUN_DIR (not both)")
    if log is not None and not log.is_file():
        raise UserError(f"{log}: log file not found")
    check_site_url(site_url)
    opts = RenderOptions(
        head_sha=head_sha,
        artifacts_url=artifacts_url,
        report_url=report_url,
        site_url=site_url,
        backend=backend,
        gpu=gpu,
        run_id=run_id,
        started_at=started_at,
    )
    if run is not None:
        from bot.render.run_summary import load_run_info

        info = load_run_info(run, stage=stage, error=error, log=log)
        if out is not None:
            body = render_run_comment(info, opts)
            write_rendered(out, body, run_meta(info, body, artifacts_url))
            typer.echo(str(out))
        if html is not None:
            from bot.render.html import render_run_html_report

            html.parent.mkdir(parents=True, exist_ok=True)
            html.write_text(render_run_html_report(info))
            typer.echo(str(html))
        return
    from bot.compare.comparison import load_cases, load_comparison

    assert cmp_dir is not None
    comparison = load_comparison(cmp_dir)
    if out is not None:
        body = render_comment(comparison, opts)
        write_rendered(out, body, comparison_meta(comparison, body, artifacts_url))
        typer.echo(str(out))
    if html is not None:
        from bot.render.html import render_html_report

        html.parent.mkdir(parents=True, exist_ok=True)
        html.write_text(render_html_report(comparison, load_cases(cmp_dir, comparison)))
        typer.echo(str(html))
