"""Faults with real worker processes on the CPU: each is recorded once, named and classified,
and every other case still produces rows (issue 3's fault acceptance)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from collector.canary import Canary
from collector.caseplan import CaseSelector
from collector.engine import CollectConfig, run_collection
from collector.record import read_record
from collector.timing import Protocol

pytestmark = pytest.mark.slow

FAST = Protocol(runs=2, samples=2, warmup=1, target_sample_ms=0.3, idle_ratio=0.0)
CRASH = "gemm_dtype=bfloat16,m=8,n=256,k=256"
HANG = "gemm_dtype=bfloat16,m=8,n=256,k=512"
FATAL = "gemm_dtype=bfloat16,m=8,n=512,k=256"
FAIL = "gemm_dtype=bfloat16,m=8,n=512,k=512"


@pytest.mark.parametrize("worker_start", ["spawn", "forkserver"])
def test_segfault_hang_cuda_fatal_and_exception_each_recorded_once(
    tmp_path: Path, worker_start: str
) -> None:
    cfg = CollectConfig(
        out=tmp_path / "run",
        case_set="smoke",
        protocol=replace(FAST, worker_start=worker_start),
        canary=Canary(
            crash=CaseSelector.parse(CRASH),
            hang=CaseSelector.parse(HANG),
            cuda_fatal=CaseSelector.parse(FATAL),
            fail=CaseSelector.parse(FAIL),
        ),
        case_timeout_s=8.0,
        quiet=True,
    )
    run_collection(cfg)
    rec = read_record(tmp_path / "run")
    by_case = {f.case_key: f for f in rec.failures}
    assert len(rec.failures) == 4 == len(by_case)
    crash = by_case["gemm:" + CRASH]
    assert crash.classification == "crash" and crash.signal == "SIGSEGV"
    assert "gemm:" + CRASH in crash.message and crash.params["n"] == 256
    hang = by_case["gemm:" + HANG]
    assert hang.classification == "timeout" and "watchdog" in hang.message
    fatal = by_case["gemm:" + FATAL]
    assert fatal.classification == "cuda_fatal" and "illegal memory access" in fatal.message
    fail = by_case["gemm:" + FAIL]
    assert fail.classification == "error" and fail.exception_type == "CanaryFailure"
    assert rec.status == "complete"
    counts = rec.meta["counts"]
    assert counts["planned"] == 16 and counts["failed"] == 4 and counts["ok"] == 12
    assert rec.perf["gemm"].num_rows == 12
    # Each surviving case has both of its runs, measured by whichever worker was alive.
    runs = rec.samples["gemm"].group_by(["case_key", "run"]).aggregate([]).num_rows
    assert runs == 12 * 2


def test_backend_that_cannot_start_fails_the_run_with_a_classified_failure_per_case(
    tmp_path: Path,
) -> None:
    cfg = CollectConfig(
        out=tmp_path / "run",
        case_set="smoke",
        protocol=FAST,
        backend_options={"_fail_import": "torch_nonexistent_module"},
        quiet=True,
    )
    run_collection(cfg)
    rec = read_record(tmp_path / "run")
    assert rec.status == "failed"
    assert {f.classification for f in rec.failures} == {"backend_unavailable"}
    assert len(rec.failures) == 16
    assert "torch_nonexistent_module" in rec.meta["error"]
