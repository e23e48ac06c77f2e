"""`collectbot merge`: the shards of one plan become one run record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from bot.errors import one_line_errors


@one_line_errors
def merge(
    shard_dirs: Annotated[
        list[Path],
        typer.Argument(help="Shard run records (collect --shard i/n); unreadable ones reported."),
    ],
    out: Annotated[Path, typer.Option("--out", help="Merged run record directory to write.")],
    shards: Annotated[
        int | None,
        typer.Option(min=1, help="How many shards the plan was cut into (default: the records')."),
    ] = None,
    plan: Annotated[
        Path | None,
        typer.Option(
            help="The unsharded plan (collect --plan-only): check every case's shard and count "
            "a missing shard's cases as planned."
        ),
    ] = None,
    report: Annotated[
        Path | None, typer.Option(help="Write what was merged, missing or duplicate as JSON.")
    ] = None,
    require_all: Annotated[
        bool, typer.Option(help="Exit 1 (after writing the record) when a shard is missing.")
    ] = False,
) -> None:
    """Merge shard records into one run record.

    A missing shard makes the record partial (its cases count as planned, never attempted);
    a shard given twice keeps the better record and reports the other; shards of different
    plans (ops, case set, versions, GPU model, collector code, protocol) are refused.
    """
    from bot.merge import load_plan, merge_shards
    from bot.render.sanitize import clean

    result = merge_shards(
        shard_dirs, out, count=shards, plan=load_plan(plan) if plan is not None else None
    )
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps(result.to_json(), indent=1) + "\n")
    for line in result.lines():
        typer.echo(clean(line, 2000))
    if require_all and result.missing:
        raise typer.Exit(1)
