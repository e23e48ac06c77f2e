"""bench/gpu/jit_warm.py on the CPU: every case of the chosen dtypes is prepared and called
once in the spawned processes, and a case that cannot run is reported, not fatal."""

from __future__ import annotations

import json
from pathlib import Path

from bench.gpu import jit_warm
from bench.gpu import precision_session as ps


def test_warms_the_chosen_dtypes_and_reports_the_cases_that_fail(tmp_path: Path) -> None:
    out = tmp_path / "warm.json"
    args = ["--cases", str(ps.CASE_FILE), "--case-set", "cpu", "--dtypes", "float32"]
    assert jit_warm.main([*args, "--jobs", "2", "--backend", "torch", "--device", "cpu",
                          "--out", str(out)]) == 0  # fmt: skip
    report = json.loads(out.read_text())
    floats = [s for s in ps.CPU_SET if s[0] == "float32"]
    assert report["cases"] == len(floats) == len(report["rows"]) and report["failed"] == []
    assert all(r["case"].startswith("gemm:gemm_dtype=float32") for r in report["rows"])
    # Block-FP8 has no CPU path: such a case is listed with its error, the others go on.
    cases = tmp_path / "cases.yaml"
    cases.write_text(
        "op: gemm\nsets:\n  default:\n    - cases:\n"
        "        - {gemm_dtype: fp8_block, m: 16, n: 256, k: 256}\n"
        "        - {gemm_dtype: bfloat16, m: 16, n: 256, k: 256}\n"
    )
    args = ["--cases", str(cases), "--dtypes", "fp8_block,bfloat16", "--jobs", "2"]
    assert jit_warm.main([*args, "--backend", "torch", "--device", "cpu", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["cases"] == 2 and len(report["failed"]) == 1
    failed = report["failed"][0]
    assert "fp8_block" in failed["case"] and "no block-scaled fp8 GEMM" in failed["error"]
