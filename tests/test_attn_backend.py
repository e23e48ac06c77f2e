"""The attention backend as a case dimension: validation, keys, rows, plans and comparisons."""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bot.compare.comparison import compare_records
from bot.compare.stats import Settings
from collector.attn_backends import ATTN_BACKENDS, AUTO, VLLM_ATTN_BACKENDS
from collector.backends.vllm_support import attention_shape, check_selected_backend
from collector.caseplan import Case, CaseSelector, build_plan
from collector.engine import CollectConfig
from collector.errors import UserError
from collector.record import read_record
from collector.record.combine import case_from_row
from tests.factories import attention_params, simulated_runs, write_record

ROOT = Path(__file__).resolve().parent.parent
# A stored H200 vLLM record collected before the field existed (the `vllm` case sets).
STORED = ROOT / "bench" / "results" / "h200-2026-11-30" / "vllm-attn2.tar"
ATTN_OPS = ("context_attention", "generation_attention")
LEGACY_KEY = (
    "generation_attention:batch_size=3,isl=1,num_heads=8,num_key_value_heads=2,head_dim=64,"
    "beam_width=1,attn_dtype=bfloat16,kv_cache_dtype=fp8,step=37,window_size=0"
)


def test_auto_is_left_out_of_the_key_and_a_named_backend_is_in_it() -> None:
    plain = Case.build("generation_attention", attention_params())
    explicit = Case.build("generation_attention", attention_params(attn_backend=AUTO))
    assert plain.key == explicit.key == LEGACY_KEY
    fi = Case.build("generation_attention", attention_params(attn_backend="FLASHINFER"))
    assert fi.key == LEGACY_KEY + ",attn_backend=FLASHINFER"
    assert fi.params["attn_backend"] == "FLASHINFER" and "attn_backend" not in plain.params


@pytest.mark.parametrize("value", ["flashinfer", "VLLM_FLASH_ATTN", "TURBOQUANT", 3])
def test_an_unknown_backend_is_refused_naming_the_field(value: object) -> None:
    with pytest.raises(UserError, match=r"cases\.yaml: field 'attn_backend' must be auto, FLASH"):
        Case.build("context_attention", attention_params(attn_backend=value), source="cases.yaml")


def test_gemm_has_no_attention_backend() -> None:
    with pytest.raises(UserError, match="unknown field 'attn_backend'"):
        Case.build("gemm", {"gemm_dtype": "bfloat16", "m": 1, "n": 8, "k": 8, "attn_backend": AUTO})


def test_the_run_option_fills_cases_that_name_none(tmp_path: Path) -> None:
    cases = tmp_path / "cases.yaml"
    grid = {k: [v] for k, v in attention_params().items()}
    named = {**grid, "batch_size": [5], "attn_backend": ["FLASH_ATTN"]}
    cases.write_text(
        json.dumps(
            {"op": "generation_attention", "sets": {"default": [{"grid": grid}, {"grid": named}]}}
        )
    )
    plan = build_plan(["generation_attention"], case_file=cases)
    assert [c.params.get("attn_backend", AUTO) for c in plan.cases] == [AUTO, "FLASH_ATTN"]
    forced = build_plan(
        ["generation_attention"], case_file=cases, run_values={"attn_backend": "FLASHINFER"}
    )
    # The option fills the case that named none; the case that named one keeps it.
    assert [c.params["attn_backend"] for c in forced.cases] == ["FLASHINFER", "FLASH_ATTN"]
    assert forced.hash != plan.hash
    selected = CaseSelector.parse("attn_backend=auto")
    assert [c.key for c in plan.cases if selected.matches(c)] == [plan.cases[0].key]


def test_only_the_vllm_backend_may_be_asked_for_one(tmp_path: Path) -> None:
    cfg = CollectConfig(
        out=tmp_path, backend="torch", ops=ATTN_OPS, case_set="smoke", attn_backend="FLASHINFER"
    )
    with pytest.raises(UserError, match="only the vllm backend chooses an attention backend"):
        cfg.base_plan()
    CollectConfig(out=tmp_path, backend="torch", ops=ATTN_OPS, case_set="smoke").base_plan()
    vllm = CollectConfig(
        out=tmp_path, backend="vllm", ops=ATTN_OPS, case_set="smoke", attn_backend="FLASHINFER"
    )
    assert all(c.key.endswith(",attn_backend=FLASHINFER") for c in vllm.base_plan().cases)


