"""The sticky comment: one comment per (backend, GPU) slot on a PR, updated in place.

- Ours: a comment whose FIRST line is the collectbot marker and whose author is the bot
  (the configured login, or any account of type Bot): a person quoting or forging the
  marker does not take over the slot.
- Found across all pages of the PR's comments.
- Stale-run guard: runs are ordered by `recency` (a run of the PR's current head beats one of
  an older head; then the later start; then the run id). An older run never replaces a
  newer one's comment.
- Concurrency: after creating a comment the slot is listed again; when two publishers raced,
  every publisher converges on the same answer: the lowest comment id is kept, it holds the
  newest run's body, and the others are deleted. A per-PR `concurrency` group in the workflow
  is still the first line of defence; this makes a race harmless, not merely unlikely.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from bot.github.api import Comment, RepoApi
from bot.render.comment import Marker

WILDCARD = "*"


@dataclass(frozen=True)
class Ours:
    comment: Comment
    marker: Marker


@dataclass
class StickyResult:
    action: str  # created | updated | unchanged | stale
    comment_id: int | None
    url: str | None
    reason: str
    deleted: list[int] = field(default_factory=list)


def is_bot_author(comment: Comment, bot_login: str | None) -> bool:
    if bot_login:
        return comment.author.lower() == bot_login.lower()
    return comment.author_type == "Bot"


def ours(comments: list[Comment], bot_login: str | None) -> list[Ours]:
    found = []
    for c in comments:
        marker = Marker.parse(c.body)
        if marker is not None and is_bot_author(c, bot_login):
            found.append(Ours(c, marker))
    return found


def in_slot(existing: Marker, new: Marker) -> bool:
    """Same (backend, GPU); a wildcard comment (a notice before any result) can be adopted."""
    if existing.gpu == WILDCARD:
        return existing.backend in (new.backend, WILDCARD)
    return existing.same_slot(new)


def _when(stamp: str) -> datetime:
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def recency(marker: Marker, current_head: str | None) -> tuple[int, int, datetime, str]:
    return (
        0 if marker.gpu == WILDCARD else 1,
        1 if current_head and marker.head_sha == current_head else 0,
        _when(marker.started_at),
        marker.run_id,
    )


def supersedes(new: Marker, old: Marker, current_head: str | None) -> bool:
    """May `new` replace the comment that `old` wrote? (Equal: the same run republishing.)"""
    return recency(new, current_head) >= recency(old, current_head)


def describe(marker: Marker) -> str:
    head = marker.head_sha[:12] or "?"
    return f"run {marker.run_id or '?'} (head {head}, started {marker.started_at or '?'})"


def publish_sticky(
    api: RepoApi,
    number: int,
    body: str,
    marker: Marker,
    *,
    bot_login: str | None,
    current_head: str | None,
) -> StickyResult:
    slot = [o for o in ours(api.comments(number), bot_login) if in_slot(o.marker, marker)]
    created: Comment | None = None
    if not slot:
        created = api.create_comment(number, body)
        # Someone may have created one at the same time: look again and converge.
        slot = [o for o in ours(api.comments(number), bot_login) if in_slot(o.marker, marker)]
        if all(o.comment.id != created.id for o in slot):
            slot.append(Ours(created, marker))
    keeper = min(slot, key=lambda o: o.comment.id)
    newest = max(slot, key=lambda o: (recency(o.marker, current_head), -o.comment.id))
    mine_newest = supersedes(marker, newest.marker, current_head)
    want_body = body if mine_newest else newest.comment.body
    result: StickyResult
    if keeper.comment.body == want_body:
        action = "created" if created and keeper.comment.id == created.id else "unchanged"
        url = keeper.comment.html_url
        result = StickyResult(action, keeper.comment.id, url, "")
    else:
        edited = api.edit_comment(keeper.comment.id, want_body)
        action = ("created" if created else "updated") if mine_newest else "stale"
        result = StickyResult(action, edited.id, edited.html_url, "")
    if not mine_newest:
        result.action = "stale"
        result.reason = (
            f"not published: comment {keeper.comment.id} already holds a newer "
            f"{describe(newest.marker)}; this is {describe(marker)}"
        )
    for other in slot:
        if other.comment.id != keeper.comment.id and api.delete_comment(other.comment.id):
            result.deleted.append(other.comment.id)
    return result


def post_notice(
    api: RepoApi,
    number: int,
    notice: str,
    *,
    backend: str,
    head_sha: str,
    bot_login: str | None,
) -> list[int]:
    """Put a notice under the marker of every bot comment on the PR (or post one).

    The notice text must already be safe markdown. Returns the ids written.
    """
    line = f"> [!CAUTION]\n> {notice}\n"
    written = []
    mine = ours(api.comments(number), bot_login)
    for o in mine:
        if notice in o.comment.body:
            continue
        head, _, rest = o.comment.body.partition("\n")
        api.edit_comment(o.comment.id, f"{head}\n{line}\n{rest}")
        written.append(o.comment.id)
    if not mine:
        marker = Marker(
            backend=backend,
            gpu=WILDCARD,
            run_id="",
            head_sha=head_sha,
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        written.append(api.create_comment(number, f"{marker.render()}\n{line}").id)
    return written
