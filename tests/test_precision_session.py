"""Issue 22's acceptance script, every step end to end on the CPU (a synthetic reference
table, the case file's tiny `cpu` set, CPU stand-in devices)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import tarfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.gpu import fleet_session as fs
from bench.gpu import precision_session as ps
from collector.caseplan import build_plan
from collector.record import read_record

TABLE = fs.default_table() or Path("unset")
KERNEL = {"bfloat16": "torch.nn.functional.linear", "float32": "torch.nn.functional.linear"}


def shapes(path: Path, case_set: str = "default") -> set[fs.Shape]:
    plan = build_plan(("gemm",), case_file=path, case_set=case_set)
    return {
        (c.params["gemm_dtype"], c.params["m"], c.params["n"], c.params["k"]) for c in plan.cases
    }


def write_table(path: Path, rows: list[tuple[str, int, int, int, float]]) -> Path:
    """A reference table in the field's schema."""
    columns: dict[str, list[object]] = {
        "framework": ["VLLM"] * len(rows),
        "version": ["0.24.0"] * len(rows),
        "device": ["NVIDIA H200"] * len(rows),
        "op_name": ["gemm"] * len(rows),
        "kernel_source": [KERNEL.get(r[0], "CutlassFP8ScaledMMLinearKernel") for r in rows],
        "gemm_dtype": [r[0] for r in rows],
        "m": [r[1] for r in rows],
        "n": [r[2] for r in rows],
        "k": [r[3] for r in rows],
        "latency": [r[4] for r in rows],
    }
    pq.write_table(pa.table(columns), path)
    return path


# Eligible: eight shapes of each dtype, 6 us to 2.5 ms.
ELIGIBLE = [(d, 8 * i + 3, 1536, 2304, 0.006 * 1.8**i) for d in ps.DTYPES for i in range(8)]
# Left out: a project case, a fleet case, fp8_block k=64, fp8 n=24, under 5 us, over 3 ms,
# over 1 GiB of operands, and the CPU set (also in the table, for the realism check).
PROJECT = min(s for s in fs.project_shapes() if s[0] in ps.DTYPES)
FLEET = min(s for s in fs.shapes_of(fs.CASE_FILE) if s[0] in ps.DTYPES)
LEFT_OUT = [
    (*PROJECT, 0.05),
    (*FLEET, 0.05),
    ("fp8_block", 64, 1024, 64, 0.06),
    ("fp8", 64, 24, 1024, 0.01),
    ("bfloat16", 1, 32, 32, 0.003),
    ("fp8", 4096, 16384, 16384, 4.0),
    ("bfloat16", 65536, 8192, 8192, 2.5),
]
CPU_ROWS = [(*s, 0.01 * (i + 1)) for i, s in enumerate(ps.CPU_SET)]


def test_draw_takes_a_third_of_each_dtype_seeded_outside_every_case_set(tmp_path: Path) -> None:
    table = write_table(tmp_path / "t.parquet", ELIGIBLE + LEFT_OUT + CPU_ROWS)
    out = tmp_path / "cases.yaml"
    report = ps.draw(table, 5, 7, out)
    assert report["by_dtype"] == {"bfloat16": 3, "fp8": 2, "fp8_block": 2}
    assert report["eligible"] == {"bfloat16": 8, "fp8": 8, "fp8_block": 8}
    drawn = shapes(out)
    assert len(drawn) == 7 and drawn <= {r[:4] for r in ELIGIBLE}
    assert shapes(out, "cpu") == set(ps.CPU_SET)
    # The comments carry the table's latencies; the estimate grows with the draw.
    latency = {r[:4]: r[4] for r in ELIGIBLE}
    text = out.read_text()
    for d, m, n, k in drawn:
        assert (
            f"{{gemm_dtype: {d}, m: {m}, n: {n}, k: {k}}}  # {latency[(d, m, n, k)] * 1000:.1f} us"
            in text
        )
    assert sum(report["by_size"].values()) == 7
    again = tmp_path / "again.yaml"
    assert ps.draw(table, 5, 7, again)["estimate_device_s"] == report["estimate_device_s"]
    assert again.read_text() == text
    more = ps.draw(table, 6, 12, tmp_path / "more.yaml")
    assert more["estimate_device_s"]["aa"] > report["estimate_device_s"]["aa"]
    assert shapes(tmp_path / "more.yaml") != drawn
    # A fresh draw leaves out an earlier one's shapes, and says so in its header.
    fresh = ps.draw(table, 6, 12, tmp_path / "fresh.yaml", (out,))
    assert shapes(tmp_path / "fresh.yaml").isdisjoint(drawn)
    assert fresh["eligible"] == {"bfloat16": 5, "fp8": 6, "fp8_block": 6}
    assert f"--exclude {out}" in (tmp_path / "fresh.yaml").read_text()


