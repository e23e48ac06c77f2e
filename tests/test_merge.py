"""collectbot merge: shards of one plan become one record; gaps and duplicates are reported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.compare.comparison import compare_records
from bot.merge import load_plan, merge_shards
from collector.caseplan import Case, shard_of
from collector.errors import UserError
from collector.record import RUN_JSON, read_record
from tests.factories import failure, gemm_case, simulated_runs, write_record

runner = CliRunner()
CASES = [gemm_case(m, n) for m in (1, 2, 4, 8, 16, 32) for n in (256, 512)]
N = 3


def _plan(tmp: Path, cases: list[Case] = CASES) -> Path:
    path = tmp / "plan.json"
    path.write_text(
        json.dumps({"plan_hash": "p123", "case_keys": [c.key for c in cases], "shard": None})
    )
    return path


def _shard(
    tmp: Path,
    rng: np.random.Generator,
    index: int,
    n: int = N,
    *,
    name: str | None = None,
    status: str = "complete",
    cases: list[Case] = CASES,
    fail: bool = False,
    **meta: Any,
) -> Path:
    mine = [c for c in cases if shard_of(c.key, n) == index]
    failures = [failure(mine[0], "kernel exploded")] if fail and mine else []
    return write_record(
        tmp / (name or f"shard-{index}"),
        mine,
        lambda c: None if failures and c is mine[0] else simulated_runs(rng, c.params["m"]),
        failures=failures,
        status=status,
        meta_extra={
            "shard": [index, n],
            "run_id": name or f"shard-{index}",
            "collector_hash": "c0ffee",
            **meta,
        },
    )


def test_cases_spread_over_every_shard() -> None:
    assert {shard_of(c.key, N) for c in CASES} == {1, 2, 3}


def test_all_shards_merge_into_one_complete_record(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    shards = [_shard(tmp_path, rng, i, fail=(i == 2)) for i in (1, 2, 3)]
    report = merge_shards(shards, tmp_path / "merged", plan=load_plan(_plan(tmp_path)))
    assert report.status == "complete"
    assert report.missing == [] and report.duplicates == [] and report.unreadable == []
    merged = read_record(tmp_path / "merged")
    assert merged.status == "complete"
    assert merged.meta["shard"] is None
    assert merged.meta["plan_hash"] == "p123"
    assert merged.meta["counts"]["planned"] == len(CASES)
    assert merged.meta["counts"]["attempted"] == len(CASES)
    assert merged.meta["counts"]["failed"] == 1
    assert [s["index"] for s in merged.meta["merged_from"]["shards"]] == [1, 2, 3]
    # Every row and every sample of every shard, unchanged.
    rows = {r["case_key"]: r for r in merged.perf["gemm"].to_pylist()}
    samples = 0
    for path in shards:
        shard = read_record(path)
        samples += shard.samples["gemm"].num_rows
        for row in shard.perf["gemm"].to_pylist():
            assert rows[row["case_key"]]["latency"] == pytest.approx(row["latency"])
            assert rows[row["case_key"]]["runs"] == row["runs"]
    assert len(rows) == len(CASES) - 1
    assert merged.samples["gemm"].num_rows == samples
    assert [f.message for f in merged.failures] == ["kernel exploded"]


def test_a_missing_shard_is_partial_and_its_cases_count_against_coverage(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    shards = [_shard(tmp_path, rng, i) for i in (1, 3)]
    report = merge_shards(shards, tmp_path / "merged", plan=load_plan(_plan(tmp_path)))
    assert report.status == "partial" and report.missing == [2]
    assert "missing shards: 2/3" in report.lines()
    merged = read_record(tmp_path / "merged")
    lost = [c for c in CASES if shard_of(c.key, N) == 2]
    assert merged.meta["counts"]["planned"] == len(CASES)
    assert merged.meta["counts"]["attempted"] == len(CASES) - len(lost)
    assert "shards 2/3 left no record" in merged.meta["error"]
    # The comparison goes red on coverage, whatever the latencies say.
    base = write_record(tmp_path / "base", CASES, lambda c: simulated_runs(rng, c.params["m"]))
    result = compare_records(read_record(base), merged)
    assert result["verdict"]["level"] == "red"
    texts = [f["text"] for f in result["coverage"]["findings"]]
    assert f"{len(lost)} planned cases never attempted" in texts
    assert any("partial" in t for t in texts)


def test_without_a_plan_a_missing_shard_still_makes_the_record_partial(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    report = merge_shards([_shard(tmp_path, rng, 1)], tmp_path / "merged")
    assert report.count == N and report.missing == [2, 3] and report.status == "partial"
    assert read_record(tmp_path / "merged").status == "partial"


def test_duplicates_are_reported_and_the_better_record_kept(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    good = _shard(tmp_path, rng, 2)
    worse = _shard(tmp_path, rng, 2, name="shard-2-retry", status="partial")
    others = [_shard(tmp_path, rng, i) for i in (1, 3)]
    report = merge_shards([worse, *others, good, good], tmp_path / "merged")
    assert report.status == "complete"
    kept = {s.index: s.path for s in report.shards}
    assert kept[2] == str(good)
    whys = sorted(d["why"] for d in report.duplicates)
    assert len(whys) == 2
    assert whys[0] == "identical record"
    assert whys[1].startswith("kept complete")
    assert all(d["index"] == 2 for d in report.duplicates)


def test_unreadable_shards_are_reported_not_hidden(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    ok = [_shard(tmp_path, rng, i) for i in (1, 2)]
    broken = _shard(tmp_path, rng, 3)
    (broken / "gemm_perf.parquet").write_bytes(b"tampered")
    empty = tmp_path / "never-written"
    empty.mkdir()
    report = merge_shards([*ok, broken, empty], tmp_path / "merged")
    assert report.missing == [3] and report.status == "partial"
    errors = {Path(u["path"]).name: u["error"] for u in report.unreadable}
    assert "checksum mismatch" in errors["shard-3"]
    assert "missing" in errors["never-written"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("framework_version", "2.12.0", "framework_version '2.12.0' differs"),
        ("case_set", "smoke", "case_set 'smoke' differs"),
        ("collector_hash", "beef", "collector_hash 'beef' differs"),
        ("protocol", {"runs": 3, "samples": 8}, "protocol"),
        ("image", {"ref": "collectbot-vllm:other"}, "image.ref 'collectbot-vllm:other' differs"),
    ],
)
def test_shards_of_different_plans_are_refused(
    tmp_path: Path, rng: np.random.Generator, field: str, value: Any, message: str
) -> None:
    a = _shard(tmp_path, rng, 1)
    b = _shard(tmp_path, rng, 2, **{field: value})
    with pytest.raises(UserError, match=message):
        merge_shards([a, b], tmp_path / "merged")


def test_trusted_shards_with_their_own_image_ids_merge_by_content_hash(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    """A trusted shard builds its own image (issue 18): same inputs, another id per shard."""
    ids = [f"sha256:{c * 64}" for c in "ab"]
    a, b = (
        _shard(tmp_path, rng, i, 2, image={"ref": ids[i - 1], "digest": ids[i - 1]},
               container={"image_content_hash": "c0ffee", "trust": "trusted"})
        for i in (1, 2)
    )  # fmt: skip
    assert merge_shards([a, b], tmp_path / "merged").status == "complete"
    c = _shard(
        tmp_path, rng, 2, 2, name="other", image={"ref": ids[0]},
        container={"image_content_hash": "beef"},
    )  # fmt: skip
    with pytest.raises(UserError, match=r"container\.image_content_hash 'beef' differs"):
        merge_shards([a, c], tmp_path / "merged-2")


def test_shards_from_other_gpu_models_are_refused(tmp_path: Path, rng: np.random.Generator) -> None:
    a = _shard(tmp_path, rng, 1)
    b = _shard(tmp_path, rng, 2, device={"name": "NVIDIA H100", "uuid": "GPU-x"})
    with pytest.raises(UserError, match=r"device\.name 'NVIDIA H100' differs"):
        merge_shards([a, b], tmp_path / "merged")


def test_other_gpus_of_the_same_model_merge(tmp_path: Path, rng: np.random.Generator) -> None:
    shards = [
        _shard(tmp_path, rng, i, device={"name": "Test GPU", "uuid": f"GPU-{i}"}) for i in (1, 2, 3)
    ]
    report = merge_shards(shards, tmp_path / "merged")
    assert [s.device["uuid"] for s in report.shards] == ["GPU-1", "GPU-2", "GPU-3"]


def test_the_plan_checks_every_case_of_every_shard(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    plan = load_plan(_plan(tmp_path, CASES[:-2]))
    shards = [_shard(tmp_path, rng, i) for i in (1, 2, 3)]
    with pytest.raises(UserError, match="is not in the plan p123"):
        merge_shards(shards, tmp_path / "merged", plan=plan)
    # A record that claims the wrong index.
    wrong = _shard(tmp_path / "w", rng, 1)
    meta = json.loads((wrong / RUN_JSON).read_text())
    meta["shard"] = [2, N]
    (wrong / RUN_JSON).write_text(json.dumps(meta))
    with pytest.raises(UserError, match=r"belongs to shard 1/3 of plan p123, not 2/3"):
        merge_shards([wrong], tmp_path / "merged2", plan=load_plan(_plan(tmp_path)))


def test_counts_must_agree(tmp_path: Path, rng: np.random.Generator) -> None:
    a = _shard(tmp_path, rng, 1, n=2)
    b = _shard(tmp_path, rng, 2, n=3)
    with pytest.raises(UserError, match="different counts"):
        merge_shards([a, b], tmp_path / "merged")
    with pytest.raises(UserError, match="is not one of 4"):
        merge_shards([a], tmp_path / "merged", count=4)
    whole = write_record(tmp_path / "whole", CASES, lambda c: simulated_runs(rng, 1.0))
    with pytest.raises(UserError, match="not a shard"):
        merge_shards([a, whole], tmp_path / "merged3", count=2)


def test_cli_merge_reports_and_require_all(tmp_path: Path, rng: np.random.Generator) -> None:
    shards = [_shard(tmp_path, rng, i) for i in (1, 3)]
    report = tmp_path / "merge.json"
    result = runner.invoke(
        app,
        [
            "merge",
            *map(str, shards),
            "--out",
            str(tmp_path / "m"),
            "--plan",
            str(_plan(tmp_path)),
            "--report",
            str(report),
            "--require-all",
        ],
    )
    assert result.exit_code == 1, result.output
    assert "merged 2 of 3 shards" in result.output and "missing shards: 2/3" in result.output
    assert json.loads(report.read_text())["missing"] == [2]
    assert read_record(tmp_path / "m").status == "partial"
    result = runner.invoke(app, ["merge", str(tmp_path / "nothing"), "--out", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {tmp_path / 'nothing'}: not a run record directory")
    result = runner.invoke(app, ["merge", str(shards[0]), "--out", str(tmp_path / "m")])
    assert result.exit_code == 2 and "not empty" in result.output


def test_redos_and_device_time_survive_the_merge(tmp_path: Path, rng: np.random.Generator) -> None:
    shard = _shard(tmp_path, rng, 1, n=1)
    import pyarrow as pa
    import pyarrow.parquet as pq

    from collector.record import sha256_file

    perf = pq.read_table(shard / "gemm_perf.parquet")
    perf = perf.set_column(
        perf.column_names.index("redos"), "redos", pa.array([2] * perf.num_rows, pa.int32())
    ).set_column(
        perf.column_names.index("device_seconds"),
        "device_seconds",
        pa.array([1.5] * perf.num_rows, pa.float64()),
    )
    pq.write_table(perf, shard / "gemm_perf.parquet")
    meta = json.loads((shard / RUN_JSON).read_text())
    meta["files"]["gemm_perf.parquet"] = sha256_file(shard / "gemm_perf.parquet")
    (shard / RUN_JSON).write_text(json.dumps(meta))
    merge_shards([shard], tmp_path / "merged")
    rows = read_record(tmp_path / "merged").perf["gemm"].to_pylist()
    assert {r["redos"] for r in rows} == {2}
    assert {r["device_seconds"] for r in rows} == {1.5}


@pytest.mark.slow
def test_real_sharded_collection_merges_like_the_whole(tmp_path: Path) -> None:
    """Two `collect --shard` processes and `collect --plan-only`: the merged record holds
    exactly the plan's cases, and the comparison sees both sides' keys the same."""
    common = ["--smoke", "--runs", "2", "--samples", "2", "--warmup", "1"]
    common += ["--target-sample-ms", "0.2", "--idle-ratio", "0", "--workers", "0", "--quiet"]
    for i in (1, 2):
        result = runner.invoke(
            app, ["collect", *common, "--shard", f"{i}/2", "--out", str(tmp_path / f"s{i}")]
        )
        assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["collect", "--smoke", "--plan-only"])
    assert result.exit_code == 0, result.output
    plan = tmp_path / "plan.json"
    plan.write_text(result.output)
    result = runner.invoke(
        app,
        [
            "merge",
            *(str(tmp_path / s) for s in ("s2", "s1")),
            "--plan",
            str(plan),
            "--out",
            str(tmp_path / "m"),
        ],
    )
    assert result.exit_code == 0, result.output
    merged = read_record(tmp_path / "m")
    keys = json.loads(plan.read_text())["case_keys"]
    assert sorted(merged.perf["gemm"].column("case_key").to_pylist()) == sorted(keys)
    assert merged.meta["plan_hash"] == json.loads(plan.read_text())["plan_hash"]
    assert merged.status == "complete"
