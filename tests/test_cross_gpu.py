"""Comparisons across GPUs: the panels' offset fit, calibrated verdicts, and none without it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bench import fleet_simulation
from bot.compare.comparison import compare_runs
from bot.compare.gpu_offset import MIN_KERNELS, MIN_OFFSET_SD, fit_offset
from collector.caseplan import CaseSelector
from collector.engine import CollectConfig, run_collection
from collector.panel import PANEL_VERSION, read_panel
from collector.record import read_record
from collector.timing import Protocol
from tests.schema_check import assert_valid_comparison


def _panel(
    rng: np.random.Generator, offset_of: Callable[[float], float], runs: int = 5
) -> dict[str, tuple[float, list[float]]]:
    out = {}
    for i, ms in enumerate(np.geomspace(0.01, 3.0, 12)):
        level = ms * np.exp(offset_of(float(ms)))
        run_ms = list(level * np.exp(rng.normal(0, 0.002, runs)))
        out[f"k{i}"] = (float(np.mean(run_ms)), run_ms)
    return out


def test_the_fit_recovers_a_size_dependent_offset_with_an_honest_sd(
    rng: np.random.Generator,
) -> None:
    truth = fleet_simulation.true_offset
    base, cand = _panel(rng, lambda ms: 0.0), _panel(rng, truth)
    fit = fit_offset(base, cand)
    assert fit is not None and len(fit.coef) == 3
    grid = np.geomspace(0.012, 2.5, 20)
    mean, sd = fit.predict(grid)
    errors = np.abs(mean - np.array([truth(g) for g in grid]))
    assert errors.max() < 0.003  # within 0.3% everywhere on the panel's range
    assert np.all(sd >= MIN_OFFSET_SD) and np.mean(errors / sd) < 1.5
    # Outside the panel's latencies the curve is held at its edge.
    edge, _ = fit.predict(np.array([0.001, 0.0001, 30.0, 300.0]))
    assert edge[0] == pytest.approx(edge[1]) and edge[2] == pytest.approx(edge[3])
    # A kernel that sits 1% off the curve is scatter: it widens the sd, not the curve.
    cand["k5"] = (cand["k5"][0] * 1.01, [v * 1.01 for v in cand["k5"][1]])
    cand["k8"] = (cand["k8"][0] * 0.99, [v * 0.99 for v in cand["k8"][1]])
    scattered = fit_offset(base, cand)
    assert scattered is not None and scattered.tau > 0.003
    assert np.all(scattered.predict(grid)[1] > sd)


def test_too_few_common_kernels_give_no_fit(rng: np.random.Generator) -> None:
    base, cand = _panel(rng, lambda ms: 0.0), _panel(rng, lambda ms: 0.02)
    few = dict(list(cand.items())[: MIN_KERNELS - 1])
    assert fit_offset(base, few) is None
    assert fit_offset(base, dict(list(cand.items())[:MIN_KERNELS])) is not None


@pytest.mark.parametrize(
    "panel",
    [
        None,
        "x",
        {"version": "other", "devices": {"G": {"kernels": []}}},
        {"version": PANEL_VERSION, "devices": []},
        {"version": PANEL_VERSION, "devices": {"G": {"kernels": [{"key": 1}]}}},
        {
            "version": PANEL_VERSION,
            "devices": {
                "G": {
                    "kernels": [
                        {"key": "a", "latency_ms": -1, "run_ms": [1.0]},
                        {"key": "b", "latency_ms": True, "run_ms": [1.0]},
                        {"key": "c", "latency_ms": 1.0, "run_ms": "1"},
                        {"key": "d", "latency_ms": float("nan"), "run_ms": [1.0]},
                    ]
                }
            },
        },
    ],
)
def test_a_malformed_panel_reads_as_none(panel: object) -> None:
    # run.json comes from the measured side: a malformed panel never reaches the fit.
    assert read_panel(panel) == {}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_simulated_fleet_calibrated_verdicts_hold(tmp_path: Path, seed: int) -> None:
    # The two H200s (offset +0.1% to +2.8% by size, per-kernel scatter) with A/A
    # noise like the live sessions: calibrated, an unchanged PR flags at most 1 of 64 and a
    # +3% canary on cases >= 40 us is found in >= 90%; ignoring the GPUs flags many;
    # without panels, nothing is called changed and the verdict is never green or red.
    result = fleet_simulation.simulate(seed, tmp_path)
    assert result["unchanged"]["flagged"] <= 1
    canary = result["canary"]
    assert canary["detected"] >= 0.9 * canary["slowed"] and canary["false_flags"] <= 1
    assert result["same_gpu"]["flagged"] == 0
    assert result["ignoring_offset"]["flagged"] >= 10
    assert "cross-GPU, calibrated: GPUs differ by" in result["unchanged"]["headline"]
    plain = result["uncalibrated"]
    assert plain["mode"] == "cross-gpu-uncalibrated" and plain["level"] == "yellow"
    assert plain["flagged"] == 0 and plain["verdicts"] == {"inconclusive": 64}


def test_cpu_stand_in_devices_are_compared_across_devices_through_their_panels(
    tmp_path: Path,
) -> None:
    # Real collections: the baseline on one CPU worker (stand-in device 0), the candidate
    # on two (devices 0 and 1). Cases on device 0 are same-device; those on device 1 cross
    # devices and are calibrated by the panels both records carry.
    protocol = Protocol(
        runs=3, samples=3, warmup=1, target_sample_ms=0.3, idle_ratio=0.0, target_ci=0.0
    )

    def collect(name: str, workers: int) -> Path:
        cfg = CollectConfig(
            out=tmp_path / name,
            case_set="smoke",
            case_filter=CaseSelector.parse("gemm_dtype=float32"),
            protocol=replace(protocol),
            workers=workers,
            quiet=True,
        )
        run_collection(cfg)
        return tmp_path / name

    base, cand = read_record(collect("base", 1)), read_record(collect("cand", 2))
    result = compare_runs(base, cand)
    data = assert_valid_comparison(result.data)
    gpu = data["latency"]["gpu"]
    assert gpu["cases"]["same"] == 4 and gpu["cases"]["calibrated"] == 4
    assert gpu["mode"] == "cross-gpu-calibrated"
    [pair] = gpu["pairs"]
    assert pair["base"]["uuid"].endswith("-0") and pair["cand"]["uuid"].endswith("-1")
    assert pair["calibrated"] and len(pair["fit"]["kernels"]) == 4
    matches = {str(m) for m in result.cases["gpu_match"]}
    assert matches == {"same", "calibrated"}
    crossed = result.cases["gpu_match"] == "calibrated"
    assert np.all(np.isfinite(result.cases["offset"][crossed]))
    assert np.all(np.isnan(result.cases["offset"][~crossed]))
    assert "cross-GPU, calibrated" in data["verdict"]["headline"]


def test_records_without_per_row_gpus_fall_back_to_the_record_device(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    # Records written before per-row devices: the perf table lacks the gpu_* columns; the
    # reader accepts it and the comparison takes the record's device UUID for every case.
    import json

    import pyarrow.parquet as pq

    from collector.record import sha256_file
    from tests.factories import gemm_case, simulated_runs, write_record

    cases = [gemm_case(m) for m in (1, 2, 4)]

    def old(name: str, uuid: str | None) -> Path:
        device = {"name": "NVIDIA H200", "kind": "cuda", **({"uuid": uuid} if uuid else {})}
        out = write_record(
            tmp_path / name,
            cases,
            lambda c: simulated_runs(rng, 0.1),
            meta_extra={"device": device},
        )
        perf = out / "gemm_perf.parquet"
        table = pq.read_table(perf)
        pq.write_table(table.drop(["gpu_index", "gpu_uuid", "gpu_name"]), perf)
        meta = json.loads((out / "run.json").read_text())
        meta["files"]["gemm_perf.parquet"] = sha256_file(perf)
        (out / "run.json").write_text(json.dumps(meta))
        return out

    a, b = read_record(old("a", "GPU-1")), read_record(old("b", "GPU-2"))
    assert "gpu_uuid" not in a.perf["gemm"].column_names
    assert compare_runs(a, read_record(old("c", "GPU-1"))).data["latency"]["gpu"]["mode"] == (
        "same-gpu"
    )
    assert compare_runs(a, b).data["latency"]["gpu"]["cases"]["uncalibrated"] == 3
    unknown = compare_runs(read_record(old("d", None)), b).data
    assert unknown["latency"]["gpu"]["mode"] == "unknown"
    assert "(" not in unknown["verdict"]["headline"]  # nothing claimed about the GPUs
