"""A case stays on one device: sticky assignment on real CPU workers with stand-in identities."""

from __future__ import annotations

import json
import signal
import subprocess
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from collector.assignment import device_slots, sticky_slots
from collector.canary import Canary
from collector.caseplan import CaseSelector
from collector.engine import CollectConfig, run_collection
from collector.panel import CPU_PANEL, PANEL_VERSION
from collector.record import CHECKPOINT, Checkpoint, read_record
from collector.timing import Protocol
from tests.factories import collect_until, run_result

FAST = Protocol(runs=3, samples=3, warmup=1, target_sample_ms=0.3, idle_ratio=0.0, target_ci=0.0)


def test_device_slots_are_balanced_deterministic_and_order_free() -> None:
    keys = [f"gemm:m={i}" for i in range(103)]
    slots = device_slots(keys, 4)
    assert slots == device_slots(list(reversed(keys)), 4)
    counts = Counter(slots.values())
    assert sorted(counts) == [0, 1, 2, 3] and max(counts.values()) - min(counts.values()) <= 1
    # A resumed case follows the UUID of its earlier runs, wherever that device now sits.
    moved = sticky_slots(keys, ["A", "B", "C", "D"], {keys[0]: "C", keys[1]: "gone"})
    assert moved[keys[0]] == 2 and moved[keys[1]] == slots[keys[1]]


def _rows(out: Path) -> dict[str, tuple[int, str]]:
    perf = read_record(out).perf["gemm"].to_pydict()
    return {
        k: (i, u)
        for k, i, u in zip(perf["case_key"], perf["gpu_index"], perf["gpu_uuid"], strict=True)
    }


def _runs_by_device(checkpoint: Path) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}
    for entry in Checkpoint.read(checkpoint):
        if entry["kind"] == "run":
            seen.setdefault(entry["case_key"], set()).add(entry["device_uuid"])
    return seen


def test_every_run_of_a_case_is_on_its_device_across_a_worker_crash(tmp_path: Path) -> None:
    # Three CPU workers act as three devices. One case crashes its worker (SIGSEGV) in its
    # first run: the replacement takes over the same slot and identity, and every other
    # case of that device keeps being measured there.
    crash = "gemm_dtype=float32,m=8,n=256,k=256"
    cfg = CollectConfig(
        out=tmp_path / "run",
        case_set="smoke",
        protocol=FAST,
        workers=3,
        canary=Canary(crash=CaseSelector.parse(crash)),
        quiet=True,
    )
    run_collection(cfg)
    rec = read_record(tmp_path / "run")
    rows = _rows(tmp_path / "run")
    assert len(rows) == 15 and rec.meta["worker_starts"]["replacements"] >= 1
    [failure] = rec.failures
    assert failure.classification == "crash"
    uuids = {d["uuid"] for d in rec.meta["assignment"]["devices"]}
    assert len(uuids) == 3
    expected = device_slots([c for c in [*rows, failure.case_key]], 3)
    for key, (index, uuid) in rows.items():
        assert "|" not in uuid and uuid in uuids  # one device for all its runs
        assert index == expected[key]
        assert uuid == rec.meta["assignment"]["devices"][index]["uuid"]
    crashed_slot = expected[failure.case_key]
    assert sum(1 for i, _ in rows.values() if i == crashed_slot) >= 4
    # The panel ran on every device, FAST's three rounds each.
    panel = rec.meta["panel"]
    assert panel["version"] == PANEL_VERSION and set(panel["devices"]) == uuids
    for device in panel["devices"].values():
        assert len(device["kernels"]) == len(CPU_PANEL)
        assert all(len(k["run_ms"]) == 3 for k in device["kernels"])


def test_a_resumed_collection_keeps_each_case_on_its_device(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = [
        "--workers", "2", "--runs", "30", "--samples", "3", "--target-sample-ms", "1",
        "--idle-ratio", "0", "--quiet", "--target-ci", "0",
    ]  # fmt: skip
    cmd, proc = collect_until(out, args, lambda checkpoint: checkpoint.stat().st_size > 20000)
    checkpoint = out / CHECKPOINT
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    before = _runs_by_device(checkpoint)
    assert before and all(len(v) == 1 for v in before.values())
    resumed = subprocess.run([*cmd, "--resume"], capture_output=True, timeout=400)
    assert resumed.returncode == 0, resumed.stderr.decode()[-2000:]
    rows = _rows(out)
    assert len(rows) == 16
    for key, (_, uuid) in rows.items():
        assert "|" not in uuid
        if key in before:
            assert {uuid} == before[key]
    meta = json.loads((out / "run.json").read_text())
    assert len(meta["resumed_at"]) == 1
    assert {d["cases"] for d in meta["assignment"]["devices"]} == {8}


@pytest.mark.parametrize("workers", [0, 1])
def test_one_device_collections_record_it_on_every_row(tmp_path: Path, workers: int) -> None:
    cfg = CollectConfig(
        out=tmp_path / "run",
        case_set="smoke",
        case_filter=CaseSelector.parse("m=8,gemm_dtype=bfloat16"),
        protocol=replace(FAST, runs=2),
        workers=workers,
        quiet=True,
    )
    run_collection(cfg)
    rec = read_record(tmp_path / "run")
    uuid = rec.meta["device"]["uuid"]
    assert uuid.startswith("CPU-")
    assert set(rec.perf["gemm"].column("gpu_uuid").to_pylist()) == {uuid}
    assert set(rec.meta["panel"]["devices"]) == {uuid}


def test_a_fresh_worker_gets_the_panel_kernels_clock_reference_of_its_device() -> None:
    from collector.aggregate import RunResult
    from collector.engine import Collection
    from collector.record import CheckpointState

    def run(uuid: str, clocks: list[float | None]) -> RunResult:
        return run_result("k", 0, [1.0], clock_mhz=clocks, device_uuid=uuid)

    coll = Collection.__new__(Collection)
    coll.device_infos = [{"uuid": "GPU-a"}, {"uuid": "GPU-b"}]
    coll.state = CheckpointState(panel=[run("GPU-a", [1900.0, None]), run("GPU-b", [1980.0])])
    assert coll.panel_clock_reference(0, "k") == 1900.0
    assert coll.panel_clock_reference(1, "k") == 1980.0
    assert coll.panel_clock_reference(1, "other") is None
