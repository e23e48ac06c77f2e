"""Load: 50 pull requests labelled at once, against the local GitHub server.

Every PR gets a `collect/torch` label at the same moment. For each, a pipeline runs
concurrently with all the others: `plan` (payload, labeler permission, current head), then
its run's rendered comment is published (sticky comment, commit status, label removal).
Ten PRs get a second run racing the first (a re-label: two runs of the same head, the later
one must win wherever it lands), ten publish through real `collectbot publish` processes,
and the server answers some requests with 502s and a secondary rate limit. At the end every
PR has exactly one bot comment, holding its newest run, a status on its head, no trigger
label, and every run is accounted for: published, or stale behind a newer run of its PR.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bot.compare.comparison import compare_records
from bot.github.api import RepoApi
from bot.github.client import config_from_env, connect
from bot.github.events import parse_pull_request_event
from bot.github.facts import gather_facts
from bot.github.labels import TriggerLabel
from bot.github.plan import decide_event, decide_with_facts
from bot.github.publish import PublishOptions, publish
from bot.render.comment import Marker, RenderOptions, render_comment
from bot.render.rendered import comparison_meta, load_rendered, write_rendered
from collector.record import read_record
from tests.factories import gemm_case, simulated_runs, write_record
from tests.github_fixtures import REPO, payload
from tests.github_server import Fault, GitHubServer, PullState

pytestmark = pytest.mark.slow
PRS = 50
RACING = range(0, 10)  # these PRs get a second run
BY_PROCESS = range(40, 50)  # these publish through `collectbot publish` processes
LABEL = "collect/torch"
BACKENDS, OPS = ("torch", "vllm"), ("context_attention", "gemm", "generation_attention")


@dataclass
class Run:
    pr: int
    head: str
    run_id: str
    started_at: str
    comment: Path


def _number(i: int) -> int:
    return 100 + i


def _head(i: int) -> str:
    return f"{i:040x}"


@pytest.fixture(scope="module")
def comparison(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    rng = np.random.default_rng(11)
    tmp = tmp_path_factory.mktemp("load")
    cases = [gemm_case(m) for m in (1, 2, 4, 8)]
    base = write_record(tmp / "base", cases, lambda c: simulated_runs(rng, 1.0))
    cand = write_record(
        tmp / "cand", cases, lambda c: simulated_runs(rng, 1.2 if c is cases[0] else 1.0)
    )
    return compare_records(read_record(base), read_record(cand))


def _render(comparison: dict[str, Any], run: Run) -> None:
    data = copy.deepcopy(comparison)
    data["candidate"].update(run_id=run.run_id, started_at=run.started_at)
    body = render_comment(data, RenderOptions(head_sha=run.head))
    write_rendered(run.comment, body, comparison_meta(data, body, None))


def _labeled_payload(i: int) -> dict[str, Any]:
    data = payload("pull_request.labeled")
    data["number"] = data["pull_request"]["number"] = _number(i)
    data["label"]["name"] = LABEL
    data["pull_request"]["labels"] = [{**data["pull_request"]["labels"][0], "name": LABEL}]
    data["pull_request"]["head"]["sha"] = _head(i)
    data["repository"]["full_name"] = REPO
    data["pull_request"]["head"]["repo"]["full_name"] = REPO
    return data


def _api() -> RepoApi:
    # A racer waits at the server for its twin: longer than that, not a timeout and a retry.
    return RepoApi(connect(config_from_env(timeout=90, retries=6), REPO), REPO)


def test_fifty_prs_labelled_at_once_get_one_comment_each(
    gh: GitHubServer, tmp_path: Path, comparison: dict[str, Any]
) -> None:
    for i in range(PRS):
        gh.add_pull(
            PullState(
                number=_number(i), head_sha=_head(i), base_sha="f" * 40, head_repo=REPO,
                labels=[LABEL, "perf"],
            )
        )  # fmt: skip
    runs: list[Run] = []
    for i in range(PRS):
        for second in (False, True) if i in RACING else (False,):
            run = Run(
                pr=_number(i),
                head=_head(i),
                run_id=f"r{i}{'b' if second else 'a'}",
                started_at=f"2026-11-30T10:{30 if second else 0:02d}:00+00:00",
                comment=tmp_path / f"pr{i}-{'b' if second else 'a'}.md",
            )
            _render(comparison, run)
            runs.append(run)
    # Faults spread over the storm: bad gateways and a secondary rate limit.
    gh.fault(Fault("GET", r"/pulls/1\d\d$", status=502, body={"message": "Bad"}, times=5))
    gh.fault(Fault("POST", r"/issues/1\d\d/comments$", status=502, body={"message": "x"}, times=3))
    gh.fault(Fault.secondary_rate_limit("POST", r"/statuses/", times=2))
    # The two runs of a racing PR both list its comments before either posts: a true race.
    for i in RACING:
        gh.hold("GET", rf"/issues/{_number(i)}/comments$", parties=2, timeout=80)
    results: dict[str, str] = {}
    errors: list[str] = []
    start = threading.Barrier(PRS + len(RACING) - len(BY_PROCESS) + 1)

    def pipeline(run: Run, plan_too: bool) -> None:
        try:
            start.wait(timeout=60)
            api = _api()
            if plan_too:
                event = parse_pull_request_event(_labeled_payload(run.pr - 100), "pull_request")
                trigger = decide_event("pull_request", event, backends=BACKENDS, ops=OPS)
                assert isinstance(trigger, TriggerLabel)
                plan = decide_with_facts(event, trigger, gather_facts(api, event))
                assert plan.trigger and plan.head_sha == run.head, plan.reason
            pr = api.pull(run.pr)
            report = publish(
                api, pr, load_rendered(run.comment), PublishOptions(remove_labels=[LABEL])
            )
            assert not report.errors, report.errors
            assert report.comment is not None
            results[run.run_id] = report.comment.action
        except Exception as exc:  # collected: a thread's assertion would be lost
            errors.append(f"{run.run_id}: {type(exc).__name__}: {exc}")

    threads = []
    procs: list[tuple[Run, subprocess.Popen[str]]] = []
    for run in runs:
        i = run.pr - 100
        if i in BY_PROCESS:
            continue
        first = run.run_id.endswith("a")
        threads.append(threading.Thread(target=pipeline, args=(run, first)))
    for t in threads:
        t.start()
    start.wait(timeout=60)  # every thread is at the line: go
    for run in runs:
        if run.pr - 100 in BY_PROCESS:
            cmd = [
                sys.executable, "-m", "bot", "publish", str(run.comment), "--repo", REPO,
                "--pr", str(run.pr), "--remove-label", LABEL, "--retries", "6",
            ]  # fmt: skip
            procs.append(
                (
                    run,
                    subprocess.Popen(
                        cmd,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                        text=True,
                        env=os.environ.copy(),
                    ),
                )
            )
    for t in threads:
        t.join(timeout=120)
    for run, proc in procs:
        out, _ = proc.communicate(timeout=120)
        if proc.returncode != 0:
            errors.append(f"{run.run_id}: exit {proc.returncode}: {out.strip()}")
        else:
            results[run.run_id] = out.split()[1]  # "comment: created 123 ..."
    assert not errors, "\n".join(errors)
    # No lost run: each one published, or stale behind the newer run of its PR.
    assert len(results) == len(runs)
    for run in runs:
        action = results[run.run_id]
        if run.run_id.endswith("b") or run.pr - 100 not in RACING:
            assert action in ("created", "updated", "unchanged"), (run.run_id, action)
        else:
            assert action in ("created", "updated", "unchanged", "stale"), (run.run_id, action)
    newest = {run.pr: run for run in runs if run.run_id.endswith("b") or run.pr - 100 not in RACING}
    for i in range(PRS):
        number = _number(i)
        ours = [c for c in gh.issue_comments(number) if c["user"].type == "Bot"]
        assert len(ours) == 1, (number, [c["id"] for c in ours])
        marker = Marker.parse(ours[0]["body"])
        assert marker is not None and marker.run_id == newest[number].run_id
        assert ours[0]["body"] == newest[number].comment.read_text()
        assert gh.pulls[number].labels == ["perf"]
        states = [s for s in gh.statuses if s["sha"] == _head(i)]
        assert states and states[-1]["context"] == "collectbot/torch/Test GPU"
    # Each racing pair really raced: both posted, and the duplicate was deleted.
    for i in RACING:
        posts = gh.requests("POST", rf"/issues/{_number(i)}/comments$")
        assert len([r for r in posts if r.status == 201]) == 2, i
    # The faults were met and survived.
    assert any(r.status == 502 for r in gh.requests("GET", r"/pulls/1\d\d$"))
    assert any(r.status == 403 for r in gh.requests("POST", r"/statuses/"))
