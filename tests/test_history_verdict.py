"""History in the verdict: a changed case's range over the stored baselines, in the comment."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.compare.comparison import SCHEMA_FILE, load_cases
from bot.compare.history_verdict import BaselineHistory, WindowRun, case_history, history_section
from bot.compare.store_baseline import record_latencies
from bot.history.source import Selection
from bot.keys import case_file
from bot.render.comment import case_label, render_comment
from bot.site.build import build_site
from bot.store import RunStore
from collector.caseplan import Case
from collector.record import read_record
from tests.factories import simulated_runs, write_record
from tests.history_store import SyntheticStore, commit_of, grid_cases, make_store, true_ms

runner = CliRunner()
SITE = "https://example.github.io/perf"
WANDERER, JUMPER = 0, 1  # case positions: stepped -4% at run 12; unchanged over the window


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> SyntheticStore:
    """20 baselines of 10 cases; the first steps down 4% at run 12 (it wandered 4%)."""
    root = tmp_path_factory.mktemp("hv")
    return make_store(
        root / "store",
        root / "work",
        grid_cases(10),
        steps=(0.96,),
        run_noise=0.002,
        samples=6,
        collector_runs=5,
    )


@pytest.fixture(scope="module")
def candidate(store: SyntheticStore, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new run: the wanderer 2% above the latest stored baseline's point, the other 5%,
    the rest unchanged."""
    work = tmp_path_factory.mktemp("cand")
    stored = RunStore(store.url)
    latest = record_latencies(read_record(stored.get(stored.entries()[-1], work / "latest")))
    rng = np.random.default_rng(5)
    wanderer, jumper = store.cases[WANDERER].key, store.cases[JUMPER].key
    level = {wanderer: latest[wanderer] * 1.02, jumper: latest[jumper] * 1.05}

    def samples(case: Case) -> list[list[float]]:
        ms = level.get(case.key, true_ms(case))
        return simulated_runs(rng, ms, runs=10, samples=8, run_spread=0.002)

    return write_record(
        work / "run",
        store.cases,
        samples,
        meta_extra={"git_sha": commit_of(99), "case_set": "synthetic"},
    )


def _compare(store_url: str, cand: Path, out: Path, *extra: str) -> dict[str, object]:
    args = ["compare", str(cand), "--baseline-from-store", store_url, "--baseline-ref", "main"]
    result = runner.invoke(app, [*args, "--out", str(out), *extra])
    assert result.exit_code == 0, result.output
    data: dict[str, object] = json.loads((out / "comparison.json").read_text())
    return data


def test_a_2pct_move_on_a_case_that_wandered_4pct_says_so(
    store: SyntheticStore, candidate: Path, tmp_path: Path
) -> None:
    data = _compare(store.url, candidate, tmp_path / "cmp")
    jsonschema.validate(data, json.loads(SCHEMA_FILE.read_text()))
    history = data["history"]
    assert isinstance(history, dict)
    assert [r["git_sha"] for r in history["runs"]] == [commit_of(i) for i in range(1, 21)]
    wanderer, jumper = (store.cases[i].key for i in (WANDERER, JUMPER))
    cases = {c["key"]: c for c in data["latency"]["cases"]}  # type: ignore[index]
    assert cases[wanderer]["verdict"] == "regressed"
    assert cases[wanderer]["ratio"] == pytest.approx(1.02, abs=0.004)
    assert cases[jumper]["verdict"] == "regressed"
    moved = history["cases"][wanderer]
    assert moved["within"] is True
    # The step of 4% and the points' own noise.
    assert 0.035 < moved["wandered"] < 0.065
    assert moved["measured"] == 20
    assert history["cases"][jumper]["within"] is False
    assert history["within"]["regressed"] == 1
    # The verdict's reasons say it, and the level stays red.
    assert data["verdict"]["level"] == "red"  # type: ignore[index]
    assert "1 of them within their own history" in " ".join(data["verdict"]["reasons"])  # type: ignore[index]

    out = tmp_path / "comment.md"
    result = runner.invoke(
        app, ["render", str(tmp_path / "cmp"), "--out", str(out), "--site-url", SITE]
    )
    assert result.exit_code == 0, result.output
    body = out.read_text()
    row = next(line for line in body.splitlines() if case_label(cases[wanderer]) in line)
    assert "within its history" in row
    assert f"(wandered {moved['wandered'] * 100:.1f}%)" in row
    page = f"{SITE}/{history['site_dir']}/{case_file(wanderer)}"
    assert f"]({page})" in row
    # The link is the page `collectbot site` writes for the case.
    build_site(store.url, tmp_path / "site", Selection(ref="main"))
    assert (tmp_path / "site" / history["site_dir"] / case_file(wanderer)).is_file()
    # The trend: 20 stored points, the arrow, the candidate.
    found = re.search(r"\[([▁▂▃▄▅▆▇█ ]{20}→[▁▂▃▄▅▆▇█])\]\(https://", row)
    assert found is not None, row
    other = next(line for line in body.splitlines() if case_label(cases[jumper]) in line)
    assert "outside its history" in other
    assert "History: each changed case's latency over the last 20 stored baselines" in body