# Every committed draw, oldest first (the last is the current case file); each one was drawn
# excluding all the draws before it.
DRAWS = [
    *((ps.HERE / f"precision_cases_seed{seed}.yaml", seed) for seed in range(22, 29)),
    (ps.CASE_FILE, 29),
]


@pytest.mark.skipif(not TABLE.is_file(), reason="the H200 reference table is not here")
@pytest.mark.parametrize(
    ("committed", "seed", "exclude"),
    [(path, seed, tuple(p for p, _ in DRAWS[:i])) for i, (path, seed) in enumerate(DRAWS)],
    ids=[f"seed{seed}" for _, seed in DRAWS[:-1]] + ["current"],
)
def test_each_committed_draw_is_its_seeded_draw(
    tmp_path: Path, committed: Path, seed: int, exclude: tuple[Path, ...]
) -> None:
    out = tmp_path / "cases.yaml"
    report = ps.draw(TABLE, seed, 210, out, exclude)
    assert report["by_dtype"] == {"bfloat16": 70, "fp8": 70, "fp8_block": 70}
    # The header names the command with the repository's paths; the cases must be identical.
    assert shapes(out) == shapes(committed)
    drawn = shapes(out)
    assert len(drawn) == 210 and not drawn & ps.taken()
    assert all(k % 128 == 0 for d, _, _, k in drawn if d == "fp8_block")


def test_bad_inputs_are_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = write_table(tmp_path / "t.parquet", CPU_ROWS)
    missing = tmp_path / "none.tar.gz"
    calls = [
        ["analyse", str(tmp_path), "--table", str(table)],
        ["analyse", str(tmp_path), "--table", str(missing)],
        ["aa", "--out", str(tmp_path / "o"), "--resume-from", str(missing), "--device", "cpu"],
        ["fixed", "--out", str(tmp_path / "o"), "--cases", str(missing)],
        ["aa", "--out", str(tmp_path / "o"), "--work", str(tmp_path), "--device", "cpu"],
        ["fixed", "--out", str(tmp_path / "o"), "--work", str(tmp_path / "w"), "--case-set", "x"],
    ]
    for args in calls:
        assert ps.main(args) == 2, args
    # Progress lines start with their time stamp; each call ends in one error line.
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("[")]
    assert len(err) == len(calls) and all(line.startswith("error: ") for line in err), err


