"""`collectbot compare`: two run records in, comparison.json out."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bot.cli import app
from bot.errors import one_line_errors


@app.command()
@one_line_errors
def compare(
    base_run: Annotated[Path, typer.Argument(help="Baseline run record directory.")],
    cand_run: Annotated[Path, typer.Argument(help="Candidate run record directory.")],
    out: Annotated[Path, typer.Option("--out", help="Directory for comparison.json.")],
    min_effect: Annotated[
        float,
        typer.Option(min=0.0, help="Smallest relative change that can be a verdict (0.01 = 1%)."),
    ] = 0.01,
    noise_mult: Annotated[
        float,
        typer.Option(
            min=0.0, help="A case's threshold is at least this many times its run-to-run noise."
        ),
    ] = 2.0,
    alpha: Annotated[
        float, typer.Option(min=0.0001, max=0.5, help="False discovery rate across cases.")
    ] = 0.05,
    size_only_threshold: Annotated[
        float,
        typer.Option(min=0.0, help="Threshold for rows without samples (e.g. imported tables)."),
    ] = 0.05,
    baseline_kind: Annotated[
        str,
        typer.Option(
            help="What the baseline is, as the comment says it: run, previous-run, merge-base."
        ),
    ] = "run",
) -> None:
    """Compare two run records: failure groups, coverage and per-case latency with intervals."""
    from bot.compare.comparison import compare_records, write_comparison
    from bot.compare.stats import Settings
    from collector.record import read_record

    settings = Settings(
        alpha=alpha,
        min_effect=min_effect,
        noise_mult=noise_mult,
        size_only_threshold=size_only_threshold,
    )
    result = compare_records(read_record(base_run), read_record(cand_run), settings, baseline_kind)
    path = write_comparison(result, out)
    typer.echo(f"{result['verdict']['level']}: {result['verdict']['headline']}")
    typer.echo(str(path))
