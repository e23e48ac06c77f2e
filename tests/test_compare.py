from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bot.compare.comparison import compare_records
from bot.compare.stats import Settings
from collector.failures import FailureRecord
from collector.record import read_record
from tests.factories import failure, gemm_case, simulated_runs, write_record

CASES = [gemm_case(m, n) for m in (1, 16, 64, 256) for n in (1024, 4096)]


def _pair(
    tmp_path: Path,
    rng: np.random.Generator,
    slow: dict[str, float] | None = None,
    base_failures: list[FailureRecord] | None = None,
    cand_failures: list[FailureRecord] | None = None,
    cand_kernel: str = "torch.nn.functional.linear",
    cand_skip: set[str] | None = None,
    cand_status: str = "complete",
) -> dict[str, Any]:
    slow = slow or {}
    true = {c.key: 0.01 * c.params["m"] + 0.05 for c in CASES}
    base = write_record(
        tmp_path / "base", CASES, lambda c: simulated_runs(rng, true[c.key]), failures=base_failures
    )
    cand = write_record(
        tmp_path / "cand",
        CASES,
        lambda c: (
            None
            if c.key in (cand_skip or set())
            else simulated_runs(rng, true[c.key] * slow.get(c.key, 1.0))
        ),
        failures=cand_failures,
        kernel_for=lambda c: cand_kernel if c.params["m"] == 1 else "torch.nn.functional.linear",
        status=cand_status,
    )
    return compare_records(read_record(base), read_record(cand), Settings())


def test_aa_pair_is_green(tmp_path: Path, rng: np.random.Generator) -> None:
    result = _pair(tmp_path, rng)
    assert result["verdict"]["level"] == "green"
    assert result["latency"]["summary"]["verdicts"]["regressed"] == 0
    assert result["latency"]["summary"]["matched"] == len(CASES)


def test_known_slowdown_is_regressed_with_an_interval(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    slowed = {CASES[2].key: 1.10, CASES[5].key: 1.05}
    result = _pair(tmp_path, rng, slow=slowed)
    by_key = {c["key"]: c for c in result["latency"]["cases"]}
    for key, factor in slowed.items():
        case = by_key[key]
        assert case["verdict"] == "regressed"
        assert case["lo"] < factor < case["hi"] or abs(case["ratio"] - factor) < 0.01
    others = [c for k, c in by_key.items() if k not in slowed]
    assert all(c["verdict"] != "regressed" for c in others)
    assert result["verdict"]["level"] == "red"
    assert "2 regressed" in result["verdict"]["headline"]


def test_failure_groups_new_resolved_persisting(tmp_path: Path, rng: np.random.Generator) -> None:
    persisting = failure(CASES[0], "unsupported shape 1")
    resolved = failure(CASES[1], "old bug")
    new = failure(CASES[3], "CUDA error: an illegal memory access", cls="cuda_fatal")
    result = _pair(
        tmp_path,
        rng,
        base_failures=[persisting, resolved],
        cand_failures=[persisting, new],
    )
    fg = result["failure_groups"]
    assert [g["sample_case"] for g in fg["new"]] == [CASES[3].key]
    assert [g["sample_case"] for g in fg["resolved"]] == [CASES[1].key]
    assert [g["sample_case"] for g in fg["persisting"]] == [CASES[0].key]
    assert fg["new"][0]["classification"] == "cuda_fatal"
    assert result["verdict"]["level"] == "red"


def test_systemic_and_investigate_flags(tmp_path: Path, rng: np.random.Generator) -> None:
    failing = [failure(c, f"bad shape {c.params['m']}") for c in CASES[:4]]
    result = _pair(tmp_path, rng, cand_failures=failing)
    group = result["failure_groups"]["new"][0]
    assert group["count"] == 4
    assert group["systemic"] is True
    assert result["failure_groups"]["investigate_ops"] == ["gemm"]


def test_dispatch_change_is_its_own_finding(tmp_path: Path, rng: np.random.Generator) -> None:
    result = _pair(tmp_path, rng, cand_kernel="cutlass_new")
    changes = result["latency"]["dispatch_changes"]
    assert 0.95 < changes[0].pop("geomean") < 1.05
    assert sum(changes[0].pop("verdicts").values()) == 2
    assert changes == [
        {
            "op": "gemm",
            "from": "torch.nn.functional.linear",
            "to": "cutlass_new",
            "count": 2,
            "sample_cases": [CASES[0].key, CASES[1].key],
        }
    ]
    assert result["verdict"]["level"] == "yellow"


def test_missing_rows_and_partial_runs_are_red_coverage(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    result = _pair(tmp_path, rng, cand_skip={c.key for c in CASES[:5]}, cand_status="partial")
    cov = result["coverage"]
    assert cov["ops"]["gemm"]["missing_count"] == 5
    assert cov["ops"]["gemm"]["status"] == "red"
    texts = [f["text"] for f in cov["findings"]]
    assert any("partial" in t for t in texts)
    assert result["verdict"]["level"] == "red"
    assert result["latency"]["summary"]["removed"] == 5


def test_runs_from_two_gpus_without_panels_are_never_judged_and_say_so(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    def record(name: str, uuid: str) -> Path:
        device = {"name": "NVIDIA H200", "kind": "cuda", "uuid": uuid}
        return write_record(
            tmp_path / name,
            CASES,
            lambda c: simulated_runs(rng, 0.1),
            meta_extra={"device": device},
        )

    same = compare_records(
        read_record(record("a", "GPU-1")), read_record(record("b", "GPU-1")), Settings()
    )
    other = compare_records(
        read_record(record("c", "GPU-1")), read_record(record("d", "GPU-2")), Settings()
    )
    assert not any("different GPUs" in w for w in same["warnings"])
    assert same["latency"]["gpu"]["mode"] == "same-gpu"
    assert same["verdict"]["headline"].endswith("(same GPU)")
    # Different GPUs and no calibration panel: no case is regressed, improved or same.
    [warning] = [w for w in other["warnings"] if "different GPUs" in w]
    assert "not judged" in warning and "~3%" in warning
    assert other["latency"]["summary"]["verdicts"]["inconclusive"] == len(CASES)
    assert other["latency"]["gpu"]["cases"]["uncalibrated"] == len(CASES)
    assert other["verdict"]["level"] == "yellow"
    assert "cross-GPU without calibration" in other["verdict"]["headline"]
    assert any("without a calibration panel" in r for r in other["verdict"]["reasons"])