def test_aa_resumed_fixed_and_analyse_end_to_end_on_the_cpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["--cases", str(ps.CASE_FILE), "--case-set", "cpu", "--device", "cpu"]
    common += ["--backend", "torch", "--test-protocol"]
    out = tmp_path / "out"
    # A first call cut before any round (--minutes 0) returns A and B, partial...
    first = tmp_path / "first"
    args = ["aa", "--out", str(first), "--work", str(tmp_path / "w1"), "--minutes", "0"]
    assert ps.main([*args, *common]) == 0
    summary = json.loads((first / ps.summary_name("aa")).read_text())
    assert summary["complete"] is False and sorted(summary["collections"]) == ["A", "B"]
    # What came back so far can be analysed already: partial, no canary, no verdict passed.
    table = write_table(tmp_path / "t.parquet", CPU_ROWS)
    capsys.readouterr()
    assert ps.main(["analyse", str(first), "--table", str(table)]) == 0
    partial = json.loads(capsys.readouterr().out)
    assert partial["status"] == {"A": "partial", "B": "partial"} and partial["canary"] is None
    assert partial["aa"]["cases"] == 0 and partial["aa"]["pass"] is False
    # ...which a fresh work folder resumes from the tarball, to the end.
    args = ["aa", "--out", str(out), "--work", str(tmp_path / "w2"), "--minutes", "30"]
    args += ["--resume-from", str(first / ps.tar_name("aa"))]
    assert ps.main([*args, *common]) == 0
    summary = json.loads((out / ps.summary_name("aa")).read_text())
    assert summary["complete"] is True and summary["segments"] == 2
    cols = summary["collections"]
    assert [cols[n]["status"] for n in "ABC"] == ["complete"] * 3
    # The candidate protocol prestarts every collection's workers; B spawns where A and C fork.
    assert [cols[n]["prestart_workers"] for n in "ABC"] == ["always"] * 3
    assert [cols[n]["worker_start"] for n in "ABC"] == ["forkserver", "spawn", "forkserver"]
    assert min(cols[n]["cost"]["prestarted"] for n in "ABC") > 0
    assert read_record(work_of(out) / "A").meta["protocol"]["cooldown_s"] == 0.5
    with tarfile.open(out / ps.tar_name("aa")) as tar:
        work = tmp_path / "unpacked"
        tar.extractall(work, filter="data")
    segments = json.loads((work / ps.SEGMENTS_JSON).read_text())
    assert len(segments) == 2 and "C" not in segments[0]["worker_starts"]
    starts = sum(s["worker_starts"]["A"]["seconds"] for s in segments)
    assert cols["A"]["cost"]["worker_start_s"] == pytest.approx(starts, abs=1e-3)
    assert read_record(work / "A").meta["worker_starts"]["seconds"] < starts
    # C slows exactly the cases A's first round measured at 20 us or more.
    chosen = json.loads((work / ps.CANARY_JSON).read_text())
    slow = {k for k, ms in chosen["first_round_ms"].items() if ms >= ps.CANARY_MIN_MS}
    assert set(chosen["keys"]) == slow and 0 < len(slow) < 4
    assert read_record(work / "C").meta["canary"]["factor"] == ps.CANARY_FACTOR

    # A complete step's work folder is not run again.
    capsys.readouterr()
    assert ps.main(["aa", "--out", str(out), "--work", str(tmp_path / "w2"), *common]) == 2
    assert capsys.readouterr().err.startswith("error: ") and summary["complete"]

    # The fixed step on a seeded sample of the set, its workers spawned (--worker-start).
    args = ["fixed", "--out", str(out), "--work", str(tmp_path / "w3"), "--runs", "3"]
    assert ps.main([*args, "--worker-start", "spawn", "--sample", "2", *common]) == 0
    fixed = json.loads((out / ps.summary_name("fixed")).read_text())
    f_cost = fixed["collections"]["F"]["cost"]
    assert fixed["complete"] is True and f_cost["runs_mean"] == 3 and f_cost["cases"] == 2
    assert fixed["collections"]["F"]["worker_start"] == "spawn"

    md = tmp_path / "report.md"
    capsys.readouterr()
    assert ps.main(["analyse", str(out), "--table", str(table), "--markdown", str(md)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["aa"]["cases"] == 4 and report["canary"]["slowed"] == len(slow)
    assert report["canary"]["cases"] == 4
    a = read_record(work / "A").perf["gemm"].to_pylist()
    ref = {r[:4]: r[4] for r in CPU_ROWS}
    ratios = [
        r["latency"] / ref[(r["gemm_dtype"], r["m"], r["n"], r["k"])]
        for r in a
        if r["gemm_dtype"] == "float32"
    ]
    assert report["realism"]["float32"]["median_ratio"] == pytest.approx(statistics.median(ratios))
    assert sum(b["matched"] for b in report["realism"]["float32"]["by_size"].values()) == 2
    cost = report["cost"]
    a_cost = cost["A"]
    total = a_cost["case_device_s"] + a_cost["worker_start_s"] + a_cost["panel_device_s"]
    assert a_cost["all_in_per_case_s"] == pytest.approx(total / 4, abs=1e-3)
    # One server start however many calls ran it (none here: spawned workers).
    assert a_cost["one_server_per_case_s"] == pytest.approx(a_cost["all_in_per_case_s"], abs=1e-3)
    assert set(cost) == {"A", "B", "C", "F", "prestart"} and cost["A"]["of_fixed"] > 0
    # F on 2 of the 4 cases: A's and F's seconds on those two, F's all-in over all four.
    fx = report["fixed"]
    assert (fx["cases"], fx["of_draw"]) == (2, 4) and fx["F_case_s"] > 0
    f_cost = cost["F"]
    rest = f_cost["all_in_per_case_s"] * 2 - f_cost["case_device_s"]
    assert fx["F_all_in_per_case_s"] == pytest.approx((fx["F_case_s"] * 4 + rest) / 4, abs=0.01)
    text = md.read_text()
    assert "| A/A (A vs B, same GPU) | 4 cases" in text and "| cost F |" in text
    assert text.startswith("Records: A complete, B complete, C complete, F complete.")
    assert "| bfloat16 |" in text
    # Only the shipped protocol's cost (A) is held to the floor; F and the rest are context.
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| cost")}
    assert f"| <= {ps.COST_PER_CASE_S} |" in rows["| cost A"]
    assert all(rows[f"| cost {n}"].endswith("| context |  |") for n in "BCF")


def work_of(out: Path) -> Path:
    """The aa step's work folder, unpacked from its returned tarball."""
    work = out.parent / f"{out.name}-unpacked"
    if not work.is_dir():
        with tarfile.open(out / ps.tar_name("aa")) as tar:
            tar.extractall(work, filter="data")
    return work


def test_the_fixed_sample_is_seeded_and_spread_over_the_dtypes() -> None:
    args = argparse.Namespace(cases=ps.CASE_FILE, case_set="default", sample=30)
    picked = ps.fixed_sample(args)
    assert picked.text == ps.fixed_sample(args).text
    dtypes = [part.split(",")[0].removeprefix("gemm_dtype=") for part in picked.text.split(";")]
    assert len(dtypes) == 30 and {dtypes.count(d) for d in ps.DTYPES} == {10}


def test_a_partial_records_open_cases_are_set_aside_in_the_closed_figures() -> None:
    def record(status: str, runs: dict[str, int]) -> Any:
        table = pa.Table.from_pylist([{"case_key": k, "runs": n} for k, n in runs.items()])
        return SimpleNamespace(status=status, perf={"gemm": table})

    a = record("partial", {"k1": 3, "k2": 6, "k3": 4, "k4": 3})
    b = record("partial", {"k1": 3, "k2": 3, "k3": 6, "k4": 5})
    # The protocol still wanted runs of the cases at the record's most: k2 in A, k3 in B.
    assert ps.open_cases(a, b) == {"k2", "k3"}
    assert ps.open_cases(record("complete", {"k1": 16, "k2": 3})) == set()
    t = {
        "key": np.array(["k1", "k2", "k3", "k4"], dtype=object),
        "ratio": np.array([1.001, 1.09, 1.03, 1.021]),
        "verdict": np.array(["same", "inconclusive", "regressed", "regressed"], dtype=object),
    }
    aa = ps.closed_figures(t, {"k2", "k3"}, None)
    assert aa == {
        "cases": 2,
        "open": 2,
        "p99_pct": pytest.approx(np.percentile([0.1, 2.1], 99)),
        "max_pct": pytest.approx(2.1),
        "flagged": 1,
    }
    canary = ps.closed_figures(t, {"k2", "k3"}, {"k3", "k4"})
    assert (canary["slowed"], canary["detected"], canary["others_flagged"]) == (1, 1, 0)


def test_aa_forks_a_and_c_spawns_b_and_charges_the_server_to_the_forked_ones(
    tmp_path: Path,
) -> None:
    """The next lease's configuration: A, B and C, their rounds interleaved; A's and C's
    workers forked from the process's one server, B's spawned (the A/A tests the start)."""
    args = ["aa", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "w")]
    args += ["--cases", str(ps.CASE_FILE), "--case-set", "cpu", "--device", "cpu"]
    args += ["--backend", "torch", "--test-protocol"]
    assert ps.main(args) == 0
    summary = json.loads((tmp_path / "out" / ps.summary_name("aa")).read_text())
    assert summary["complete"] is True
    for name, method in (("A", "forkserver"), ("B", "spawn"), ("C", "forkserver")):
        column = summary["collections"][name]
        assert column["status"] == "complete" and column["worker_start"] == method
        assert column["cost"]["pool_starts"] >= 2
    # One server served A and C (maybe started by an earlier test): each is charged it; B
    # used none.
    cost = {n: summary["collections"][n]["cost"] for n in "ABC"}
    assert cost["A"]["server_start_s"] == cost["C"]["server_start_s"]
    assert cost["B"]["server_start_s"] == 0


def test_each_collection_is_charged_the_server_its_call_shared_not_its_own_share() -> None:
    # A's first pool started the call's forkserver (10 s of its 12); B and C forked from it.
    segments: list[dict[str, Any]] = [
        {"worker_starts": {
            "A": {"seconds": 12.0, "server_seconds": 10.0},
            "B": {"seconds": 0.5, "server_seconds": 0.001},
            "C": None,
        }},
        {"worker_starts": {"A": {"seconds": 1.0}, "B": {"seconds": 0.4}, "C": {"seconds": 0.3}}},
    ]  # fmt: skip
    assert ps.charged_starts(segments, "A") == (13.0, 10.0)
    assert ps.charged_starts(segments, "B") == (10.899, 10.0)
    assert ps.charged_starts(segments, "C") == (0.3, 0.0)
    # As one collection: one server start, where each call of the device tool started one.
    assert ps.server_starts(segments, "A") == [10.0, 0.0]
    assert ps.server_starts(segments, "C") == [0.0]
    # A collection that spawned its workers used no server: it is charged its own starts.
    segments[0]["worker_starts"]["B"]["method"] = "spawn"
    segments[1]["worker_starts"]["B"]["method"] = "spawn"
    assert ps.charged_starts(segments, "B") == (0.899, 0.0)


def test_the_first_buffer_set_is_set_against_the_median_of_the_others() -> None:
    # k1: two runs over 8 sets, the first set 9% fast in one; k2: one set, left out.
    perf = pa.Table.from_pylist(
        [{"case_key": "k1", "placements": 8}, {"case_key": "k2", "placements": 1}]
    )
    rows = [
        {"case_key": "k1", "run": run, "sample": i, "ms": (0.91 if run == 0 and i == 0 else 1.0)}
        for run in (0, 1)
        for i in range(8)
    ]
    rows += [{"case_key": "k2", "run": 0, "sample": i, "ms": 0.5 + i} for i in range(8)]
    record = SimpleNamespace(perf={"gemm": perf}, samples={"gemm": pa.Table.from_pylist(rows)})
    figures = ps.first_set_figures(record)  # type: ignore[arg-type]
    assert figures is not None
    assert figures["runs"] == 2 and figures["share_3pct_off"] == 0.5
    assert figures["median"] == pytest.approx((0.91 + 1.0) / 2)


def test_b_can_be_as_protocol_with_settings_changed_so_the_aa_checks_a_change(
    tmp_path: Path,
) -> None:
    """`--b-set`: B keeps A's worker start and takes the named settings (the protocol before
    a change), so that the A/A between them is the change's live check."""
    args = ["aa", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "w")]
    args += ["--cases", str(ps.CASE_FILE), "--case-set", "cpu", "--device", "cpu"]
    args += ["--backend", "torch", "--test-protocol"]
    args += ["--b-set", "capture_flush=true", "--b-set", "clock_reads=sample"]
    args += ["--b-set", "retake_cooldown_s=0.07", "--b-set", "standby_warm=false"]
    assert ps.main(args) == 0
    columns = json.loads((tmp_path / "out" / ps.summary_name("aa")).read_text())["collections"]
    assert columns["B"]["worker_start"] == columns["A"]["worker_start"]
    wanted = {"capture_flush": True, "clock_reads": "sample", "retake_cooldown_s": 0.07}
    wanted["standby_warm"] = False
    assert wanted.items() <= columns["B"]["changed"].items()
    assert not wanted.keys() & columns["A"]["changed"].keys()
    # The CPU test protocol prestarts spares: A's warmed (nothing to load on a CPU); B's not.
    assert columns["A"]["cost"]["standby_warm"]["spares"] >= 1
    assert columns["A"]["cost"]["standby_warm"]["loaded"] == []
    assert columns["B"]["cost"]["standby_warm"]["spares"] == 0


