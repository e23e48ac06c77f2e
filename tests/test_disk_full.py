"""Disk full while the run record is written: nothing already measured is lost.

A real full filesystem (a small tmpfs in a private mount namespace, see
tests/disk_full_driver.py) and a real file-size limit (RLIMIT_FSIZE, no privileges needed):
the collection ends with one line naming the file and the error, the record on disk is the
last consistent one (it reads, its checksums hold, no temporary files are left), the
checkpoint keeps every finished run, and `--resume` finishes the plan without repeating or
losing a run.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from collector.record import CHECKPOINT, CheckpointState, read_record
from tests.disk_full_driver import COLLECT

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow
PLANNED, RUNS = 16, 40


def _in_namespace(scenario: str, tmp_path: Path) -> dict[str, object]:
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is needed for a private tmpfs")
    probe = subprocess.run(
        ["unshare", "--mount", "--map-root-user", "true"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here: {probe.stderr.strip()}")
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            "unshare",
            "--mount",
            "--map-root-user",
            sys.executable,
            str(ROOT / "tests" / "disk_full_driver.py"),
            scenario,
            str(tmp_path / "mnt"),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**_env(), "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads((out / "result.json").read_text())
    return result


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "OMP_NUM_THREADS": "1"}


def _assert_consistent_partial(run: Path) -> int:
    """The record left by the failure: valid, partial, no temporary files; returns its runs."""
    assert not [p.name for p in run.iterdir() if p.name.endswith(".tmp")]
    record = read_record(run)  # every checksum in run.json holds
    assert record.status == "partial" and not record.anomalies
    state = CheckpointState.load(run / CHECKPOINT)
    return sum(len(r) for r in state.runs.values())


def _assert_resumed_exactly(run: Path, finished_before: int) -> None:
    record = read_record(run)
    assert record.status == "complete"
    assert record.meta["counts"]["ok"] == record.meta["counts"]["planned"] == PLANNED
    pairs = record.samples["gemm"].group_by(["case_key", "run"]).aggregate([]).num_rows
    assert pairs == PLANNED * RUNS  # nothing lost, nothing measured twice
    assert len(record.meta["resumed_at"]) == 1
    assert finished_before > 0


def _one_line(stderr: str, *needles: str) -> None:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "Traceback" not in stderr


def test_collect_on_a_full_filesystem_then_resume(tmp_path: Path) -> None:
    result = _in_namespace("collect", tmp_path)
    full = result["full"]
    assert isinstance(full, dict)
    assert full["code"] == 2, full
    _one_line(str(full["stderr"]), "No space left on device (ENOSPC)", "--resume")
    finished = _assert_consistent_partial(tmp_path / "out" / "after-full")
    resumed = result["resumed"]
    assert isinstance(resumed, dict) and resumed["code"] == 0, resumed
    _assert_resumed_exactly(tmp_path / "out" / "resumed", finished)


def test_finalize_on_a_full_filesystem_keeps_the_previous_record(tmp_path: Path) -> None:
    result = _in_namespace("finalize", tmp_path)
    error = str(result["error"])
    assert "No space left on device (ENOSPC)" in error and "keeps its previous state" in error
    before, after = tmp_path / "out" / "before", tmp_path / "out" / "after-full"
    # The failed finalize changed nothing: same files, byte for byte; no temporary files.
    assert sorted(p.name for p in after.iterdir()) == sorted(p.name for p in before.iterdir())
    for path in before.iterdir():
        assert (after / path.name).read_bytes() == path.read_bytes(), path.name
    assert read_record(after).perf["gemm"].num_rows == 2
    freed = read_record(tmp_path / "out" / "after-free")
    assert freed.status == "complete" and freed.perf["gemm"].num_rows == 64


def _limit_file_size(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_file_size_limit_mid_run_then_resume(tmp_path: Path) -> None:
    """RLIMIT_FSIZE: the kernel refuses to grow any file past 48 KiB (EFBIG), as a quota
    would; Python ignores SIGXFSZ, so the write fails instead of killing the process."""
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "bot", *COLLECT, "--out", str(run)]
    full = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
        preexec_fn=lambda: _limit_file_size(48 << 10),
    )
    assert full.returncode == 2, full.stderr
    _one_line(full.stderr, "File too large (EFBIG)", str(run))
    finished = _assert_consistent_partial(run)
    resumed = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    _assert_resumed_exactly(run, finished)
