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

from bot.merge import case_from_row, record_runs
from collector.caseplan import Case
from collector.errors import UserError
from collector.failures import FailureRecord
from collector.record import RUN_JSON, CheckpointState, RunRecord, finalize, sha256_file

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
    state = CheckpointState()
    cases: dict[str, Case] = {}
    failed: dict[str, FailureRecord] = {}
    failed_rounds: dict[str, int] = {}
    offset = 0
    planned = 0
    for record in rounds:
        per_round = max(1, int((record.meta.get("protocol") or {}).get("runs") or 1))
        planned = max(planned, int((record.meta.get("counts") or {}).get("planned") or 0))
        for op in record.ops:
            for row in record.perf[op].to_pylist():
                cases.setdefault(row["case_key"], case_from_row(op, row))
            for key, results in record_runs(record, op, offset).items():
                state.runs.setdefault(key, []).extend(results)
        for f in record.failures:
            cases.setdefault(f.case_key, Case.build(f.op, f.params))
            failed.setdefault(f.case_key, f)
            failed_rounds[f.case_key] = failed_rounds.get(f.case_key, 0) + 1
        offset += per_round
    state.failures = list(failed.values())
    incomplete = [r for r in rounds if r.status != "complete"]
    status = "complete" if not incomplete and len(cases) >= planned else "partial"
    meta = {
        k: v for k, v in first.items() if k not in ("schema_version", "status", "counts", "files")
    }
    meta.update(
        run_id=f"{first.get('run_id')}-x{len(rounds)}-{uuid.uuid4().hex[:6]}",
        protocol={**(first.get("protocol") or {}), "runs": offset},
        started_at=first.get("started_at"),
        finished_at=rounds[-1].meta.get("finished_at"),
        rounds=[
            {
                "path": str(r.path),
                "run_id": r.meta.get("run_id"),
                "status": r.status,
                "started_at": r.meta.get("started_at"),
                "finished_at": r.meta.get("finished_at"),
                "run_json_sha256": sha256_file(r.path / RUN_JSON),
            }
            for r in rounds
        ],
        failed_rounds=failed_rounds,
        **(extra_meta or {}),
    )
    out.mkdir(parents=True, exist_ok=True)
    finalize(out, meta, list(cases.values()), state, status)
    return out
