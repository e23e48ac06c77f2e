"""`collectbot campaign`: a paired A/B campaign of two collector versions on one device."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from bot.commands.options import CanaryFactor, CaseFilter, CaseLimit, CaseSet, TrustOpt
from bot.compare.stats import Settings
from bot.errors import one_line_errors
from bot.images.sandbox import Limits
from bot.options import settings_options
from collector.errors import UserError
from collector.settings import cli_args
from collector.timing import Protocol

# The protocol settings a campaign forwards to each round's `collect` (older refs know them).
ROUND_PROTOCOL = ("samples", "warmup", "target_sample_ms", "idle_ratio", "use_graphs")
ROUND_SETTINGS = ("min_effect", "noise_mult", "alpha", "seed")
DEFAULT_PROTOCOL = Protocol()
DEFAULT_SETTINGS = Settings()
# The container limits an image-mode round forwards to `collect --image` (as collect has them).
ROUND_LIMITS = ("memory", "cpus", "shm_size")
DEFAULT_LIMITS = Limits()


def _flag(name: str, value: object, default: object) -> list[str]:
    return [] if value == default or value is None else [name, str(value)]


@one_line_errors
@settings_options(Settings, "settings", ROUND_SETTINGS)
@settings_options(Protocol, "protocol", ROUND_PROTOCOL)
@settings_options(Limits, "limits", ROUND_LIMITS)
def campaign(
    out: Annotated[Path, typer.Option("--out", help="Campaign directory to write (new or empty).")],
    base: Annotated[
        str | None,
        typer.Option(
            "--base",
            help="Git ref of the baseline collector (A); with --base-image, only the commit "
            "its image was built from.",
        ),
    ] = None,
    head: Annotated[
        str | None,
        typer.Option(
            "--head",
            help="Git ref of the candidate collector (B); with --head-image, only the commit "
            "its image was built from.",
        ),
    ] = None,
    base_image: Annotated[
        str | None,
        typer.Option(
            help="Image mode: run each base round in this image (collect --image); needs "
            "--head-image, makes no worktree."
        ),
    ] = None,
    head_image: Annotated[
        str | None,
        typer.Option(help="Image mode: run each head round in this image (collect --image)."),
    ] = None,
    limits: Limits = DEFAULT_LIMITS,
    trust: TrustOpt = "untrusted",
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
    case_set: CaseSet = "default",
    case_filter: CaseFilter = None,
    limit: CaseLimit = None,
    # The protocol options a round forwards to `collect` (both refs must know them).
    protocol: Protocol = DEFAULT_PROTOCOL,
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
    canary_factor: CanaryFactor = 1.5,
    python: Annotated[
        str, typer.Option(help="Python interpreter that runs the collector rounds.")
    ] = sys.executable,
    round_timeout: Annotated[
        float | None, typer.Option(min=1.0, help="Seconds one collect round may take.")
    ] = None,
    baseline_kind: Annotated[
        str, typer.Option(help="What --base is, as the comment says: merge-base or explicit-run.")
    ] = "merge-base",
    settings: Settings = DEFAULT_SETTINGS,
    quiet: Annotated[bool, typer.Option(help="No progress lines.")] = False,
) -> None:
    """Collect base and head collector versions alternately on one device and compare them.

    Writes the rounds (raw records), the merged run records, the confirmation rounds, the
    comparison, comment.md and campaign.json (with the command that recomputes the
    comparison from the stored samples). Prints the comparison's directory.
    """
    from bot.campaign.runner import CampaignConfig, run_campaign
    from bot.compare.comparison import BASELINE_KINDS

    if baseline_kind not in BASELINE_KINDS:
        raise UserError(f"--baseline-kind: {baseline_kind!r} is not one of {BASELINE_KINDS}")
    if cases is not None and not cases.is_file():
        raise UserError(f"{cases}: case file not found")
    image_mode = base_image is not None or head_image is not None
    if image_mode and (base_image is None or head_image is None):
        raise UserError("--base-image and --head-image: give both (image mode) or neither")
    if not image_mode and (base is None or head is None):
        raise UserError("--base and --head: give both git refs (or --base-image and --head-image)")
    container_args = ["--trust", trust, *cli_args(limits, ROUND_LIMITS)] if image_mode else []
    if not image_mode and limits != DEFAULT_LIMITS:
        raise UserError("--memory, --cpus, --shm-size: only with --base-image and --head-image")
    collect_args = ["--backend", backend, "--ops", ops]
    if cases is not None:
        collect_args += ["--cases", str(cases.resolve())]
    collect_args += _flag("--case-set", case_set, "default")
    collect_args += cli_args(protocol, ROUND_PROTOCOL)
    selection_args = _flag("--case-filter", case_filter, None) + _flag("--limit", limit, None)
    head_args = []
    if canary_slow:
        head_args = ["--canary-slow", canary_slow, "--canary-factor", str(canary_factor)]
    console_err = (lambda line: None) if quiet else (lambda line: typer.echo(line, err=True))
    cfg = CampaignConfig(
        repo=repo,
        base_ref=base or "",
        head_ref=head or "",
        out=out,
        base_image=base_image,
        head_image=head_image,
        container_args=container_args,
        runs=runs,
        device=device,
        collect_args=collect_args,
        selection_args=selection_args,
        head_args=head_args,
        confirm=confirm,
        confirm_runs=confirm_runs,
        confirm_max=confirm_max,
        python=python,
        settings=settings,
        baseline_kind=baseline_kind,
        round_timeout_s=round_timeout,
        command=["collectbot", *sys.argv[1:]] if sys.argv[1:2] == ["campaign"] else [],
        log=console_err,
    )
    result = run_campaign(cfg)
    verdict = result.comparison.data["verdict"]
    typer.echo(f"{verdict['level']}: {verdict['headline']}")
    typer.echo(str(result.comparison_dir))
