"""`collectbot compare`: two run records in, comparison.json and cases.parquet out."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from bot.commands.options import ConfirmRuns, StoreBaseline
from bot.compare.stats import Settings
from bot.errors import one_line_errors
from bot.options import option_group, options_given, settings_options
from collector.errors import UserError

DEFAULT_SETTINGS = Settings()


@one_line_errors
@settings_options(Settings, "settings")
@option_group(ConfirmRuns, "confirm")
@option_group(StoreBaseline, "store_baseline")
def compare(
    ctx: typer.Context,
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="BASE_RUN CAND_RUN (run record directories); only CAND_RUN with "
            "--baseline-from-store.",
            show_default=False,
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Directory for comparison.json.")],
    # One option per declared comparison setting (bot/compare/stats.py).
    settings: Settings = DEFAULT_SETTINGS,
    config: Annotated[
        Path | None,
        typer.Option(
            help="Thresholds and statistics settings (YAML); default: .github/collectbot.yml "
            "when there is one. Options given here win over it.",
        ),
    ] = None,
    baseline_kind: Annotated[
        str | None,
        typer.Option(
            help="What the baseline is: previous-run, merge-base, imported-table, explicit-run "
            "(default: imported-table for imported records, else explicit-run)."
        ),
    ] = None,
    paired: Annotated[
        bool, typer.Option(help="The runs were collected alternately on one device (a campaign).")
    ] = False,
    confirm: ConfirmRuns = ConfirmRuns(),
    store_baseline: StoreBaseline = StoreBaseline(),
) -> None:
    """Compare two run records: failure groups, coverage and per-case latency with intervals.

    Writes comparison.json (notable cases and summaries) and cases.parquet (every case).
    """
    from bot.ci_config import load_ci_config
    from bot.compare.comparison import Baseline, compare_runs
    from collector.record import read_record

    ci_config = load_ci_config(config)
    if ci_config is not None:
        given = options_given(ctx, Settings)
        settings = replace(ci_config.apply(), **{name: getattr(settings, name) for name in given})
    confirmation = confirm.records()
    with tempfile.TemporaryDirectory(prefix="collectbot-baseline-") as tmp:
        if store_baseline.baseline_from_store is not None:
            if len(runs) != 1:
                raise UserError("with --baseline-from-store, give only the candidate run")
            from bot.compare.store_baseline import baseline_from_store as fetch_baseline

            cand = read_record(runs[0])
            base, baseline = fetch_baseline(
                cand,
                store_baseline.baseline_from_store,
                Path(tmp) / "baseline",
                ref=store_baseline.baseline_ref,
                kind=baseline_kind,
                paired=paired,
                history_runs=store_baseline.history_runs,
            )
        else:
            if len(runs) != 2:
                raise UserError("give BASE_RUN and CAND_RUN (or --baseline-from-store)")
            base, cand = read_record(runs[0]), read_record(runs[1])
            baseline = Baseline(kind=baseline_kind, paired=paired)
        source = ci_config.source if ci_config else None
        result = compare_runs(base, cand, settings, baseline, confirmation, settings_source=source)
        path = result.write(out)
    verdict = result.data["verdict"]
    typer.echo(f"{verdict['level']}: {verdict['headline']}")
    typer.echo(str(path))
