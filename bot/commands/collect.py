"""`collectbot collect`: run a sweep, write a run record."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bot.cli import app
from bot.errors import one_line_errors
from collector.errors import UserError


def _ops(value: str) -> tuple[str, ...]:
    from collector.ops import get_op

    ops = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    if not ops:
        raise UserError("--ops: give at least one op")
    for op in ops:
        get_op(op)
    return ops


@app.command()
@one_line_errors
def collect(
    out: Annotated[
        Path, typer.Option("--out", help="Run record directory to write (new or empty).")
    ],
    backend: Annotated[
        str, typer.Option(help="Backend that builds and dispatches the kernels.")
    ] = "torch",
    ops: Annotated[str, typer.Option(help="Comma-separated ops to collect, e.g. gemm.")] = "gemm",
    device: Annotated[str, typer.Option(help="cpu, or cuda / cuda:N.")] = "cpu",
    cases: Annotated[
        Path | None, typer.Option("--cases", help="Case file (YAML); default: the built-in cases.")
    ] = None,
    case_set: Annotated[
        str, typer.Option(help="Named case set inside the case files.")
    ] = "default",
    smoke: Annotated[
        bool, typer.Option(help="Shortcut for --case-set smoke: a quick check.")
    ] = False,
    case_filter: Annotated[
        str | None,
        typer.Option(
            help="Keep cases matching field=value[,field=value][;...]; values may list a|b."
        ),
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="Keep only the first N cases of the plan.")
    ] = None,
    runs: Annotated[
        int, typer.Option(min=1, help="Runs per case (the unit of the statistics).")
    ] = 6,
    samples: Annotated[int, typer.Option(min=1, help="Timed samples per run.")] = 8,
    warmup: Annotated[int, typer.Option(min=0, help="Warm-up calls before timing.")] = 3,
    target_sample_ms: Annotated[
        float,
        typer.Option(min=0.001, help="Calls per sample are chosen so a sample lasts this long."),
    ] = 1.0,
    idle_ratio: Annotated[
        float,
        typer.Option(min=0.0, help="Idle time after each sample, as a multiple of its duration."),
    ] = 1.0,
    graphs: Annotated[bool, typer.Option(help="Time CUDA ops inside CUDA graphs.")] = True,
    canary_slow: Annotated[
        str | None,
        typer.Option(help="Canary: slow the cases this selector matches (field=value,...)."),
    ] = None,
    canary_factor: Annotated[float, typer.Option(min=1.0, help="Canary: slowdown factor.")] = 1.5,
    canary_fail: Annotated[
        str | None, typer.Option(help="Canary: make the cases this selector matches raise.")
    ] = None,
    resume: Annotated[
        bool, typer.Option(help="Continue a partial run from its checkpoint.")
    ] = False,
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
) -> None:
    """Run a kernel sweep and write a run record.

    The record holds run.json, <op>_perf.parquet, <op>_samples.parquet and failures.json.
    """
    from bot.collect_command import collect_command
    from collector.canary import Canary
    from collector.caseplan import CaseSelector
    from collector.engine import CollectConfig, run_collection
    from collector.timing import Protocol

    if cases is not None and not cases.is_file():
        raise UserError(f"{cases}: case file not found")
    canary = None
    if canary_slow or canary_fail:
        canary = Canary(
            slow=CaseSelector.parse(canary_slow, option="--canary-slow") if canary_slow else None,
            factor=canary_factor,
            fail=CaseSelector.parse(canary_fail, option="--canary-fail") if canary_fail else None,
        )
    cfg = CollectConfig(
        out=out,
        backend=backend,
        ops=_ops(ops),
        device=device,
        case_file=cases,
        case_set="smoke" if smoke else case_set,
        case_filter=CaseSelector.parse(case_filter, option="--case-filter")
        if case_filter
        else None,
        limit=limit,
        protocol=Protocol(
            runs=runs,
            samples=samples,
            warmup=warmup,
            target_sample_ms=target_sample_ms,
            idle_ratio=idle_ratio,
            use_graphs=graphs,
        ),
        canary=canary,
        resume=resume,
        quiet=quiet,
    )
    cfg.command = collect_command(cfg)
    run_json = run_collection(cfg)
    typer.echo(str(run_json.parent))
