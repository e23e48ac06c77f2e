"""The change points of a baseline history as a markdown block for main's tracking issue."""

from __future__ import annotations

import re

import numpy as np
import pytest

from bot.history.changepoints import by_commit, change_points
from bot.history.core import CaseInfo, History, load_history, run_info
from bot.history.source import Selection, StoredRun
from bot.history.tracking import change_points_markdown
from bot.keys import Series, case_file, series_dir
from bot.render.comment import fmt_change
from tests.history_store import SyntheticStore, commit_of, grid_cases, make_store

SITE = "https://example.github.io/perf"


@pytest.fixture(scope="module")
def stepped(tmp_path_factory: pytest.TempPathFactory) -> SyntheticStore:
    root = tmp_path_factory.mktemp("tracking")
    return make_store(root / "store", root / "work", grid_cases(12), samples=4, collector_runs=4)


def test_the_block_lists_the_five_steps_under_their_commit_range(stepped: SyntheticStore) -> None:
    history = load_history(stepped.url, Selection(ref="main"))
    groups = by_commit(history, change_points(history))
    text = change_points_markdown(history, groups, repo="octo/kernels", site_url=SITE)
    rows = [line for line in text.splitlines() if re.match(r"\| \d+ \|", line)]
    assert len(rows) == 1, text
    row = rows[0]
    old, new = commit_of(stepped.step_at - 1), commit_of(stepped.step_at)
    assert row.startswith(f"| {stepped.step_at} | [`{old[:7]}..{new[:7]}`]")
    assert f"(https://github.com/octo/kernels/compare/{old}...{new})" in row
    slower = sum(f > 1 for f in stepped.steps.values())
    assert f"| {slower} | {len(stepped.steps) - slower} |" in row
    changes = groups[0].changes
    assert sorted(c.key for c in changes) == sorted(stepped.steps)
    places = []
    for cp in changes:
        assert cp.ratio == pytest.approx(stepped.steps[cp.key], abs=0.01)
        page = f"{SITE}/{series_dir(history.series)}/{case_file(cp.key)}"
        link = f"[{fmt_change(cp.ratio)}]({page})"
        assert link in row
        places.append(row.index(link))
    # Largest step first.
    assert places == sorted(places)
    assert abs(changes[0].ratio - 1) == max(abs(c.ratio - 1) for c in changes)
    # Without a repo or a site: plain text, no links.
    bare = change_points_markdown(history, groups)
    assert "](" not in bare and f"`{old[:7]}..{new[:7]}`" in bare


def test_defaults_limits_and_no_steps(stepped: SyntheticStore) -> None:
    history = load_history(stepped.url, Selection(ref="main"))
    assert change_points_markdown(history) == change_points_markdown(
        history, by_commit(history, change_points(history))
    )
    capped = change_points_markdown(history, max_cases=2)
    assert "and 3 more" in capped
    quiet = history.subset(np.array([c.key not in stepped.steps for c in history.cases]))
    assert f"No step in any case over the last {stepped.runs} stored runs." in (
        change_points_markdown(quiet)
    )


def _hostile_history() -> History:
    """Eight runs of one case that steps +20% at run 5; its text and commits are hostile."""
    runs = [
        run_info(
            i,
            StoredRun(f"e{i}", "main", None, None),
            {
                "run_id": f"r{i}",
                "status": "complete",
                "git_sha": "`| @octocat #1" if i == 5 else f"{i:040x}",
                "framework_version": "1",
            },
        )
        for i in range(1, 9)
    ]
    params: dict[str, object] = {"m": 1, "n": 2, "k": 3, "gemm_dtype": "bf16 | <b>@octocat</b> `x`"}
    case = CaseInfo("gemm|@octocat", "gemm", str(params["gemm_dtype"]), params)
    ms = np.array([[1.0, 1.001, 0.999, 1.0, 1.2, 1.201, 1.199, 1.2]])
    none = np.full((1, 8), None, dtype=object)
    nan = np.full((1, 8), np.nan)
    series = Series("vllm", "GPU @octocat", ("gemm",), "main")
    return History(series, runs, [case], ms, nan, nan, none, none)


def test_record_text_and_commits_are_escaped() -> None:
    history = _hostile_history()
    text = change_points_markdown(history, repo="bad repo/../x", site_url="javascript:alert(1)")
    row = next(line for line in text.splitlines() if line.startswith("| 5 |"))
    assert "@octocat" not in text and "#1" not in text
    # HTML only inside code spans, where GitHub shows it as text.
    assert "<" not in re.sub(r"(`+) .*? \1", "", text)
    assert "](" not in text  # neither the bad repo nor the bad site URL became a link
    # Five cells: no pipe from the record splits the row.
    assert len(re.findall(r"(?<!\\)\|", row.replace("\\|", ""))) == 6, row
    assert "+20.0%" in row


def test_the_series_is_escaped_in_the_title() -> None:
    history = _hostile_history()
    title = change_points_markdown(history).splitlines()[0]
    assert title.startswith("### Change points in vllm on GPU @\u200boctocat")
