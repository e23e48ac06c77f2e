"""A failure group is what failed and how, never where or when it ran (issue 19).

The acceptance test collects the same injected crash and the same injected exception with
1, 2 and 4 worker processes through the CLI, and compares every pairing through the CLI:
each fault is one persisting group, never "new" on one side and "resolved" on the other.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from collector.failures import (
    CRASH,
    ERROR,
    FailureRecord,
    group_key,
    identity_key,
    normalise_message,
)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # Worker names as the pool gives them: first, replaced, recycled.
        (
            "worker w0 died (SIGSEGV) while running gemm:gemm_dtype=float32,m=8,n=256,k=256",
            "worker w1.3 died (SIGSEGV) while running gemm:gemm_dtype=float32,m=8,n=256,k=512",
        ),
        ("worker w0.r2 killed", "worker w3 killed"),
        # Device indexes, pids, addresses.
        ("illegal access on cuda:0 (pid 4242)", "illegal access on cuda:3 (pid 17)"),
        ("GPU 0 fell off the bus at 0x7f00aa", "GPU 7 fell off the bus at 0x1b"),
        # Temporary paths and names, timestamps.
        ("cannot open /tmp/tmpk2j3_x9/a.so", "cannot open /tmp/tmpzz81qq/a.so"),
        ("lock tmpab12cd held", "lock tmpq9w8e7 held"),
        ("at 2026-12-01T13:40:00.123+00:00: stuck", "at 2026-11-30 09:01:02Z: stuck"),
        ("deadline passed at 13:40:02.5", "deadline passed at 09:00:00"),
    ],
)
def test_where_and_when_never_split_a_group(a: str, b: str) -> None:
    assert normalise_message(a) == normalise_message(b)
    assert group_key("gemm", CRASH, "WorkerCrash", a, "float32") == group_key(
        "gemm", CRASH, "WorkerCrash", b, "float32"
    )


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("dtype fp8_e4m3fn unsupported on SM90", "dtype bfloat16 unsupported on SM90"),
        ("w8a8 kernel missing", "w4a16 kernel missing"),
        ("worker w0 died (SIGSEGV)", "worker w0 died (SIGBUS)"),
    ],
)
def test_what_failed_still_separates_groups(a: str, b: str) -> None:
    assert normalise_message(a) != normalise_message(b)


def _failure(**over: object) -> FailureRecord:
    data: dict[str, object] = {
        "task_id": "t",
        "case_key": "gemm:gemm_dtype=float32,m=8,n=256,k=256",
        "op": "gemm",
        "params": {},
        "dtype": "float32",
        "classification": CRASH,
        "group_key": "whatever the record says",
        "exception_type": "WorkerCrash",
        "message": "worker w0 died (SIGSEGV) while running gemm:gemm_dtype=float32,m=8",
        "traceback": "",
        "exit_code": -11,
        "signal": "SIGSEGV",
        "worker": "w0",
        "device": "cuda:0",
        "run_index": 0,
        "timestamp": "2026-12-01T10:00:00+00:00",
    }
    data.update(over)
    return FailureRecord.from_json(data)


def test_identity_is_recomputed_from_the_fields_not_the_stored_key() -> None:
    a = _failure()
    b = _failure(
        group_key="another stored key",
        worker="w2.1",
        device="cuda:5",
        timestamp="2026-12-02T00:00:00+00:00",
        message="worker w2.1 died (SIGSEGV) while running gemm:gemm_dtype=float32,m=64",
    )
    assert identity_key(a) == identity_key(b)
    # The signal is part of how it failed; the classification and dtype of what failed.
    assert identity_key(a) != identity_key(_failure(signal="SIGBUS"))
    assert identity_key(a) != identity_key(_failure(classification=ERROR))
    assert identity_key(a) != identity_key(_failure(dtype="bfloat16"))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_the_same_crash_with_1_2_and_4_workers_is_one_persisting_group(tmp_path: Path) -> None:
    runs = {}
    for workers in (1, 2, 4):
        out = tmp_path / f"w{workers}"
        result = _cli(
            "collect", "--smoke", "--case-filter", "m=8", "--runs", "2", "--samples", "2",
            "--warmup", "1", "--target-sample-ms", "0.2", "--idle-ratio", "0", "--quiet",
            "--workers", str(workers), "--fresh-workers", "never",
            "--canary-crash", "gemm_dtype=float32,n=256",
            "--canary-fail", "gemm_dtype=bfloat16,k=512",
            "--out", str(out),
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        failures = json.loads((out / "failures.json").read_text())
        # The raw messages keep where the failure ran: nothing measured is lost.
        assert any(f["worker"] in f["message"] for f in failures if f["classification"] == CRASH)
        runs[workers] = out
    crash_workers = {
        f["worker"]
        for path in runs.values()
        for f in json.loads((path / "failures.json").read_text())
        if f["classification"] == CRASH
    }
    assert len(crash_workers) >= 3, crash_workers  # the crashes did land on different workers
    for a, b in itertools.permutations(runs, 2):
        out = tmp_path / f"cmp-{a}-{b}"
        result = _cli("compare", str(runs[a]), str(runs[b]), "--out", str(out))
        assert result.returncode == 0, result.stderr
        groups = json.loads((out / "comparison.json").read_text())["failure_groups"]
        pairing = f"{a} vs {b} workers"
        assert groups["new"] == [] and groups["resolved"] == [], pairing
        persisting = {(g["classification"], g["dtype"]): g for g in groups["persisting"]}
        assert set(persisting) == {(CRASH, "float32"), (ERROR, "bfloat16")}, pairing
        assert all(g["count"] == g["base_count"] == 2 for g in persisting.values()), pairing
        assert "new failure group" not in result.stdout, pairing