def test_collect_option_is_one_line_error_and_reaches_the_plan() -> None:
    env_cmd: list[str] = [sys.executable, "-m", "bot", "collect", "--backend", "vllm", "--ops"]
    bad = subprocess.run(
        [*env_cmd, "context_attention", "--attn-backend", "FLASH_ATTN_X", "--plan-only"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("error: ") and bad.stderr.count("\n") == 1
    assert "--attn-backend" in bad.stderr and "FLASH_ATTN_X" in bad.stderr
    good = subprocess.run(
        [
            *env_cmd,
            "context_attention",
            "--case-set=vllm-smoke",
            "--attn-backend=FLASH_ATTN",
            "--plan-only",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    keys = json.loads(good.stdout)["case_keys"]
    assert len(keys) == 2 and all(k.endswith(",attn_backend=FLASH_ATTN") for k in keys)


def test_the_backend_reaches_vllms_engine_arguments() -> None:
    assert (
        attention_shape("context_attention", attention_params(isl=4)).vllm_attention_backend is None
    )
    for name in VLLM_ATTN_BACKENDS:
        shape = attention_shape("generation_attention", attention_params(attn_backend=name))
        assert shape.vllm_attention_backend == name
    check_selected_backend(AUTO, "FLASHINFER")
    check_selected_backend("FLASHINFER", "FLASHINFER")
    with pytest.raises(RuntimeError, match="asked for attention backend FLASHINFER; vLLM built"):
        check_selected_backend("FLASHINFER", "FLASH_ATTN")


def _stored(tmp_path: Path) -> Path:
    with tarfile.open(STORED) as tar:
        tar.extractall(tmp_path, filter="data")
    return next(p for p in tmp_path.iterdir() if p.is_dir())


def test_stored_baselines_keep_their_keys(tmp_path: Path) -> None:
    """A record from before the field reads, its rows rebuild to their own keys, and today's
    `vllm` case sets plan exactly the keys it holds."""
    record = read_record(_stored(tmp_path))
    stored: set[str] = set()
    for op in ATTN_OPS:
        table = record.perf[op]
        assert "attn_backend" not in table.column_names and table.num_rows
        for row in table.to_pylist():
            assert case_from_row(op, row).key == row["case_key"]
            stored.add(row["case_key"])
    planned = {c.key for c in build_plan(list(ATTN_OPS), case_set="vllm").cases}
    assert planned == stored


def _run(tmp_path: Path, name: str, backend: str, kernel: str, scale: float) -> Path:
    rng = np.random.default_rng(7)
    cases = [
        Case.build(op, attention_params(isl=isl, attn_backend=backend))
        for op, isl in (("context_attention", 64), ("generation_attention", 1))
        for _ in (0,)
    ] + [
        Case.build("generation_attention", attention_params(batch_size=b, attn_backend=backend))
        for b in (8, 16)
    ]
    return write_record(
        tmp_path / name,
        cases,
        lambda c: simulated_runs(rng, 0.02 * scale),
        kernel_for=lambda c: kernel,
        meta_extra={"backend": "vllm", "framework": "vllm", "framework_version": "0.24.0"},
    )


def test_rows_record_the_backend_and_merge_keeps_it(tmp_path: Path) -> None:
    run = _run(tmp_path, "fi", "FLASHINFER", "vllm_flashinfer_fidecode", 1.0)
    table = pq.read_table(run / "generation_attention_perf.parquet")
    assert set(table.column("attn_backend").to_pylist()) == {"FLASHINFER"}
    for row in table.to_pylist():
        assert case_from_row("generation_attention", row).key == row["case_key"]
    auto = _run(tmp_path, "auto", AUTO, "vllm_flash_attn_fa3", 1.0)
    rows = pq.read_table(auto / "generation_attention_perf.parquet").to_pylist()
    assert {r["attn_backend"] for r in rows} == {AUTO}
    assert all("attn_backend" not in r["case_key"] for r in rows)


@pytest.mark.parametrize("base_backend", [AUTO, "FLASH_ATTN"])
def test_fa3_and_flashinfer_runs_are_never_paired(tmp_path: Path, base_backend: str) -> None:
    """Same shapes, FlashInfer 2.5x slower: no case in common, no regression."""
    base = _run(tmp_path, "fa3", base_backend, "vllm_flash_attn_fa3", 1.0)
    cand = _run(tmp_path, "fi", "FLASHINFER", "vllm_flashinfer_fidecode", 2.5)
    result = compare_records(read_record(base), read_record(cand), Settings())
    summary = result["latency"]["summary"]
    assert summary["matched"] == 0 and summary["added"] == summary["removed"] == 4
    assert not [c for c in result["latency"]["cases"] if c.get("verdict") == "regressed"]
    assert result["verdict"]["headline"].startswith("no case in common")
    assert result["verdict"]["level"] != "red"
    same = compare_records(read_record(cand), read_record(cand), Settings())
    assert same["latency"]["summary"]["matched"] == 4  # the same backend does pair


def _sm90_priorities(vllm_file: str) -> list[str]:
    """The non-MLA, non-SM100 list of `_get_backend_priorities` in vLLM's installed source
    (platforms/cuda.py imports the CUDA driver, so it is read, not imported)."""
    source = (Path(vllm_file).parent / "platforms" / "cuda.py").read_text()
    func = next(
        n
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.FunctionDef) and n.name == "_get_backend_priorities"
    )
    lists = [n.value for n in ast.walk(func) if isinstance(n, ast.Return)]
    last = max((n for n in lists if isinstance(n, ast.List)), key=lambda n: n.lineno)
    return [e.attr for e in last.elts if isinstance(e, ast.Attribute)]


def test_the_names_are_vllms() -> None:
    """Against the installed vLLM's registry and SM90 priority list, where vLLM imports."""
    try:
        import vllm
        from vllm.v1.attention.backends.registry import AttentionBackendEnum
    except Exception as exc:
        pytest.skip(f"vLLM does not import here ({type(exc).__name__})")
    assert set(VLLM_ATTN_BACKENDS) <= set(AttentionBackendEnum.__members__)
    sm90 = _sm90_priorities(vllm.__file__)
    assert [b for b in sm90 if b != "TURBOQUANT"] == list(VLLM_ATTN_BACKENDS)
    assert ATTN_BACKENDS[0] == AUTO
    # How EngineArgs(attention_backend=...) becomes attention_config.backend (arg_utils.py).
    from vllm.config.attention import AttentionConfig
    from vllm.engine.arg_utils import EngineArgs

    assert "attention_backend" in {f.name for f in dataclasses.fields(EngineArgs)}
    assert AttentionConfig.validate_backend_before(AUTO) is None
    for name in VLLM_ATTN_BACKENDS:
        assert AttentionConfig.validate_backend_before(name) is AttentionBackendEnum[name]


def test_a_shards_full_plan_is_rebuilt_with_its_backend(tmp_path: Path) -> None:
    """conclude rebuilds the unsharded plan from run.json: the run's backend must be in it."""
    from bot.conclude import full_plan_of

    cfg = CollectConfig(
        out=tmp_path, backend="vllm", ops=ATTN_OPS, case_set="vllm-smoke", attn_backend="FLASHINFER"
    )
    plan = cfg.base_plan()
    meta = {
        "plan_source": plan.source,
        "backend": "vllm",
        "ops": list(ATTN_OPS),
        "case_set": "vllm-smoke",
        "attn_backend": "FLASHINFER",
    }
    rebuilt = full_plan_of(meta)
    assert rebuilt is not None and rebuilt["plan_hash"] == plan.hash
    older = full_plan_of({k: v for k, v in meta.items() if k != "attn_backend"})
    assert older is not None and not any("attn_backend" in k for k in older["case_keys"])


def test_a_confirmation_selector_tells_backends_of_one_shape_apart() -> None:
    """The campaign's confirmation pass selects flagged cases by their fields: a case at the
    default backend must not pull in its siblings that name another one (and back)."""
    from bot.campaign.runner import selector_for_keys
    from bot.compare.latency import CaseTable
    from collector.ops import get_op

    cases = [
        Case.build("generation_attention", attention_params()),
        Case.build("generation_attention", attention_params(attn_backend="FLASHINFER")),
        Case.build("generation_attention", attention_params(attn_backend="FLASH_ATTN")),
    ]
    spec = get_op("generation_attention")
    rows = [spec.with_defaults(c.params) for c in cases]
    names = [*spec.field_names, *(f.name for f in spec.optional)]
    table = CaseTable(
        {
            "key": np.array([c.key for c in cases], dtype=object),
            "op": np.array([c.op for c in cases], dtype=object),
        },
        [(n, np.array([r.get(n) for r in rows], dtype=object)) for n in names],
    )
    for case in cases:
        selector = CaseSelector.parse(selector_for_keys(table, [case.key]))
        assert [c.key for c in cases if selector.matches(c)] == [case.key]
