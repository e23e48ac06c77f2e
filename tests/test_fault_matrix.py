"""Rows of the fault matrix (docs/reliability.md) not covered elsewhere, with real processes.

Each test injects the fault the way it happens in the field (a worker SIGKILLed as the
kernel's OOM killer does, a coordinator SIGKILLed as a cancelled runner is, an allocation
refused by a memory limit, a dead Docker socket, a truncated baseline, a lost shard, ...)
and checks what the bot does: one failure record naming the case, one line naming the
cause, a valid record marked for what it is, and nothing measured lost.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from bot.cli import app
from collector.canary import Canary
from collector.caseplan import Case, CaseSelector
from collector.pool import Task, WorkerPool
from collector.record import CHECKPOINT, RUN_JSON, CheckpointState, read_record
from collector.timing import Protocol
from collector.worker import WorkerSpec
from tests.factories import collect_until, gemm_case, simulated_runs, write_record

runner = CliRunner()
FAST = Protocol(runs=1, samples=2, warmup=0, target_sample_ms=0.3, idle_ratio=0.0)


def _tasks(ms: list[int]) -> list[Task]:
    cases = [Case.build("gemm", {"gemm_dtype": "float32", "m": m, "n": 64, "k": 64}) for m in ms]
    return [Task(f"{c.key}#run0", c.key, c.op, list(c.values), c.params, c.dtype, 0) for c in cases]


def _pool(canary: Canary | None = None, timeout: float = 120.0) -> WorkerPool:
    spec = WorkerSpec(
        backend="torch",
        device="cpu",
        protocol=FAST,
        name="w0",
        canary=canary.to_json() if canary else None,
    )
    pool = WorkerPool([spec], case_timeout_s=timeout)
    pool.wait_ready()
    return pool


@pytest.mark.slow
def test_a_worker_killed_by_sigkill_is_a_crash_of_its_case_and_the_run_goes_on() -> None:
    """The kernel's OOM killer sends SIGKILL: no exception, no chance to report. The pool
    names the case the worker was running, records the signal, and replaces the worker."""
    tasks = _tasks([4, 8, 16, 32])
    victim = tasks[1]
    pool = _pool(Canary(hang=CaseSelector.parse("m=8")))  # the victim sits in its case
    outcomes: list[dict[str, Any]] = []
    thread = threading.Thread(target=pool.execute, args=(tasks, outcomes.append))
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            worker = pool.workers[0]
            if worker.task is not None and worker.task.case_key == victim.case_key:
                assert worker.process.pid is not None
                time.sleep(0.2)
                os.kill(worker.process.pid, signal.SIGKILL)
                break
            time.sleep(0.05)
        thread.join(timeout=60)
        assert not thread.is_alive()
    finally:
        pool.close()
    by_task = {o["task_id"]: o for o in outcomes}
    assert sorted(by_task) == sorted(t.task_id for t in tasks)  # every task, exactly once
    assert len(outcomes) == len(tasks)
    crash = by_task[victim.task_id]["failure"]
    assert crash["classification"] == "crash" and crash["signal"] == "SIGKILL"
    assert crash["case_key"] == victim.case_key and victim.case_key in crash["message"]
    assert all("run" in by_task[t.task_id] for t in tasks if t is not victim)
    assert pool.replacements == 1


def test_an_allocation_refused_by_a_memory_limit_is_an_oom_failure(tmp_path: Path) -> None:
    """A memory limit the case exceeds (RLIMIT_AS here, a cgroup or a full GPU in the field)
    surfaces as an allocation error: the case is recorded as `oom`, the others measure."""
    script = tmp_path / "oom.py"
    script.write_text(
        "import resource, sys\n"
        "from collector.engine import CollectConfig, run_collection\n"
        "from collector.timing import Protocol\n"
        "from pathlib import Path\n"
        "import torch\n"  # imported before the limit: only the case allocates under it
        "limit = 6 << 30\n"
        "resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
        "cases = Path(sys.argv[2])\n"
        "run_collection(CollectConfig(out=Path(sys.argv[1]), case_file=cases, workers=0,\n"
        "    protocol=Protocol(runs=1, samples=2, warmup=0, target_sample_ms=0.3,\n"
        "    idle_ratio=0.0), quiet=True))\n"
    )
    cases = tmp_path / "cases.yaml"
    cases.write_text(
        "op: gemm\nsets:\n  default:\n"
        "    - cases:\n"
        "      - {gemm_dtype: float32, m: 8, n: 64, k: 64}\n"
        "      - {gemm_dtype: float32, m: 65536, n: 65536, k: 65536}\n"
        "      - {gemm_dtype: float32, m: 16, n: 64, k: 64}\n"
    )
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, str(script), str(out), str(cases)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    record = read_record(out)
    [failure] = record.failures
    assert failure.classification == "oom" and "m=65536" in failure.case_key
    assert record.perf["gemm"].num_rows == 2 and record.status == "complete"


@pytest.mark.slow
def test_a_cuda_fatal_error_retires_the_worker_and_a_fresh_one_continues() -> None:
    """After a CUDA-fatal error the context is poisoned: the failure is recorded, the worker
    exits, and every later case runs in a new process."""
    tasks = _tasks([4, 8, 16, 32])
    pool = _pool(Canary(cuda_fatal=CaseSelector.parse("m=8"), fail=CaseSelector.parse("m=32")))
    first_pid = pool.workers[0].process.pid
    outcomes: list[dict[str, Any]] = []
    try:
        pool.execute(tasks, outcomes.append)
        later_pid = pool.workers[0].process.pid
    finally:
        pool.close()
    fails = {o["failure"]["case_key"]: o["failure"] for o in outcomes if "failure" in o}
    fatal = fails[tasks[1].case_key]
    assert fatal["classification"] == "cuda_fatal" and fatal["worker"] == "w0"
    # The case after it ran in the replacement (its own failure names the new worker).
    assert fails[tasks[3].case_key]["worker"] == "w0.1"
    assert pool.replacements == 1 and later_pid != first_pid
    assert len(outcomes) == 4 and "run" in outcomes[2]


@pytest.mark.slow
def test_a_runner_killed_mid_run_leaves_a_record_that_resume_finishes(tmp_path: Path) -> None:
    """SIGKILL of the collect process (a cancelled job, a rebooted runner): no handler runs.
    The last partial record stays valid, the checkpoint holds every finished run, and
    --resume finishes the plan without measuring a run twice."""
    out = tmp_path / "run"
    args = [
        "--runs", "30", "--samples", "4", "--target-sample-ms", "1", "--idle-ratio", "0",
        "--quiet", "--target-ci", "0",  # every case takes all 30 runs: the test counts them
    ]  # fmt: skip
    cmd, proc = collect_until(out, args, lambda checkpoint: checkpoint.stat().st_size > 4000)
    checkpoint = out / CHECKPOINT
    proc.kill()
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    killed = read_record(out)  # the last partial run.json: consistent with its files
    assert killed.status == "partial"
    finished = CheckpointState.load(checkpoint).runs  # every run done before the kill
    # The comment path reads it too, and says it is partial.
    comment = tmp_path / "killed.md"
    result = runner.invoke(app, ["render", "--run", str(out), "--out", str(comment)])
    assert result.exit_code == 0, result.output
    assert "partial" in comment.read_text()
    done = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    record = read_record(out)
    assert record.status == "complete" and record.meta["counts"]["ok"] == 16
    pairs = record.samples["gemm"].group_by(["case_key", "run"]).aggregate([]).num_rows
    assert pairs == 16 * 30
    assert record.meta["run_id"] == killed.meta["run_id"]
    # What was measured before the kill is kept as it was measured, not measured again.
    after: dict[tuple[str, int], list[float]] = {}
    for r in record.samples["gemm"].select(["case_key", "run", "ms"]).to_pylist():
        after.setdefault((r["case_key"], r["run"]), []).append(r["ms"])
    assert finished
    for key, runs in finished.items():
        for run in runs:
            assert after[(key, run.run)] == run.ms


def test_no_docker_engine_is_one_line_for_collect_and_image(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Docker daemon down: DOCKER_HOST names a socket nobody listens on."""
    dead = tmp_path / "docker.sock"
    import socket

    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(dead))  # a socket file with no listener: connection refused
    sock.close()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{dead}")
    for args in (
        ["collect", "--image", "collectbot-vllm:x", "--out", str(tmp_path / "r"), "--smoke"],
        ["image", "ensure", "--base-image", "x:1"],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        lines = [ln for ln in result.output.splitlines() if ln.strip()]
        assert len(lines) == 1, result.output
        assert lines[0].startswith(f"error: cannot reach the Docker engine at unix://{dead}")
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


def _valid_pair(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, Path]:
    cases = [gemm_case(m) for m in (1, 2, 4, 8)]
    base = write_record(tmp_path / "base", cases, lambda c: simulated_runs(rng, 1.0))
    cand = write_record(tmp_path / "cand", cases, lambda c: simulated_runs(rng, 1.0))
    return base, cand


@pytest.mark.parametrize(
    ("damage", "needle"),
    [
        ("truncate-parquet", "gemm_perf.parquet: checksum mismatch"),
        ("truncate-run-json", "run.json: not valid JSON"),
        ("rewrite-parquet-garbage", "gemm_samples.parquet: not a readable parquet file"),
        ("drop-file", "gemm_samples.parquet: listed in run.json but missing"),
        ("empty-run-json", "run.json: not valid JSON"),
    ],
)
def test_a_corrupted_or_truncated_baseline_is_one_line(
    tmp_path: Path, rng: np.random.Generator, damage: str, needle: str
) -> None:
    base, cand = _valid_pair(tmp_path, rng)
    if damage == "truncate-parquet":
        path = base / "gemm_perf.parquet"
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "truncate-run-json":
        path = base / RUN_JSON
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "rewrite-parquet-garbage":
        # A writer that produced garbage and checksummed it: the checksum holds, the file not.
        from collector.record import sha256_file

        path = base / "gemm_samples.parquet"
        path.write_bytes(b"PAR1" + os.urandom(200))
        meta = json.loads((base / RUN_JSON).read_text())
        meta["files"]["gemm_samples.parquet"] = sha256_file(path)
        (base / RUN_JSON).write_text(json.dumps(meta))
    elif damage == "drop-file":
        (base / "gemm_samples.parquet").unlink()
    elif damage == "empty-run-json":
        (base / RUN_JSON).write_text("")
    result = runner.invoke(app, ["compare", str(base), str(cand), "--out", str(tmp_path / "c")])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], result.output
    assert "Traceback" not in result.output


