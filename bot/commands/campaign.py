"""`collectbot campaign`: a paired A/B campaign of two collector versions on one device."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from bot.errors import one_line_errors
from collector.errors import UserError


def _flag(name: str, value: object, default: object) -> list[str]:
    return [] if value == default or value is None else [name, str(value)]


@one_line_errors
def campaign(
    base: Annotated[str, typer.Option("--base", help="Git ref of the baseline collector (A).")],
    head: Annotated[str, typer.Option("--head", help="Git ref of the candidate collector (B).")],
    out: Annotated[Path, typer.Option("--out", help="Campaign directory to write (new or empty).")],
    repo: Annotated[
        Path, typer.Option(help="The collector's git repository (default: the current one).")
    ] = Path("."),
    runs: Annotated[
        int, typer.Option(min=2, help="Runs per side, one alternating round each (A B B A ...).")
    ] = 6,
    device: Annotated[str, typer.Option(help="cpu or cuda:N: one device for both sides.")] = "cpu",
    backend: Annotated[str, typer.Option(help="Backend both sides collect with.")] = "torch",
    ops: Annotated[str, typer.Option(help="Comma-separated ops to collect.")] = "gemm",
    cases: Annotated[
        Path | None, typer.Option("--cases", help="Case file (YAML); default: each ref's built-in.")
    ] = None,
    case_set: Annotated[
        str, typer.Option(help="Named case set inside the case files.")
    ] = "default",
    case_filter: Annotated[
        str | None, typer.Option(help="Keep cases matching field=value[,...][;...].")
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="Keep only the first N cases of the plan.")
    ] = None,
    samples: Annotated[int, typer.Option(min=1, help="Timed samples per run.")] = 8,
    warmup: Annotated[int, typer.Option(min=0, help="Warm-up calls before timing.")] = 3,
    target_sample_ms: Annotated[
        float, typer.Option(min=0.001, help="Calls per sample are chosen so a sample lasts this.")
    ] = 1.0,
    idle_ratio: Annotated[
        float, typer.Option(min=0.0, help="Idle time after each sample, as a multiple of it.")
    ] = 1.0,
    graphs: Annotated[bool, typer.Option(help="Time CUDA ops inside CUDA graphs.")] = True,
    confirm: Annotated[
        bool,
        typer.Option(
            help="Re-measure the cases first judged regressed, inconclusive or improved in "
            "extra paired rounds before the verdict is final."
        ),
    ] = True,
    confirm_runs: Annotated[
        int | None,
        typer.Option(min=2, help="Runs per side of the confirmation rounds (default: --runs)."),
    ] = None,
    confirm_max: Annotated[
        int, typer.Option(min=1, help="Re-measure at most this many cases (largest first).")
    ] = 500,
    canary_slow: Annotated[
        str | None,
        typer.Option(help="Canary on the head side only: slow the cases this selector matches."),
    ] = None,
    canary_factor: Annotated[float, typer.Option(min=1.0, help="Canary slowdown factor.")] = 1.5,
    python: Annotated[
        str, typer.Option(help="Python interpreter that runs the collector rounds.")
    ] = sys.executable,
    round_timeout: Annotated[
        float | None, typer.Option(min=1.0, help="Seconds one collect round may take.")
    ] = None,
    baseline_kind: Annotated[
        str, typer.Option(help="What --base is, as the comment says: merge-base or explicit-run.")
    ] = "merge-base",
    min_effect: Annotated[
        float, typer.Option(min=0.0, help="Smallest relative change that can be a verdict.")
    ] = 0.01,
    noise_mult: Annotated[
        float, typer.Option(min=0.0, help="Threshold in multiples of a case's run noise.")
    ] = 2.0,
    alpha: Annotated[
        float, typer.Option(min=0.0001, max=0.5, help="False discovery rate across cases.")
    ] = 0.05,
    seed: Annotated[int, typer.Option(help="Bootstrap seed of the comparison.")] = 20261130,
    quiet: Annotated[bool, typer.Option(help="No progress lines.")] = False,
) -> None:
    """Collect base and head collector versions alternately on one device and compare them.

    Writes the rounds (raw records), the merged run records, the confirmation rounds, the
    comparison, comment.md and campaign.json (with the command that recomputes the
    comparison from the stored samples). Prints the comparison's directory.
    """
    from bot.campaign.runner import CampaignConfig, run_campaign
    from bot.compare.comparison import BASELINE_KINDS
    from bot.compare.stats import Settings

    if baseline_kind not in BASELINE_KINDS:
        raise UserError(f"--baseline-kind: {baseline_kind!r} is not one of {BASELINE_KINDS}")
    if cases is not None and not cases.is_file():
        raise UserError(f"{cases}: case file not found")
    collect_args = ["--backend", backend, "--ops", ops]
    if cases is not None:
        collect_args += ["--cases", str(cases.resolve())]
    collect_args += _flag("--case-set", case_set, "default")
    collect_args += _flag("--samples", samples, 8)
    collect_args += _flag("--warmup", warmup, 3)
    collect_args += _flag("--target-sample-ms", target_sample_ms, 1.0)
    collect_args += _flag("--idle-ratio", idle_ratio, 1.0)
    if not graphs:
        collect_args.append("--no-graphs")
    selection_args = _flag("--case-filter", case_filter, None) + _flag("--limit", limit, None)
    head_args = []
    if canary_slow:
        head_args = ["--canary-slow", canary_slow, "--canary-factor", str(canary_factor)]
    console_err = (lambda line: None) if quiet else (lambda line: typer.echo(line, err=True))
    cfg = CampaignConfig(
        repo=repo,
        base_ref=base,
        head_ref=head,
        out=out,
        runs=runs,
        device=device,
        collect_args=collect_args,
        selection_args=selection_args,
        head_args=head_args,
        confirm=confirm,
        confirm_runs=confirm_runs,
        confirm_max=confirm_max,
        python=python,
        settings=Settings(alpha=alpha, min_effect=min_effect, noise_mult=noise_mult, seed=seed),
        baseline_kind=baseline_kind,
        round_timeout_s=round_timeout,
        command=["collectbot", *sys.argv[1:]] if sys.argv[1:2] == ["campaign"] else [],
        log=console_err,
    )
    result = run_campaign(cfg)
    verdict = result.comparison.data["verdict"]
    typer.echo(f"{verdict['level']}: {verdict['headline']}")
    typer.echo(str(result.comparison_dir))
