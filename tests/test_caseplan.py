from __future__ import annotations

from pathlib import Path

import pytest

from collector.caseplan import Case, CaseSelector, build_plan
from collector.errors import UserError


def test_builtin_smoke_plan_is_a_grid_with_stable_keys_and_hash() -> None:
    plan = build_plan(("gemm",), case_set="smoke")
    assert len(plan.cases) == 2 * 2 * 2 * 2
    assert len(build_plan(("gemm",)).cases) == 3 * 10 * 3 * 3
    keys = [c.key for c in plan.cases]
    assert len(set(keys)) == len(keys)
    assert keys[0] == "gemm:gemm_dtype=bfloat16,m=8,n=256,k=256"
    assert plan.hash == build_plan(("gemm",), case_set="smoke").hash
    assert plan.hash != build_plan(("gemm",), case_set="demo").hash


def test_case_file_grid_and_explicit_cases_are_merged_without_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "cases.yaml"
    path.write_text(
        "op: gemm\n"
        "sets:\n"
        "  default:\n"
        "    - grid: {gemm_dtype: [bfloat16], m: [1, 2], n: 64, k: 64}\n"
        "    - cases: [{gemm_dtype: bfloat16, m: 1, n: 64, k: 64}, {gemm_dtype: fp8, m: 3, n: 64, k: 64}]\n"
    )
    plan = build_plan(("gemm",), case_file=path)
    assert [c.params["m"] for c in plan.cases] == [1, 2, 3]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (
            "op: gemm\nsets:\n  default:\n    - grid: {gemm_dtype: [bf16], m: [1], n: [1]}\n",
            "missing field 'k'",
        ),
        (
            "op: gemm\nsets:\n  default:\n    - grid: {gemm_dtype: [bf16], m: [1], n: [1], k: [1], z: [1]}\n",
            "unknown field 'z'",
        ),
        (
            "op: gemm\nsets:\n  default:\n    - grid: {gemm_dtype: [bf16], m: [0], n: [1], k: [1]}\n",
            "must be positive",
        ),
        (
            "op: gemm\nsets:\n  default:\n    - grid: {gemm_dtype: [bf16], m: [x], n: [1], k: [1]}\n",
            "must be an integer",
        ),
        ("op: conv\nsets:\n  default: []\n", "unknown op 'conv'"),
        ("op: gemm\nsets: {other: []}\n", "no case set named 'default'"),
        ("op: gemm\nsets: [\n", "not valid YAML"),
        ("- 1\n", "needs 'op' and 'sets'"),
    ],
)
def test_malformed_case_files_name_the_file_and_the_problem(
    tmp_path: Path, body: str, needle: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    with pytest.raises(UserError) as err:
        build_plan(("gemm", "conv") if "conv" in body else ("gemm",), case_file=path)
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


def test_selector_grammar() -> None:
    case = Case.build("gemm", {"gemm_dtype": "bfloat16", "m": 128, "n": 256, "k": 512})
    assert CaseSelector.parse("gemm_dtype=bfloat16,m=128").matches(case)
    assert CaseSelector.parse("m=1|128").matches(case)
    assert not CaseSelector.parse("gemm_dtype=fp8").matches(case)
    assert CaseSelector.parse("gemm_dtype=fp8;op=gemm,k=512").matches(case)
    with pytest.raises(UserError, match="field=value"):
        CaseSelector.parse("m128")


def test_filter_and_limit_shrink_the_plan() -> None:
    full = build_plan(("gemm",), case_set="smoke")
    some = build_plan(("gemm",), case_set="smoke", case_filter=CaseSelector.parse("m=8"), limit=3)
    assert len(some.cases) == 3
    assert all(c.params["m"] == 8 for c in some.cases)
    assert some.hash != full.hash