def test_a_lost_shard_is_red_coverage_not_a_quiet_pass(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    """Two shards planned, one record came back: compared as if it were the whole run, the
    comparison must not call it green."""
    cases = [gemm_case(m) for m in range(1, 33)]
    from collector.caseplan import shard_of

    base = write_record(tmp_path / "base", cases, lambda c: simulated_runs(rng, 1.0))
    kept = [c for c in cases if shard_of(c.key, 2) == 1]
    assert 0 < len(kept) < len(cases)
    shard = write_record(
        tmp_path / "shard1",
        kept,
        lambda c: simulated_runs(rng, 1.0),
        meta_extra={"shard": [1, 2]},
    )
    out = tmp_path / "cmp"
    result = runner.invoke(app, ["compare", str(base), str(shard), "--out", str(out)])
    assert result.exit_code == 0, result.output
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["verdict"]["level"] == "red", comparison["verdict"]
    coverage = comparison["coverage"]["ops"]["gemm"]
    assert coverage["status"] == "red"
    assert coverage["missing_count"] == len(cases) - len(kept)
    texts = " ".join(f["text"] for f in comparison["coverage"]["findings"])
    assert "shard 1/2" in texts


def test_samples_table_with_a_wrong_type_is_one_line(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    import pyarrow as pa

    from collector.record import sha256_file

    base, cand = _valid_pair(tmp_path, rng)
    path = base / "gemm_perf.parquet"
    table = pq.read_table(path)
    i = table.schema.get_field_index("latency")
    table = table.set_column(i, "latency", pa.array(["fast"] * table.num_rows))
    pq.write_table(table, path)
    meta = json.loads((base / RUN_JSON).read_text())
    meta["files"]["gemm_perf.parquet"] = sha256_file(path)
    (base / RUN_JSON).write_text(json.dumps(meta))
    result = runner.invoke(app, ["compare", str(base), str(cand), "--out", str(tmp_path / "c")])
    assert result.exit_code == 2, result.output
    assert "gemm_perf.parquet: column 'latency'" in result.output


@pytest.mark.slow
@pytest.mark.parametrize("worker_start", ["spawn", "forkserver"])
def test_sigterm_while_the_workers_start_ends_promptly_in_one_line(
    tmp_path: Path, worker_start: str
) -> None:
    """A job cancelled in the first seconds: the workers (which ignore SIGTERM, it is the
    coordinator's to handle) are still importing the framework, or forked from the server
    that does. The collector must not wait for them forever, and must say what happened in
    one line; no worker and no server is left behind."""
    out = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "bot", "collect", "--out", str(out), "--smoke", "--workers", "2",
        "--quiet", "--worker-start", worker_start,
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    workers: list[int] = []
    # Wait until a worker ignores SIGTERM (it has entered worker_main and is importing the
    # framework): from then on only the coordinator can end it.
    while time.monotonic() < deadline and not any(_ignores_sigterm(p) for p in workers):
        workers = [p for p in _descendants(proc.pid) if _is_worker(_cmdline(p))]
        time.sleep(0.005)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    if proc.returncode == 2:  # stopped before the record existed
        assert len(lines) == 1 and "while the workers were starting" in lines[0], stderr
    else:  # the workers were ready in time: a partial record
        assert proc.returncode == 0, stderr
        assert read_record(out).status == "partial"
    assert "Traceback" not in stderr
    time.sleep(1.0)
    left = [pid for pid in workers if _alive(pid)]
    assert not left, f"workers left behind: {left}"  # they would hold the GPU


def _ignores_sigterm(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    ignored = next(line for line in status.splitlines() if line.startswith("SigIgn:"))
    return bool(int(ignored.split()[1], 16) & (1 << (signal.SIGTERM - 1)))


def _descendants(pid: int) -> list[int]:
    """Children, and theirs: forked workers are the forkserver's children."""
    from tests.test_secrets_env import _children

    out, todo = [], [pid]
    while todo:
        kids = _children(todo.pop())
        out += kids
        todo += kids
    return out


def _is_worker(cmdline: bytes) -> bool:
    """A spawned worker, or the forkserver and the workers forked from it."""
    return b"spawn_main" in cmdline or b"multiprocessing.forkserver" in cmdline


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
