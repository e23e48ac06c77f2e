"""`collectbot render`: the evidence comment (and its sidecar) and the HTML report.

Two inputs: a comparison (`CMP_DIR`), or a run alone (`--run RUN_DIR`) for a run that
failed, stopped early or has nothing to compare with; the latter reads whatever the run
left, even no record at all, and says what failed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.commands.options import CommentLinks, RunAlone
from bot.errors import one_line_errors
from bot.options import option_group
from collector.errors import UserError

if TYPE_CHECKING:
    from bot.render.rendered import RenderedMeta


@one_line_errors
@option_group(CommentLinks, "links")
@option_group(RunAlone, "alone")
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
    links: CommentLinks = CommentLinks(),
    alone: RunAlone = RunAlone(),
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
    from bot.render.rendered import comparison_meta, run_meta

    if out is None and html is None:
        raise UserError("give --out (markdown comment), --html (report) or both")
    if (cmp_dir is None) == (run is None):
        raise UserError("give either a comparison directory or --run RUN_DIR (not both)")
    if alone.log is not None and not alone.log.is_file():
        raise UserError(f"{alone.log}: log file not found")
    check_site_url(links.site_url)
    opts = RenderOptions(**asdict(links), **alone.marker())
    if run is not None:
        from bot.render.run_summary import load_run_info

        info = load_run_info(run, stage=alone.stage, error=alone.error, log=alone.log)

        def run_comment() -> tuple[str, RenderedMeta]:
            body = render_run_comment(info, opts)
            return body, run_meta(info, body, links.artifacts_url)

        def run_report() -> str:
            from bot.render.html import render_run_html_report

            return render_run_html_report(info)

        _write(out, html, run_comment, run_report)
        return
    from bot.compare.comparison import load_cases, load_comparison

    assert cmp_dir is not None
    comparison = load_comparison(cmp_dir)

    def comment() -> tuple[str, RenderedMeta]:
        body = render_comment(comparison, opts)
        return body, comparison_meta(comparison, body, links.artifacts_url)

    def report() -> str:
        from bot.render.html import render_html_report

        return render_html_report(comparison, load_cases(cmp_dir, comparison))

    _write(out, html, comment, report)


def _write(
    out: Path | None,
    html: Path | None,
    comment: Callable[[], tuple[str, RenderedMeta]],
    report: Callable[[], str],
) -> None:
    """Write OUT (the comment and its sidecar) and HTML (the report), each only if asked for."""
    from bot.render.rendered import write_rendered

    if out is not None:
        body, meta = comment()
        write_rendered(out, body, meta)
        typer.echo(str(out))
    if html is not None:
        html.parent.mkdir(parents=True, exist_ok=True)
        html.write_text(report())
        typer.echo(str(html))