def test_history_never_changes_a_verdict(
    store: SyntheticStore, candidate: Path, tmp_path: Path
) -> None:
    with_history = _compare(store.url, candidate, tmp_path / "a")
    without = _compare(store.url, candidate, tmp_path / "b", "--history-runs", "0")
    assert "history" not in without
    verdicts = [
        {c["key"]: c["verdict"] for c in load_cases(tmp_path / d, data)}
        for d, data in (("a", with_history), ("b", without))
    ]
    assert verdicts[0] == verdicts[1]
    assert with_history["verdict"]["level"] == without["verdict"]["level"]  # type: ignore[index]
    # A comment without history has no history column.
    out = tmp_path / "plain.md"
    assert runner.invoke(app, ["render", str(tmp_path / "b"), "--out", str(out)]).exit_code == 0
    assert "its history" not in out.read_text() and "→" not in out.read_text()
    # A history with no changed case annotated (too few stored runs) shows nothing either.
    empty = {**without, "history": {**with_history["history"], "cases": {}}}  # type: ignore[dict-item]
    assert "History:" not in render_comment(empty) and "History:" in render_comment(with_history)


def test_a_damaged_stored_run_is_left_out_of_the_history(
    store: SyntheticStore, candidate: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "store"
    shutil.copytree(store.url, copy)
    entry = RunStore(str(copy)).entries()[3]
    perf = next((copy / entry.key.path / entry.name).glob("*_perf.parquet"))
    perf.write_bytes(perf.read_bytes()[:-9] + b"corrupted")
    data = _compare(str(copy), candidate, tmp_path / "cmp", "--history-runs", "10")
    history = data["history"]
    assert isinstance(history, dict)
    # The last 10 runs (11..20) are entries 10..19: entry 3 is outside the window.
    assert [r["git_sha"] for r in history["runs"]] == [commit_of(i) for i in range(11, 21)]
    data = _compare(str(copy), candidate, tmp_path / "cmp20")
    history = data["history"]
    assert isinstance(history, dict)
    assert len(history["runs"]) == 19 and commit_of(4) not in [
        r["git_sha"] for r in history["runs"]
    ]
    assert len(history["skipped"]) == 1 and entry.name in history["skipped"][0]
    out = tmp_path / "comment.md"
    assert runner.invoke(app, ["render", str(tmp_path / "cmp20"), "--out", str(out)]).exit_code == 0
    assert "1 stored runs failed their checksums and were left out" in out.read_text()


def test_bad_site_url_is_one_error_line(store: SyntheticStore, tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["render", str(tmp_path), "--out", str(tmp_path / "c.md"), "--site-url", "http://x"]
    )
    assert result.exit_code == 2
    assert result.output.strip().startswith("error: site URL 'http://x': not a plain https URL")


def test_case_history_range_and_the_label() -> None:
    points = [1.0, 1.02, 0.99, 1.03, None, 1.01]
    found = case_history(points, 1.01, 1.015)
    assert found is not None
    assert found["wandered"] == pytest.approx(1.03 / 0.99 - 1)
    assert found["range"] == pytest.approx([0.99 / 1.01, 1.03 / 1.01])
    assert found["within"] is True and found["measured"] == 5
    assert case_history(points, 1.01, 1.03)["within"] is False  # type: ignore[index]
    assert case_history(points, 1.01, 0.97)["within"] is False  # type: ignore[index]
    # Too few points, or no ratio: nothing to say.
    assert case_history([1.0, None, 1.1], 1.1, 1.0) is None
    assert case_history(points, 1.01, None) is None


def test_only_changed_cases_are_annotated() -> None:
    window = BaselineHistory(
        [WindowRun(f"e{i}", None, None, None) for i in range(4)],
        {k: [1.0, 1.1, 1.0, 1.0] for k in "abcd"},
    )
    cases = [
        {"key": "a", "verdict": "regressed", "base_ms": 1.0, "ratio": 1.05},
        {"key": "b", "verdict": "same", "base_ms": 1.0, "ratio": 1.0},
        {"key": "c", "verdict": "improved", "base_ms": 1.0, "ratio": 0.9},
        {
            "key": "d",
            "verdict": "regressed",
            "base_ms": 1.0,
            "ratio": 1.05,
            "dispatch_change": True,
        },
    ]
    section = history_section(cases, window)
    assert sorted(section["cases"]) == ["a", "c", "d"]
    # A dispatch change is annotated but not counted with the same kernel's regressions.
    assert section["within"] == {"regressed": 1, "improved": 0, "inconclusive": 0}
