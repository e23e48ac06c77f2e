"""The tracking issue of main's regressions (pure): a new baseline compared with the previous
stored baseline of the same key, as an issue body found again by its marker.

The body is the marker line, a status line, an optional change-points block (a hook: the
history's renderer, bot/history/, hands in its markdown) and the full comparison as the PR
comment renders it, without that comment's own marker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bot.keys import StoreKey
from bot.render.comment import GITHUB_COMMENT_LIMIT, RenderOptions, render_comment
from bot.render.sanitize import md_code, md_text

# The first line of the bot's tracking issue; `key` is the store key's path (slugged parts).
MARKER = "<!-- collectbot-tracking key={key} -->"
_MARKER = re.compile(r"^<!-- collectbot-tracking key=([a-z0-9._+/-]{1,400}) -->$")
# Room for the lines above the report inside GitHub's body limit.
HEAD_ROOM = 4000


def tracking_key(comparison: dict[str, Any]) -> StoreKey:
    """The store key of the compared runs (the candidate's: the new baseline)."""
    cand = comparison["candidate"]
    return StoreKey(
        backend=str(cand.get("backend") or cand.get("framework") or "unknown"),
        framework_version=str(cand.get("framework_version") or "unknown"),
        gpu=str((cand.get("device") or {}).get("name") or "unknown"),
        ops=tuple(sorted(str(o) for o in cand.get("ops") or [])),
    )


def marker_key(body: str) -> str | None:
    """The key a tracking issue's first line names, or None for any other text."""
    match = _MARKER.match(body.split("\n", 1)[0].strip())
    return match.group(1) if match else None


@dataclass(frozen=True)
class TrackingBody:
    title: str
    body: str
    red: bool


def render_tracking(
    comparison: dict[str, Any],
    sha: str,
    ref: str,
    change_points: str | None = None,
) -> TrackingBody:
    """Title and body of the tracking issue for this comparison (red or clean)."""
    key = tracking_key(comparison)
    level = comparison["verdict"]["level"]
    red = level == "red"
    base = comparison["baseline"]
    where = md_code(ref)
    if red:
        status = (
            f"## ❌ {md_text(ref)} regressed: {md_text(key.label)}\n\n"
            f"The baseline of {md_code(sha[:12])} on {where}, compared with the previous "
            f"stored baseline ({md_code(str(base.get('git_sha') or base.get('run_id'))[:12])}"
            "), is red. This issue stays open, updated by each new baseline, until one is clean."
        )
    else:
        status = (
            f"## ✅ {md_text(ref)} is clean again: {md_text(key.label)}\n\n"
            f"The baseline of {md_code(sha[:12])} on {where}, compared with the previous stored "
            "baseline, is no longer red; collectbot closed this issue. The last comparison "
            "follows."
        )
    parts = [MARKER.format(key=key.path), status]
    if change_points:
        parts.append("### Change points\n\n" + change_points.strip())
    room = GITHUB_COMMENT_LIMIT - HEAD_ROOM - sum(len(p) for p in parts)
    report = render_comment(comparison, RenderOptions(head_sha=sha, limit=max(2000, room)))
    parts.append(report.split("\n", 1)[1] if "\n" in report else "")
    title = f"collectbot: {ref} regressed ({key.label})"
    return TrackingBody(title=title[:250], body="\n\n".join(parts) + "\n", red=red)
