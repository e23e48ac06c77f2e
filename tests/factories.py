"""Build run records with known samples, without torch, through the real writer."""

from __future__ import annotations

import json
import os
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
from collector.pins import FrameworkPins
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


# Levels a short GEMM's buffer sets sit on (x its typical level) and their shares: e.g. one
# bf16 GEMM at 20.9 / 23.6 / 28 us depending on the set (docs/statistics.md).
PLACEMENT_LEVELS = (0.89, 1.0, 1.19)
PLACEMENT_SHARES = (0.1, 0.7, 0.2)


def placement_levels(rng: np.random.Generator, sets: int = 8) -> np.ndarray:
    """A case's buffer-set levels: each set on a level drawn with PLACEMENT_SHARES."""
    return np.asarray(PLACEMENT_LEVELS)[rng.choice(3, size=sets, p=PLACEMENT_SHARES)]


def multilevel_runs(
    rng: np.random.Generator,
    true_ms: float,
    levels: np.ndarray,
    runs: int = 4,
    run_spread: float = 0.003,
    jitter: float = 0.002,
) -> list[list[float]]:
    """Runs whose samples come one from each buffer set (`levels`, in a fresh order each
    run): every run averages the sets' spread alike, so runs agree to `run_spread` while
    their samples spread over the levels (small `jitter` about each)."""
    out = []
    for _ in range(runs):
        level = true_ms * float(np.exp(rng.normal(0.0, run_spread)))
        noise = np.exp(rng.normal(0.0, jitter, size=levels.size))
        out.append(list(level * rng.permutation(levels) * noise))
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


def run_result(case_key: str, run: int, ms: list[float], **fields: Any) -> RunResult:
    """One checkpointed run of samples `ms`: one graph-timed call per sample, no clock, power
    or throttling seen, kernel "t" on one buffer copy; `fields` set any other value."""
    n = len(ms)
    seen: dict[str, Any] = {"sm_mhz": [None] * n, "power_w": [None] * n, "throttled": [False] * n}
    timed: dict[str, Any] = {"inner": 1, "timing_mode": "graph", "kernel_source": "t", "copies": 1}
    return RunResult(case_key=case_key, run=run, ms=ms, **{**seen, **timed, **fields})


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
            run_result(
                case.key,
                i,
                list(r),
                sm_mhz=[1980.0] * len(r),
                power_w=[500.0] * len(r),
                inner=10,
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


def framework_pins(**over: str) -> FrameworkPins:
    """vLLM 0.24.0's pins as the manifest holds them (CUDA 13.0, a base image by digest),
    with `over` replacing any field."""
    fields = {
        "version": "0.24.0",
        "torch": "2.11.0",
        "flashinfer": "0.6.12",
        "cuda": "cu130",
        "base_image": "docker.io/vllm/vllm-openai@sha256:" + "ab" * 32,
    }
    return FrameworkPins(name="vllm", extra={}, **{**fields, **over})


def fake_dist(root: Path, name: str, version: str) -> Path:
    """`root` holding a `name` `version` distribution's metadata only: installed, for
    importlib.metadata (and so the version gate), with no package to import."""
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return root


def collect_unpinned(
    cwd: Path, pythonpath: Path | None, *args: str
) -> subprocess.CompletedProcess[str]:
    """`collectbot collect ARGS` in its own process in `cwd`, with no pin from the environment
    and `pythonpath` (a fake site, or None) before this checkout."""
    from collector.versions import EXPECTED_VERSION_ENV, MANIFEST_ENV

    env = {k: v for k, v in os.environ.items() if k not in (EXPECTED_VERSION_ENV, MANIFEST_ENV)}
    root = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (pythonpath, root) if p is not None)
    cmd = [sys.executable, "-m", "bot", "collect", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def assert_needs_cuda(require_cuda: Callable[[str], None]) -> None:
    """A GPU backend's device check: a CPU is refused as unsupported, a CUDA device passes."""
    import pytest

    from collector.failures import UNSUPPORTED, classify_exception

    with pytest.raises(NotImplementedError, match="needs a CUDA device") as info:
        require_cuda("cpu")
    assert classify_exception(info.value) == UNSUPPORTED
    require_cuda("cuda:1")


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
