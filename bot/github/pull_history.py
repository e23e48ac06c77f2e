"""A pull request's own runs: kept in the run store under the PR's namespace, so its comment can
say what changed since the previous run of the same PR (groups fixed, groups new, latencies
moved). The verdict stays against the base branch's baseline; this section only informs.

Trust (docs/security.md, S65): the namespace is `<store>/pulls/<owner>/<repo>/<number>/`, a
run store of its own (same layout, manifest last, checksums verified on every read). Only the
publisher writes it, and only:
- with the number GitHub resolved for the finished run (`pulls_of_run`: the run's head
  repository and branch at its head SHA), never a number the bundle or the PR's files say;
- with the run record of the verified result bundle bound to that run (repository, run id,
  head SHA), after GitHub confirmed the run's approval and the comment was published.
Pull-request jobs get the store read-only, so no PR's code writes any namespace; a run of
PR B can only ever be filed under B's number, because GitHub ties the run to B's branch.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from bot.compare import stats
from bot.keys import slug
from bot.store import Entry, RunStore, key_of, read_only_from_env
from collector.errors import UserError

PULLS_ROOT = "pulls"
# Runs kept per PR and key: the previous one is all the comment needs; a few more for history.
KEEP = 5
# Rows of each list the summary carries (the renderer trims further to fit).
MAX_ROWS = 50


def namespace(url: str, repo: str, number: int) -> str:
    """The URL of one PR's namespace in the store at `url`."""
    owner, _, name = repo.partition("/")
    if not owner or not name or number < 1:
        raise UserError(f"pull request namespace: bad repository {repo!r} or number {number!r}")
    return "/".join([url.rstrip("/"), PULLS_ROOT, slug(owner), slug(name), str(int(number))])


def pull_store(url: str, repo: str, number: int) -> RunStore:
    """One PR's runs (read-only unless this job may write: the publisher only)."""
    return RunStore(namespace(url, repo, number), read_only=read_only_from_env())


def previous_entry(store: RunStore, meta: dict[str, Any]) -> Entry | None:
    """The PR's latest stored run of the same key, other than this run."""
    return store.latest(key_of(meta), exclude_run_id=str(meta.get("run_id")), complete_only=False)


def settings_of(comparison: dict[str, Any]) -> stats.Settings:
    """The statistics settings the verdict used (so the two sections judge alike)."""
    data = dict(comparison.get("settings") or {})
    overrides = tuple(
        stats.MinEffectOverride(**o) for o in data.pop("min_effect_overrides", None) or []
    )
    known = {f.name for f in dataclasses.fields(stats.Settings)}
    try:
        return stats.Settings(
            **{k: v for k, v in data.items() if k in known}, min_effect_overrides=overrides
        )
    except (TypeError, ValueError):
        return stats.Settings()


def _group(g: dict[str, Any]) -> dict[str, Any]:
    return {
        k: g.get(k)
        for k in ("group_key", "op", "classification", "exception_type", "dtype", "message")
    } | {"count": g.get("count"), "sample_case": g.get("sample_case")}


def summarise(since: dict[str, Any], previous: Entry) -> dict[str, Any]:
    """What the comment shows from a comparison of the PR's previous run (as baseline) with
    this one: pure, JSON-able."""
    fg = since["failure_groups"]
    latency = since["latency"]
    moved = [c for c in latency["cases"] if c["verdict"] in (stats.REGRESSED, stats.IMPROVED)]
    moved.sort(key=lambda c: (c["verdict"] != stats.REGRESSED, -abs((c["ratio"] or 1.0) - 1.0)))
    verdicts = latency["summary"]["verdicts"]
    return {
        "previous_run_id": previous.run_id,
        "previous_sha": str(previous.manifest.get("git_sha") or ""),
        "previous_stored_at": str(previous.manifest.get("stored_at") or ""),
        "fixed": [_group(g) for g in fg["resolved"][:MAX_ROWS]],
        "new": [_group(g) for g in fg["new"][:MAX_ROWS]],
        "matched": latency["summary"]["matched"],
        "regressed": verdicts[stats.REGRESSED],
        "improved": verdicts[stats.IMPROVED],
        "moved": moved[:MAX_ROWS],
    }


def since_previous(
    store: RunStore, run_dir: Path, settings: stats.Settings, workdir: Path
) -> dict[str, Any] | None:
    """Compare this run with the PR's previous stored run; None when there is none."""
    from bot.compare.comparison import Baseline, compare_runs
    from collector.record import read_record

    cand = read_record(run_dir)
    previous = previous_entry(store, cand.meta)
    if previous is None:
        return None
    base = read_record(store.get(previous, workdir / "previous-run"))
    since = compare_runs(base, cand, settings, Baseline(kind="explicit-run")).data
    return summarise(since, previous)


def remember(store: RunStore, run_dir: Path) -> Entry:
    """Keep this run as the PR's latest (the publisher, after the comment is posted)."""
    return store.put(run_dir, keep=KEEP)
