"""The default path's baseline: the same GPUs when the store has them, else the same model
compared across GPUs through the calibration panels (docs/fleet.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from bench.fleet_simulation import _panel
from bot.cli import app
from bot.compare.comparison import compare_runs
from bot.compare.store_baseline import SAME_GPU, SAME_MODEL, baseline_from_store
from bot.store import RunStore
from collector.caseplan import shard_of
from collector.record import read_record
from tests.factories import simulated_runs, write_record
from tests.github_server import GitHubServer
from tests.test_result_publish import CASES, LABEL, RUN_ID, _plan

runner = CliRunner()


def _record(
    path: Path, rng: np.random.Generator, uuid: str, speed: float = 1.0, **meta: Any
) -> Path:
    cases = meta.pop("cases", CASES)
    extra = {
        "device": {"name": "NVIDIA H200", "kind": "cuda", "uuid": uuid},
        "panel": _panel(rng, uuid, [speed] * 13),
        **meta,
    }
    return write_record(path, cases, lambda c: simulated_runs(rng, 0.1 * speed), meta_extra=extra)


def test_the_store_prefers_a_baseline_from_the_same_gpu(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    store = RunStore(str(tmp_path / "store"))
    on_a = store.put(_record(tmp_path / "a", rng, "GPU-a"), ref="main")
    on_b = store.put(_record(tmp_path / "b", rng, "GPU-b", 1.02), ref="main")  # newer
    assert on_a.gpu_uuids == ["GPU-a"] and on_b.gpu_uuids == ["GPU-b"]
    assert on_a.summary()["gpu_uuids"] == ["GPU-a"]

    cand = read_record(_record(tmp_path / "cand-a", rng, "GPU-a"))
    base, baseline = baseline_from_store(cand, store.url, tmp_path / "got-a", ref="main")
    assert base.meta["run_id"] == "a" and baseline.store is not None
    assert baseline.store["selection"] == SAME_GPU
    data = compare_runs(base, cand, baseline=baseline).data
    assert data["latency"]["gpu"]["mode"] == "same-gpu"

    # No stored run from GPU-c: the newest of the model, compared across GPUs, calibrated.
    cand = read_record(_record(tmp_path / "cand-c", rng, "GPU-c", 1.02))
    base, baseline = baseline_from_store(cand, store.url, tmp_path / "got-c", ref="main")
    assert base.meta["run_id"] == "b" and baseline.store is not None
    assert baseline.store["selection"] == SAME_MODEL
    data = compare_runs(base, cand, baseline=baseline).data
    assert data["latency"]["gpu"]["mode"] == "cross-gpu-calibrated"
    assert data["baseline"]["store"]["selection"] == SAME_MODEL


@pytest.mark.parametrize(("shard_gpu", "expect_run", "mode"), [
    ("GPU-a", "a", "same-gpu"),
    ("GPU-c", "b", "cross-gpu-calibrated"),
])  # fmt: skip
def test_conclude_takes_the_same_gpu_baseline_or_calibrates(
    gh: GitHubServer,
    tmp_path: Path,
    rng: np.random.Generator,
    shard_gpu: str,
    expect_run: str,
    mode: str,
) -> None:
    # The shipped default path's last step: shards measured on `shard_gpu`, a store with
    # main's baseline on GPU-a (older) and GPU-b (newer).
    plan = _plan(tmp_path, "Codertocat", [LABEL], gh)
    ref = json.loads(plan.read_text())["base_ref"]
    store = RunStore(str(tmp_path / "store"))
    store.put(_record(tmp_path / "a", rng, "GPU-a"), ref=ref)
    store.put(_record(tmp_path / "b", rng, "GPU-b", 1.02), ref=ref)
    for i in (1, 2):
        mine = [c for c in CASES if shard_of(c.key, 2) == i]
        _record(
            tmp_path / "shards" / f"shard-{i}",
            rng,
            shard_gpu,
            cases=mine,
            shard=[i, 2],
            run_id=f"s{i}",
        )
    out = tmp_path / "concluded"
    result = runner.invoke(
        app,
        [
            *("conclude", "--plan", str(plan), "--shards-dir", str(tmp_path / "shards")),
            *("--shards", "2", "--store", store.url, "--out", str(out), "--run-id", str(RUN_ID)),
        ],
    )
    assert result.exit_code == 0, result.output
    cmp = json.loads((out / "comparison" / "comparison.json").read_text())
    assert cmp["baseline"]["run_id"] == expect_run
    assert cmp["latency"]["gpu"]["mode"] == mode
    assert cmp["verdict"]["level"] == "green"
    assert cmp["latency"]["summary"]["verdicts"]["same"] == len(CASES)
    merged = json.loads((out / "run" / "run.json").read_text())
    assert set(merged["panel"]["devices"]) == {shard_gpu}
    body = (out / "comment.md").read_text()
    assert ("cross-GPU, calibrated" in body) == (mode != "same-gpu")
