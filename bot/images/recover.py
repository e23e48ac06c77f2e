"""After the collector container exits: make sure a valid record is there, and say how it ended.

- The collector finalised the record itself (it exited, or was stopped with SIGTERM): keep it.
- It died without finalising (SIGKILL, OOM, a crash): its checkpoint holds every finished run
  and failure, fsynced as they happened; re-finalise the record from it as `partial`, on the
  host, with the collector's own metadata from its last partial run.json. `--resume` (through
  the container again) continues from the same checkpoint.
- It never started collecting (version gate, bad input, no interpreter): write a `failed`
  record with zero rows, so the comparison reports a red run instead of finding nothing.
"""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from collector import jsonfile
from collector.caseplan import Plan
from collector.engine import CollectConfig, resolve_plan
from collector.errors import UserError
from collector.provenance import git_sha
from collector.record import (
    CHECKPOINT,
    RUN_JSON,
    CheckpointState,
    finalize,
    sha256_file,
    write_json,
)

CONTAINER_LOG = "container.log"
# Keys `finalize` writes itself; everything else in run.json is the collector's metadata.
_RECORD_KEYS = ("schema_version", "status", "counts", "files")
_LOG_LIMIT = 8 << 20


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _meta_from(run_json: Path) -> dict[str, Any]:
    data = jsonfile.read(run_json)
    if not isinstance(data, dict):
        raise UserError(f"{run_json}: not a JSON object")
    return {k: v for k, v in data.items() if k not in _RECORD_KEYS}


def _failed_meta(
    cfg: CollectConfig, plan: Plan, block: dict[str, Any], labels: dict[str, str]
) -> dict[str, Any]:
    return {
        "run_id": uuid.uuid4().hex[:12],
        "backend": cfg.backend,
        "framework": labels.get("org.collectbot.framework", "unknown"),
        "framework_version": labels.get("org.collectbot.framework-version", "unknown"),
        "ops": list(cfg.ops),
        "plan_hash": plan.hash,
        "plan_source": plan.source,
        "case_set": plan.case_set,
        "case_filter": cfg.case_filter.text if cfg.case_filter else None,
        "collector_hash": None,
        "image": {"ref": block["image_ref"], "digest": block["image_digest"]},
        "git_sha": git_sha(),
        "device": {"name": "unknown", "requested": cfg.device},
        "versions": {},
        "command": cfg.command,
        "protocol": cfg.protocol.to_json(),
        "canary": cfg.canary.to_json() if cfg.canary else None,
        "started_at": None,
        "resumed_at": [],
        "finished_at": _now(),
    }


def _plan_for(cfg: CollectConfig, meta: dict[str, Any]) -> Plan:
    """The plan the collector ran: the same options and rules, for the device it saw."""
    device = meta.get("device") or {}
    sm = device.get("sm") if cfg.device != "cpu" else None
    plan, _ = resolve_plan(cfg, str(sm) if sm is not None else None)
    return plan


def record_after_exit(
    cfg: CollectConfig,
    block: dict[str, Any],
    log: bytes,
    labels: dict[str, str],
) -> tuple[Path, str]:
    """Leave a valid record in cfg.out whatever the container did; returns (run.json, status)."""
    out = cfg.out
    run_json = out / RUN_JSON
    exit_code = int(block["exit_code"])
    if run_json.exists():
        meta = _meta_from(run_json)
        status = str(jsonfile.read(run_json).get("status"))
        finished = exit_code == 0 and meta.get("finished_at") is not None
        # A complete record already holds everything (its checkpoint is gone); without a
        # checkpoint there is nothing newer than the last partial record to add.
        if status == "complete" or finished or not (out / CHECKPOINT).exists():
            return run_json, status
        plan = _plan_for(cfg, meta)
        if meta.get("plan_hash") not in (None, plan.hash):
            raise UserError(
                f"{run_json}: plan hash {meta.get('plan_hash')} differs from this plan's "
                f"{plan.hash}; cannot re-finalise"
            )
        # The container died without finalising: rebuild from the checkpoint, as partial.
        state = CheckpointState.load(out / CHECKPOINT)
        meta["finished_at"] = _now()
        meta["ended"] = {"by": "container exit", "exit_code": exit_code, "at": _now()}
        finalize(out, meta, list(plan.cases), state, "partial")
        return run_json, "partial"
    plan = _plan_for(cfg, {})
    meta = _failed_meta(cfg, plan, block, labels)
    lines = [ln for ln in log.decode(errors="replace").splitlines() if ln.strip()]
    meta["ended"] = {
        "by": "container exit before collecting",
        "exit_code": exit_code,
        "reason": lines[-1][:500] if lines else None,
        "at": _now(),
    }
    state = CheckpointState.load(out / CHECKPOINT)
    finalize(out, meta, list(plan.cases), state, "failed" if not state.runs else "partial")
    return run_json, "failed" if not state.runs else "partial"


def attach_container(out: Path, block: dict[str, Any], log: bytes) -> None:
    """Add container.log and the `container` block to run.json, checksummed like the rest."""
    run_json = out / RUN_JSON
    record = jsonfile.read(run_json)
    if len(log) > _LOG_LIMIT:
        log = b"[... earlier output cut ...]\n" + log[-_LOG_LIMIT:]
    # A fresh file renamed into place: never written through whatever held the name before.
    tmp = out / f".{CONTAINER_LOG}.{uuid.uuid4().hex[:8]}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(log)
    tmp.replace(out / CONTAINER_LOG)
    record["container"] = block
    record.setdefault("files", {})[CONTAINER_LOG] = sha256_file(out / CONTAINER_LOG)
    record["files"] = dict(sorted(record["files"].items()))
    write_json(run_json, record)
