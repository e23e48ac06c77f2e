"""`collectbot demo`: the embedded default on CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bot.errors import one_line_errors
from collector.errors import UserError


@one_line_errors
def demo(
    out: Annotated[
        Path, typer.Option("--out", help="Directory for both runs, the comparison and the comment.")
    ] = Path("demo-out"),
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
) -> None:
    """Collect a baseline and a canary candidate on CPU, compare and render.

    Prints the verdict's headline, then the paths of the comment and of the HTML report.
    """
    from bot.demo import run_demo

    if out.exists() and any(out.iterdir()):
        raise UserError(f"{out}: not empty (choose a new --out or remove it)")
    result = run_demo(out, quiet=quiet)
    typer.echo(result.headline)
    typer.echo(f"comment: {result.comment}")
    typer.echo(f"report:  {result.report}")
