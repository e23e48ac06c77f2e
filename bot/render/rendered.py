"""A rendered comment on disk: `comment.md` and its sidecar `comment.json`.

Render writes both; publish reads both. The sidecar carries what publish needs besides the
body (the verdict for the commit status or check run, the run's status, the marker), so the
publishing job never has to read run records or comparisons.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bot.render.comment import Marker
from collector import jsonfile
from collector.errors import UserError

SIDECAR_VERSION = 1
LEVELS = ("red", "yellow", "green")


@dataclass(frozen=True)
class RenderedMeta:
    kind: str  # comparison | run
    level: str  # red | yellow | green
    headline: str
    run_status: str  # complete | partial | failed | missing | unreadable
    marker: Marker
    artifacts_url: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["marker"] = asdict(self.marker)
        return {"schema_version": SIDECAR_VERSION, **out}


def sidecar_path(comment: Path) -> Path:
    return comment.with_suffix(".json")


def write_rendered(comment: Path, body: str, meta: RenderedMeta) -> None:
    comment.parent.mkdir(parents=True, exist_ok=True)
    comment.write_text(body)
    sidecar_path(comment).write_text(json.dumps(meta.to_json(), indent=1) + "\n")


@dataclass(frozen=True)
class Rendered:
    path: Path
    body: str
    meta: RenderedMeta


def load_rendered(comment: Path) -> Rendered:
    if not comment.is_file():
        raise UserError(f"{comment}: rendered comment not found (run `collectbot render`)")
    body = comment.read_text()
    marker = Marker.parse(body)
    if marker is None:
        raise UserError(f"{comment}: first line is not a collectbot marker (render it again)")
    side = sidecar_path(comment)
    if not side.is_file():
        raise UserError(f"{side}: sidecar missing (`collectbot render` writes it next to the .md)")
    try:
        data = jsonfile.read(side)
        level = str(data["level"])
        meta = RenderedMeta(
            kind=str(data["kind"]),
            level=level,
            headline=str(data["headline"]),
            run_status=str(data.get("run_status") or "complete"),
            marker=marker,
            artifacts_url=data.get("artifacts_url"),
        )
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as exc:
        raise UserError(f"{side}: not a valid sidecar ({exc!r})") from None
    if level not in LEVELS:
        raise UserError(f"{side}: field 'level' has unknown value {level!r}")
    return Rendered(comment, body, meta)


def comparison_meta(
    comparison: dict[str, Any], body: str, artifacts_url: str | None
) -> RenderedMeta:
    marker = Marker.parse(body)
    assert marker is not None
    verdict = comparison["verdict"]
    return RenderedMeta(
        kind="comparison",
        level=str(verdict["level"]),
        headline=str(verdict["headline"]),
        run_status=str(comparison["candidate"].get("status") or "complete"),
        marker=marker,
        artifacts_url=artifacts_url,
    )


def run_meta(info: Any, body: str, artifacts_url: str | None) -> RenderedMeta:
    from bot.render.run_summary import run_verdict

    marker = Marker.parse(body)
    assert marker is not None
    level, headline, _ = run_verdict(info)
    return RenderedMeta(
        kind="run",
        level=level,
        headline=headline,
        run_status=str(info.status),
        marker=marker,
        artifacts_url=artifacts_url,
    )
