"""Merge the one-round run records of a campaign side into one run record.

Each round of a campaign is its own `collectbot collect` process writing its own record
(kept, raw, with its checksums). The merged record holds every round's runs, renumbered
(round r's run i becomes run r * runs_per_round + i), and is written by the ordinary record
writer, so everything downstream (compare, store, render) reads it like any other record.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collector.errors import UserError
from collector.record import RUN_JSON, RunRecord
from collector.record.combine import Combined, inherited_meta, source_entry

# run.json fields every round of one side must agree on.
SAME_ACROSS_ROUNDS = ("backend", "framework", "framework_version", "ops", "plan_hash")


def merge_rounds(
    rounds: Sequence[RunRecord], out: Path, extra_meta: dict[str, Any] | None = None
) -> Path:
    """Write one record holding every round's runs; returns its directory."""
    if not rounds:
        raise UserError(f"{out}: no rounds to merge")
    first = rounds[0].meta
    for record in rounds[1:]:
        for name in SAME_ACROSS_ROUNDS:
            if record.meta.get(name) != first.get(name):
                raise UserError(
                    f"{record.path / RUN_JSON}: {name} {record.meta.get(name)!r} differs from "
                    f"the first round's {first.get(name)!r}"
                )
    combined = Combined()
    offset = 0
    planned = 0
    for record in rounds:
        per_round = max(1, int((record.meta.get("protocol") or {}).get("runs") or 1))
        planned = max(planned, int((record.meta.get("counts") or {}).get("planned") or 0))
        combined.add(record, offset, every_failure=False)
        offset += per_round
    incomplete = [r for r in rounds if r.status != "complete"]
    status = "complete" if not incomplete and len(combined.cases) >= planned else "partial"
    meta = inherited_meta(first)
    meta.update(
        run_id=f"{first.get('run_id')}-x{len(rounds)}-{uuid.uuid4().hex[:6]}",
        protocol={**(first.get("protocol") or {}), "runs": offset},
        started_at=first.get("started_at"),
        finished_at=rounds[-1].meta.get("finished_at"),
        rounds=[source_entry(r) for r in rounds],
        failed_rounds=combined.failed_in,
        **(extra_meta or {}),
    )
    return combined.write(out, meta, status)
