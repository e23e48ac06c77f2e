"""Build run records with known samples, without torch, through the real writer."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from collector.aggregate import RunResult
from collector.caseplan import Case
from collector.failures import FailureRecord, group_key, now_iso
from collector.record import CHECKPOINT, CheckpointState, finalize


def attention_params(**over: object) -> dict[str, object]:
    """Small fp8-KV generation-attention parameters (37 cached tokens, GQA 8:2), overridable."""
    p: dict[str, object] = {
        "batch_size": 3,
        "isl": 1,
        "num_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "beam_width": 1,
        "attn_dtype": "bfloat16",
        "kv_cache_dtype": "fp8",
        "step": 37,
        "window_size": 0,
    }
    p.update(over)
    return p


def gemm_case(m: int, n: int = 1024, k: int = 1024, dtype: str = "bfloat16") -> Case:
    return Case.build("gemm", {"gemm_dtype": dtype, "m": m, "n": n, "k": k})


def simulated_runs(
    rng: np.random.Generator,
    true_ms: float,
    runs: int = 6,
    samples: int = 8,
    run_spread: float = 0.005,
    within_cv: float = 0.01,
) -> list[list[float]]:
    """Samples with a per-run offset (run-to-run spread) and within-run noise."""
    out = []
    for _ in range(runs):
        level = true_ms * float(np.exp(rng.normal(0.0, run_spread)))
        out.append(list(level * np.exp(rng.normal(0.0, within_cv, size=samples))))
    return out


def failure(
    case: Case, message: str = "boom", exc: str = "RuntimeError", cls: str = "error"
) -> FailureRecord:
    return FailureRecord(
        task_id=f"{case.key}#run0",
        case_key=case.key,
        op=case.op,
        params=case.params,
        dtype=case.dtype,
        classification=cls,
        group_key=group_key(case.op, cls, exc, message, case.dtype),
        exception_type=exc,
        message=message,
        traceback=f"Traceback (most recent call last):\n  ...\n{exc}: {message}",
        exit_code=None,
        signal=None,
        worker="w0",
        device="cpu",
        run_index=0,
        timestamp=now_iso(),
    )


def write_record(
    out: Path,
    cases: list[Case],
    samples_for: Callable[[Case], list[list[float]] | None],
    *,
    failures: list[FailureRecord] | None = None,
    kernel_for: Callable[[Case], str] = lambda c: "torch.nn.functional.linear",
    status: str = "complete",
    device_name: str = "Test GPU",
    meta_extra: dict[str, Any] | None = None,
) -> Path:
    """A run record whose samples are given; `samples_for` returning None means no row."""
    out.mkdir(parents=True, exist_ok=True)
    state = CheckpointState()
    for case in cases:
        runs = samples_for(case)
        if runs is None:
            continue
        state.runs[case.key] = [
            RunResult(
                case_key=case.key,
                run=i,
                ms=list(r),
                sm_mhz=[1980.0] * len(r),
                power_w=[500.0] * len(r),
                throttled=[False] * len(r),
                inner=10,
                timing_mode="graph",
                kernel_source=kernel_for(case),
                copies=6,
            )
            for i, r in enumerate(runs)
        ]
    state.failures = list(failures or [])
    meta: dict[str, Any] = {
        "run_id": out.name,
        "backend": "torch",
        "framework": "torch",
        "framework_version": "2.11.0",
        "ops": sorted({c.op for c in cases}),
        "plan_hash": "test",
        "case_set": "test",
        "device": {"name": device_name, "kind": "cuda", "uuid": "GPU-test"},
        "versions": {"torch": "2.11.0"},
        "command": ["collectbot", "collect", "--out", out.name],
        "protocol": {"runs": 6, "samples": 8},
        "canary": None,
        "started_at": "2026-11-30T00:00:00+00:00",
        **(meta_extra or {}),
    }
    finalize(out, meta, cases, state, status)
    return out


def small_campaign(repo: Path, out: Path, **extra: Any) -> Any:
    """A two-run campaign of HEAD~1 against HEAD on one smoke case (CampaignConfig)."""
    from bot.campaign.runner import CampaignConfig

    return CampaignConfig(
        repo=repo,
        base_ref="HEAD~1",
        head_ref="HEAD",
        out=out,
        runs=2,
        collect_args=["--case-set", "smoke", "--samples", "2", "--warmup", "0"],
        selection_args=["--limit", "1"],
        **extra,
    )


def collect_until(
    out: Path, args: list[str], ready: Callable[[Path], bool], timeout: float = 90
) -> tuple[list[str], subprocess.Popen[bytes]]:
    """`collectbot collect --out OUT --smoke ARGS` started in its own process; returned (with
    its command line) once `ready(checkpoint)` holds, or when `timeout` seconds have passed."""
    cmd = [sys.executable, "-m", "bot", "collect", "--out", str(out), "--smoke", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    checkpoint = out / CHECKPOINT
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if checkpoint.exists() and ready(checkpoint):
            break
        time.sleep(0.05)
    return cmd, proc


def unavailable_run(proc: subprocess.CompletedProcess[str], out: Path, says: str) -> list[Any]:
    """A collection whose backend is not installed: exit 2 with one `error:` line saying
    `says` and no traceback, every case recorded backend_unavailable; its failures."""
    from collector.failures import BACKEND_UNAVAILABLE

    assert proc.returncode == 2, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and says in errors[0], errors
    assert "Traceback" not in proc.stderr
    failures: list[Any] = json.loads((out / "failures.json").read_text())
    assert {f["classification"] for f in failures} == {BACKEND_UNAVAILABLE}
    return failures
