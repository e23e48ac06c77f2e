"""comparison.json has a documented, versioned schema, and real outputs validate against it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from bot.compare.comparison import SCHEMA_FILE, SCHEMA_VERSION, compare_runs, load_comparison
from collector.errors import UserError
from collector.record import read_record
from tests.factories import failure, gemm_case, simulated_runs, write_record
from tests.schema_check import assert_valid_comparison, validator

CASES = [gemm_case(m) for m in (1, 2, 4, 8)]


def _comparison(tmp_path: Path, rng: np.random.Generator) -> Path:
    base = write_record(
        tmp_path / "base",
        CASES,
        lambda c: simulated_runs(rng, 1.0),
        failures=[failure(gemm_case(99), "old bug")],
    )
    cand = write_record(
        tmp_path / "cand",
        CASES,
        lambda c: (
            None if c.params["m"] == 8 else simulated_runs(rng, 1.3 if c.params["m"] == 4 else 1.0)
        ),
        failures=[failure(CASES[3], "CUDA error: an illegal memory access", cls="cuda_fatal")],
        kernel_for=lambda c: "cutlass" if c.params["m"] == 1 else "torch.nn.functional.linear",
    )
    out = tmp_path / "cmp"
    compare_runs(read_record(base), read_record(cand)).write(out)
    return out


def test_the_schema_is_valid_and_versioned() -> None:
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema_version"] == {"const": SCHEMA_VERSION}


def test_a_comparison_with_every_section_validates(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    data = assert_valid_comparison(_comparison(tmp_path, rng))
    assert data["failure_groups"]["new"] and data["failure_groups"]["resolved"]
    assert data["latency"]["dispatch_changes"]
    assert {c["verdict"] for c in data["latency"]["cases"]} >= {"regressed"}
    assert load_comparison(tmp_path / "cmp")["schema_version"] == SCHEMA_VERSION


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("baseline", "kind"), "run"),
        (("verdict", "level"), "orange"),
        (("latency", "summary", "verdicts", "regressed"), -1),
        (("schema_version",), 1),
    ],
)
def test_the_schema_rejects_what_the_contract_forbids(
    tmp_path: Path, rng: np.random.Generator, path: tuple[str, ...], value: object
) -> None:
    data = json.loads((_comparison(tmp_path, rng) / "comparison.json").read_text())
    broken = copy.deepcopy(data)
    target = broken
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert not validator().is_valid(broken)
    missing = copy.deepcopy(data)
    del missing["latency"]["cases"][0]["verdict"]
    assert not validator().is_valid(missing)


def test_an_older_schema_version_is_a_one_line_error(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    out = _comparison(tmp_path, rng)
    data = json.loads((out / "comparison.json").read_text())
    data["schema_version"] = 1
    (out / "comparison.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match="unknown schema_version 1"):
        load_comparison(out)
