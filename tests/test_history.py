"""The history: points from checksummed stored records, change points, `collectbot history`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

import bot.history
from bot.cli import app
from bot.compare.latency import runs_by_case
from bot.compare.stats import pooled_estimate
from bot.history.changepoints import by_commit, case_steps, change_points
from bot.history.core import History, HistorySettings, load_history, sample_points
from bot.history.source import Selection
from bot.store import RunStore
from collector.aggregate import trimmed_mean
from collector.caseplan import CaseSelector
from collector.record import read_record
from tests.history_store import SyntheticStore, commit_of, grid_cases, make_store

runner = CliRunner()
FAILING_CASE = 7  # fails in runs 3 and 4


@pytest.fixture(scope="module")
def stepped(tmp_path_factory: pytest.TempPathFactory) -> SyntheticStore:
    """20 stored runs of 40 cases; five cases step at run 12, the rest are noise."""
    root = tmp_path_factory.mktemp("history")
    return make_store(root / "store", root / "work", grid_cases(40), failing={FAILING_CASE: {3, 4}})


@pytest.fixture(scope="module")
def history(stepped: SyntheticStore) -> History:
    return load_history(stepped.url, Selection(ref="main"))


def _row(history: History, key: str) -> int:
    return next(i for i, c in enumerate(history.cases) if c.key == key)


def test_change_points_find_exactly_the_five_steps(
    stepped: SyntheticStore, history: History
) -> None:
    points = change_points(history)
    assert sorted((cp.key, cp.run) for cp in points) == sorted(
        (key, stepped.step_at) for key in stepped.steps
    )
    for cp in points:
        assert cp.ratio == pytest.approx(stepped.steps[cp.key], abs=0.01)
        assert cp.commit == commit_of(stepped.step_at)
        assert cp.previous_commit == commit_of(stepped.step_at - 1)
    groups = by_commit(history, points)
    assert [(g.run, len(g.changes)) for g in groups] == [(stepped.step_at, 5)]
    assert groups[0].to_json()["regressed"] == sum(f > 1 for f in stepped.steps.values())


def test_points_are_the_pooled_estimate_with_its_interval(
    stepped: SyntheticStore, history: History, tmp_path: Path
) -> None:
    assert [r.git_sha for r in history.runs] == [commit_of(i) for i in range(1, 21)]
    store = RunStore(stepped.url)
    entry = store.entries()[4]
    record = read_record(store.get(entry, tmp_path / "run5"))
    runs = runs_by_case(record.samples["gemm"])
    for key, case_runs in list(runs.items())[:5]:
        row = _row(history, key)
        assert history.ms[row, 4] == pytest.approx(pooled_estimate(case_runs))
        assert history.lo[row, 4] < history.ms[row, 4] < history.hi[row, 4]
    run5 = history.runs[4]
    assert run5.image_digest and run5.image_digest.startswith("sha256:")
    assert run5.versions["collector"] == "0.5"
    assert run5.gpu["name"] == "Test GPU"


def test_failures_are_kept_per_run(stepped: SyntheticStore, history: History) -> None:
    row = _row(history, stepped.cases[FAILING_CASE].key)
    failed = [i + 1 for i, f in enumerate(history.failure[row]) if f is not None]
    assert failed == [3, 4]
    assert "boom in run 3" in history.failure[row, 2]
    assert np.isnan(history.ms[row, 2]) and np.isfinite(history.ms[row, 4])


def test_a_damaged_run_is_skipped_with_a_warning(
    stepped: SyntheticStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "store"
    shutil.copytree(stepped.url, copy)
    entry = RunStore(str(copy)).entries()[6]
    stored = copy / entry.key.path / entry.name / "gemm_perf.parquet"
    stored.write_bytes(stored.read_bytes()[:-8] + b"tampered")
    damaged = load_history(str(copy), Selection())
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("warning: skipped stored run") and "checksum mismatch" in err[0]
    assert len(damaged.runs) == 19
    assert entry.name not in [r.entry for r in damaged.runs]
    assert len(damaged.skipped) == 1


def test_sample_points_match_the_trimmed_mean_on_uniform_and_ragged_runs() -> None:
    rng = np.random.default_rng(5)
    rows: dict[str, list[object]] = {"case_key": [], "run": [], "sample": [], "ms": []}
    expected = {}
    for case, widths in (("a", [8, 8, 8]), ("b", [8, 5, 8, 7]), ("c", [4, 4])):
        pooled: list[float] = []
        for run, width in enumerate(widths):
            values = rng.lognormal(0.0, 0.02, size=width) * (1 + len(case))
            if case == "a" and run == 0:
                values[0] = -1.0  # a non-positive sample is dropped, as the comparison does
            pooled.extend(values[values > 0])
            for i, v in enumerate(values):
                rows["case_key"].append(case)
                rows["run"].append(run)
                rows["sample"].append(i)
                rows["ms"].append(float(v))
        expected[case] = trimmed_mean(np.array(pooled))
    table = pa.table(
        {
            "case_key": pa.array(rows["case_key"], pa.string()),
            "run": pa.array(rows["run"], pa.int32()),
            "sample": pa.array(rows["sample"], pa.int32()),
            "ms": pa.array(rows["ms"], pa.float64()),
        }
    )
    points = sample_points(table, HistorySettings(bootstrap=200), np.random.default_rng(1))
    got = dict(zip(points.keys, points.ms, strict=True))
    assert got == pytest.approx(expected)
    assert np.all(points.lo < points.ms) and np.all(points.ms < points.hi)


def test_case_steps_ignore_a_lone_outlier_and_small_wobbles() -> None:
    rng = np.random.default_rng(3)
    flat = np.log(1.0 + rng.normal(0, 0.004, 20))
    outlier = flat.copy()
    outlier[9] += 0.08  # one bad run is not a step (segments need two points)
    nan = np.full(20, np.nan)
    assert case_steps(flat, nan, nan)[0] == []
    assert case_steps(outlier, nan, nan)[0] == []
    stepped = flat.copy()
    stepped[15:] += np.log(1.04)
    steps, sigma = case_steps(stepped, nan, nan)
    assert [pos for pos, _, _ in steps] == [15]
    assert 0.002 < sigma < 0.008


def test_selection_and_case_filter(history: History) -> None:
    selector = CaseSelector.parse("op=gemm,gemm_dtype=float16")
    chosen = history.select(selector)
    assert chosen.cases and all(c.op == "gemm" and c.dtype == "float16" for c in chosen.cases)
    assert chosen.ms.shape == (len(chosen.cases), 20)


def test_cli_table_shows_the_step(stepped: SyntheticStore) -> None:
    result = runner.invoke(app, ["history", "--store", stepped.url, "--changed-only"])
    assert result.exit_code == 0, result.output
    assert "Change points by commit" in result.output
    assert f"run 12: {commit_of(11)[:12]}..{commit_of(12)[:12]} - 5 cases" in result.output
    assert result.output.count("at run 12") == 5


def test_cli_json_shape(stepped: SyntheticStore) -> None:
    result = runner.invoke(
        app,
        ["history", "--store", stepped.url, "--json", "--case-filter", "op=gemm", "--ref", "main"],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    schema = json.loads((Path(bot.history.__file__).parent / "history.schema.json").read_text())
    jsonschema.validate(data, schema)
    assert data["format"] == 1 and data["series"]["ref"] == "main"
    assert len(data["runs"]) == 20 and data["runs"][11]["git_sha"] == commit_of(12)
    assert all(c["op"] == "gemm" for c in data["cases"])
    stepped_cases = {c["key"]: c for c in data["cases"] if c["change_points"]}
    assert set(stepped_cases) == set(stepped.steps)
    first = next(iter(stepped_cases.values()))
    assert [p["run"] for p in first["series"]] == list(range(1, 21))
    assert first["change_points"][0]["run"] == 12
    assert data["change_points_by_commit"][0]["commit"] == commit_of(12)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--case-filter", "m128"], "--case-filter: 'm128' is not of the form field=value"),
        (["--case-filter", "colour=red"], "--case-filter: unknown field 'colour'"),
        (["--ref", "nope"], "no stored runs match the selection"),
        (["--ops", ","], "--ops: no op named"),
    ],
)
def test_cli_bad_input_is_one_error_line(
    stepped: SyntheticStore, args: list[str], message: str
) -> None:
    result = runner.invoke(app, ["history", "--store", stepped.url, *args])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]


def test_cli_several_histories_must_be_narrowed(stepped: SyntheticStore, tmp_path: Path) -> None:
    copy = tmp_path / "store"
    shutil.copytree(stepped.url, copy)
    store = RunStore(str(copy))
    store.put(store.get(store.entries()[0], tmp_path / "again"), ref="feature")
    result = runner.invoke(app, ["history", "--store", str(copy)])
    assert result.exit_code == 2
    assert "2 histories match" in result.stderr
    assert runner.invoke(app, ["history", "--store", str(copy), "--ref", "feature"]).exit_code == 0


def test_cli_when_no_run_can_be_read(tmp_path: Path) -> None:
    store = make_store(tmp_path / "store", tmp_path / "work", grid_cases(3), runs=1, steps=())
    entry = RunStore(store.url).entries()[0]
    stored = tmp_path / "store" / entry.key.path / entry.name / "run.json"
    stored.write_text(stored.read_text().replace('"torch"', '"tampered"', 1))
    result = runner.invoke(app, ["history", "--store", store.url])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("warning: skipped stored run") and "checksum mismatch" in lines[0]
    assert lines[1].startswith("error: ") and "no stored run" in lines[1]


def test_cli_table_shows_record_text_as_text(tmp_path: Path) -> None:
    """Kernel names come from the measured code: no markup, no terminal escapes."""
    from tests.factories import simulated_runs, write_record

    rng = np.random.default_rng(2)
    cases = grid_cases(2)
    hostile = "[bold red]pwn[/] \x1b[31mred\x1b[0m"
    record = write_record(
        tmp_path / "r1",
        cases,
        lambda c: simulated_runs(rng, 1.0),
        kernel_for=lambda c: hostile,
    )
    RunStore(str(tmp_path / "store")).put(record, ref="main")
    result = runner.invoke(app, ["history", "--store", str(tmp_path / "store")])
    assert result.exit_code == 0, result.output
    assert "[bold red]pwn[/]" in result.output
    assert "\x1b" not in result.output


def test_a_history_spans_framework_versions_unless_narrowed(tmp_path: Path) -> None:
    """An upgrade is a point in the history (with its versions), not a new history."""
    from tests.factories import simulated_runs, write_record

    rng = np.random.default_rng(4)
    cases = grid_cases(3)
    store = RunStore(str(tmp_path / "store"))
    for i, version in enumerate(("2.10.0", "2.10.0", "2.11.0")):
        record = write_record(
            tmp_path / f"r{i}",
            cases,
            lambda c: simulated_runs(rng, 1.0),
            meta_extra={"framework_version": version, "versions": {"torch": version}},
        )
        store.put(record, ref="main")
    both = load_history(str(store.url), Selection())
    assert [r.framework_version for r in both.runs] == ["2.10.0", "2.10.0", "2.11.0"]
    assert both.runs[2].versions["torch"] == "2.11.0"
    assert np.isfinite(both.ms).all()
    one = load_history(str(store.url), Selection(framework_version="2.10.0"))
    assert [r.run_id for r in one.runs] == ["r0", "r1"]


def test_sparkline_keeps_small_noise_flat_and_shows_a_step() -> None:
    from bot.render.sparkline import sparkline

    noise = np.array([1.0, 1.002, 0.999, 1.001, np.nan, 1.0])
    line = sparkline(noise, [False, False, False, False, True, False])
    assert line[4] == "×" and len(line) == 6
    assert len(set(line) - {"×"}) <= 2  # 0.3% of wobble within a 2% span: one or two levels
    step = sparkline(np.array([1.0] * 5 + [1.1] * 5), [False] * 10)
    assert step == "▁" * 5 + "█" * 5