@pytest.mark.parametrize(
    ("text", "wrong"),
    [("capture_flush", "FIELD=VALUE"), ("nosuch=1", "FIELD=VALUE"), ("use_graphs=yes", "true")],
)
def test_a_b_setting_names_a_protocol_field_and_a_value_of_its_type(text: str, wrong: str) -> None:
    with pytest.raises(ValueError, match=wrong):
        ps.protocol_override(text)
    with pytest.raises(ValueError, match="clock_reads"):
        ps.protocol_override("clock_reads=never")
    assert ps.protocol_override("cooldown_s=0.25") == ("cooldown_s", 0.25)


def test_a_collection_that_fails_as_a_whole_leaves_the_step_incomplete_and_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # On a fresh GPU machine whose vLLM was not installed yet, F failed as a whole and its
    # work folder then said "complete". Here vLLM is not installed at all.
    pytest.importorskip("torch")
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed: its collection would not fail")
    common = ["--cases", str(ps.CASE_FILE), "--case-set", "cpu", "--device", "cpu"]
    args = ["fixed", "--out", str(tmp_path / "o"), "--work", str(tmp_path / "w"), "--runs", "2"]
    assert ps.main([*args, "--backend", "vllm", "--test-protocol", *common]) == 2
    summary = json.loads((tmp_path / "o" / ps.summary_name("fixed")).read_text())
    assert summary["complete"] is False and summary["failed"] == ["F"]
    assert capsys.readouterr().err.splitlines()[-1] == "error: collection F failed as a whole"
    # The same work folder is refused with the reason; a new one would run.
    assert ps.main([*args, "--backend", "vllm", *common]) == 2
    assert "collection F failed as a whole" in capsys.readouterr().err
