"""`collectbot collect`: run a sweep, write a run record."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bot.commands.options import CanaryOptions, CasePlan, TrustOpt
from bot.errors import one_line_errors
from bot.images.sandbox import Limits
from bot.options import option_group, settings_options
from collector import jsonfile
from collector.attn_backends import Dispatch
from collector.errors import UserError
from collector.timing import Protocol

DEFAULT_PROTOCOL = Protocol()
DEFAULT_DISPATCH = Dispatch()
LIMITS = Limits()

if TYPE_CHECKING:
    from collector.engine import CollectConfig


def _ops(value: str) -> tuple[str, ...]:
    from collector.ops import get_op

    ops = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    if not ops:
        raise UserError("--ops: give at least one op")
    for op in ops:
        get_op(op)
    return ops


@one_line_errors
@option_group(CanaryOptions, "canaries")
@option_group(CasePlan, "case_plan")
@settings_options(Protocol, "protocol")
@settings_options(Limits, "limits", ("memory", "cpus", "shm_size"))
@settings_options(Dispatch, "dispatch")
def collect(
    out: Annotated[
        Path | None, typer.Option("--out", help="Run record directory to write (new or empty).")
    ] = None,
    backend: Annotated[
        str,
        typer.Option(
            help="Backend that builds and dispatches the kernels: torch, flashinfer or vllm."
        ),
    ] = "torch",
    ops: Annotated[
        str,
        typer.Option(help="Comma-separated ops: gemm, context_attention, generation_attention."),
    ] = "gemm",
    device: Annotated[str, typer.Option(help="cpu, cuda (every visible GPU) or cuda:N.")] = "cpu",
    case_plan: CasePlan = CasePlan(),
    # One option per declared Dispatch field (collector/attn_backends.py).
    dispatch: Dispatch = DEFAULT_DISPATCH,
    plan_only: Annotated[
        bool, typer.Option(help="Print the plan (counts, skips, hash) as JSON and exit.")
    ] = False,
    # One option per declared Protocol field (collector/timing.py), here in the help.
    protocol: Protocol = DEFAULT_PROTOCOL,
    workers: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Worker processes (default: one per visible GPU, one on CPU; 0: in-process).",
        ),
    ] = None,
    case_timeout: Annotated[
        float, typer.Option(min=1.0, help="Watchdog: seconds one run of one case may take.")
    ] = 600.0,
    canaries: CanaryOptions = CanaryOptions(),
    resume: Annotated[
        bool, typer.Option(help="Continue a partial run from its checkpoint.")
    ] = False,
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
    # Collection inside the pinned image (bot/images/container.py).
    image: Annotated[
        str | None, typer.Option(help="Collect inside this image (from `collectbot image ensure`).")
    ] = None,
    cache_dir: Annotated[
        Path | None,
        typer.Option(
            help="With --image: host folder for JIT caches (torch, Triton, FlashInfer); "
            "written only with --trust trusted, else the container gets a private copy."
        ),
    ] = None,
    limits: Limits = LIMITS,
    pass_env: Annotated[
        list[str] | None,
        typer.Option(help="With --image: pass this host variable (allow-listed settings only)."),
    ] = None,
    container_timeout: Annotated[
        float | None,
        typer.Option(min=1, help="With --image: stop the container after this many seconds."),
    ] = None,
    trust: TrustOpt = "untrusted",
    framework_version: Annotated[
        str | None,
        typer.Option(
            help="Version the framework must have exactly; default: the pin in "
            "images/manifest.yaml."
        ),
    ] = None,
) -> None:
    """Run a kernel sweep and write a run record.

    The record holds run.json, <op>_perf.parquet, <op>_samples.parquet and failures.json.
    """
    import os

    from bot.collect_command import collect_command
    from collector.backends import check_backend_name, preflight
    from collector.engine import CollectConfig, run_collection
    from collector.versions import EXPECTED_VERSION_ENV

    check_backend_name(backend)
    if framework_version is not None:
        if not framework_version.strip():
            raise UserError("--framework-version: give a version, e.g. 0.24.0")
        # Read by the backends' version gate (collector/versions.py); workers inherit it.
        os.environ[EXPECTED_VERSION_ENV] = framework_version.strip()
    if image is None:
        # The version gate, before a run directory or a worker exists. With --image it
        # runs inside the container, where the framework is installed.
        preflight(backend)
    case_plan.check_file()
    cfg = CollectConfig(
        out=out or Path("."),
        backend=backend,
        ops=_ops(ops),
        device=device,
        **case_plan.config(),
        protocol=replace(protocol, min_runs=min(protocol.min_runs, protocol.runs)),
        canary=canaries.canary(),
        resume=resume,
        quiet=quiet,
        workers=workers,
        case_timeout_s=case_timeout,
        attn_backend=dispatch.attn_backend,
    )
    if plan_only:
        typer.echo(json.dumps(_plan_summary(cfg), indent=2))
        return
    if out is None:
        raise UserError("--out: required (the run record directory to write)")
    cfg.command = collect_command(
        cfg, framework_version=framework_version.strip() if framework_version else None
    )
    from bot.joblog import workflow_commands_off

    # What the measured code prints must not act on the job (workflow commands).
    if image is not None:
        from bot.images.container import container_options, run_collect_command

        opts = container_options(image, cache_dir, limits, pass_env, container_timeout, trust)
        with workflow_commands_off():
            run_json = run_collect_command(cfg, opts)
    else:
        with workflow_commands_off():
            run_json = run_collection(cfg)
    typer.echo(str(run_json.parent))
    _fail_if_run_failed(run_json)


def _fail_if_run_failed(run_json: Path) -> None:
    """A run that could not measure at all (its backend did not start) ends non-zero."""
    meta = jsonfile.read(run_json)
    if not isinstance(meta, dict):
        raise UserError(f"{run_json}: must hold a JSON object")
    if meta.get("status") == "failed":
        reason = str(meta.get("error") or "see failures.json").splitlines()[0]
        raise UserError(f"run failed, record in {run_json.parent}: {reason}")


def _plan_summary(cfg: CollectConfig) -> dict[str, Any]:
    from collector.engine import resolve_plan

    sm = _device_sm(cfg.device)
    plan, outcome = resolve_plan(cfg, sm)
    return {
        "plan_hash": plan.hash,
        "cases": len(plan.cases),
        "by_op": plan.count_by_op(),
        "source": plan.source,
        "case_set": plan.case_set,
        "shard": list(cfg.shard) if cfg.shard else None,
        "device_sm": sm,
        "rules": outcome.summary(),
        "case_keys": [c.key for c in plan.cases],
    }


def _device_sm(device: str) -> str | None:
    """The SM of the target GPU for the floors, read through NVML (no CUDA context)."""
    if not device.startswith("cuda"):
        return None
    try:
        import pynvml

        pynvml.nvmlInit()
        _, _, idx = device.partition(":")
        handle = pynvml.nvmlDeviceGetHandleByIndex(int(idx) if idx.isdigit() else 0)
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        return f"{major}.{minor}"
    except Exception:
        return None
