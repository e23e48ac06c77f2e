"""The change points of main's baseline history as a markdown block for its tracking issue.

Pure: a history and its steps grouped by commit in, markdown out (the caller posts it).
Case names and commits come from stored records: every one is escaped or checked here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from bot.history.changepoints import CommitGroup, by_commit, change_points
from bot.history.core import History
from bot.render.comment import case_label, fmt_change
from bot.render.sanitize import md_code, md_text

_SHA = re.compile(r"[0-9a-f]{7,64}")
_REPO = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")


def _sha(value: str | None) -> str | None:
    return value if value is not None and _SHA.fullmatch(value) else None


def _commits(group: CommitGroup, repo: str | None) -> str:
    """`a1b2c3d..e4f5a6b`, a link to GitHub's compare view when both are commits."""
    new, old = _sha(group.commit), _sha(group.previous_commit)
    if new is None:
        return md_text(f"commit {group.commit or 'unknown'}"[:60])
    text = f"{old[:7]}..{new[:7]}" if old else new[:7]
    if repo is not None and _REPO.fullmatch(repo):
        target = f"https://github.com/{repo}/" + (
            f"compare/{old}...{new}" if old else f"commit/{new}"
        )
        return f"[`{text}`]({target})"
    return f"`{text}`"


def _case_link(site_url: str | None, history: History, key: str) -> str | None:
    if site_url is None:
        return None
    from bot.render.comment import case_url

    return case_url(site_url, history.series, key)


def change_points_markdown(
    history: History,
    groups: Sequence[CommitGroup] | None = None,
    *,
    repo: str | None = None,
    site_url: str | None = None,
    max_groups: int = 10,
    max_cases: int = 8,
) -> str:
    """The steps of `history` grouped by commit (newest first) as a markdown block.

    `groups` defaults to `by_commit(history, change_points(history))`. `repo` ("owner/name")
    links each commit range to GitHub's compare view; `site_url` (https, where `collectbot
    site` is served) links each case to its page. At most `max_groups` commit ranges and
    `max_cases` cases each are listed; the rest are counted."""
    if groups is None:
        groups = by_commit(history, change_points(history))
    runs = len(history.runs)
    title = md_text(f"Change points in {history.series.label}", 300)
    lines = [f"### {title}", ""]
    if not groups:
        lines.append(f"No step in any case over the last {runs} stored runs.")
        return "\n".join(lines) + "\n"
    steps = sum(len(g.changes) for g in groups)
    lines += [
        f"{steps} step{'s' * (steps != 1)} in {len(groups)} commit range"
        f"{'s' * (len(groups) != 1)} over the last {runs} stored runs (a step is found by "
        "penalised segmentation of each case's history; the change lies between the two "
        "commits).",
        "",
        "| first run at the new level | commits | slower | faster | cases (largest first) |",
        "| ---: | --- | ---: | ---: | --- |",
    ]
    shown = sorted(groups, key=lambda g: -g.run)[: max(0, max_groups)]
    for group in shown:
        cells = []
        for change in group.changes[: max(0, max_cases)]:
            case = history.cases[change.case]
            label = md_code(case_label({"op": case.op, "params": case.params}), 120)
            size = fmt_change(change.ratio)
            link = _case_link(site_url, history, change.key)
            cells.append(f"{label} [{size}]({link})" if link else f"{label} {size}")
        more = len(group.changes) - len(cells)
        if more > 0:
            cells.append(f"and {more} more")
        slower = sum(1 for c in group.changes if c.ratio > 1)
        faster = sum(1 for c in group.changes if c.ratio < 1 and math.isfinite(c.ratio))
        lines.append(
            f"| {group.run} | {_commits(group, repo)} | {slower} | {faster} | {' · '.join(cells)} |"
        )
    if len(groups) > len(shown):
        lines.append(f"| … | {len(groups) - len(shown)} older commit ranges | | | |")
    return "\n".join(lines) + "\n"
