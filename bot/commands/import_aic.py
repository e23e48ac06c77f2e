"""`collectbot import-aic`: the field's perf tables as a run record (a baseline without samples)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from bot.errors import one_line_errors


@one_line_errors
def import_aic(
    tables: Annotated[
        list[Path],
        typer.Argument(help="Perf tables (<op>_perf.parquet) of one framework version and GPU."),
    ],
    out: Annotated[Path, typer.Option("--out", help="Run record directory to write (new).")],
    meta: Annotated[
        list[Path] | None,
        typer.Option(
            help="collection_meta.yaml sidecar(s); default: found beside the tables by name."
        ),
    ] = None,
) -> None:
    """Read aiconfigurator-style perf tables as a run record, so they can be a baseline.

    Rows carry one latency each and no samples: the comparison judges them by size alone and
    says so. Prints the record's directory.
    """
    from bot.importers.aic import import_aic as run_import

    path = run_import(tables, out, meta or [], command=["collectbot", *sys.argv[1:]])
    typer.echo(str(path))
