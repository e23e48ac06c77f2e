"""Merge the shards of one plan into one run record.

A sharded collection (`collectbot collect --shard i/n` on n runners) leaves n run records,
each holding the cases whose key hashes to its shard. `merge_shards` turns them back into
the one record the comparison reads, with the ordinary record writer, and says plainly what
was not there: a shard index that no record holds (a runner that died, a job that never
started) makes the merged record `partial` and its planned-but-never-attempted cases count
against coverage; a shard given twice is reported, and only the better record of the two is
kept; a directory that holds no readable record is reported with the reader's error. Shards
that cannot belong to one plan (other ops, case set, framework version, GPU model, collector
code, protocol) are refused with the field that differs.

With the unsharded plan (`collectbot collect --plan-only`, JSON with `plan_hash` and
`case_keys`), every case of every shard is checked against it (the right shard of the right
plan), and a missing shard's cases are counted as planned by op.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from collector import jsonfile
from collector.caseplan import shard_of
from collector.errors import UserError
from collector.record import RUN_JSON, RunRecord, read_record, sha256_file, write_json
from collector.record.combine import Combined, inherited_meta, source_entry

# run.json fields every shard of one plan must agree on.
SAME_ACROSS_SHARDS = (
    "backend",
    "framework",
    "framework_version",
    "ops",
    "case_set",
    "case_filter",
    "attn_backend",
    "plan_source",
    "collector_hash",
    "git_sha",
    "protocol",
    "canary",
)
_STATUS_RANK = {"complete": 2, "partial": 1, "failed": 0}


@dataclass
class ShardInfo:
    index: int
    path: str
    run_id: str
    status: str
    run_json_sha256: str
    device: dict[str, Any]
    counts: dict[str, Any]
    started_at: str | None
    finished_at: str | None


@dataclass
class MergeReport:
    out: str
    count: int
    status: str
    shards: list[ShardInfo] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    unreadable: list[dict[str, str]] = field(default_factory=list)
    plan_hash: str | None = None
    planned: int = 0
    attempted: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        """What a person reads at the end of `collectbot merge`."""
        out = [
            f"merged {len(self.shards)} of {self.count} shards into {self.out}: {self.status} "
            f"({self.attempted} of {self.planned} planned cases attempted)"
        ]
        if self.missing:
            out.append(f"missing shards: {', '.join(f'{i}/{self.count}' for i in self.missing)}")
        for dup in self.duplicates:
            out.append(
                f"duplicate shard {dup['index']}/{self.count}: kept {dup['kept']}, "
                f"ignored {dup['ignored']} ({dup['why']})"
            )
        for bad in self.unreadable:
            out.append(f"unreadable shard {bad['path']}: {bad['error']}")
        return out


def merged_panel(panels: list[Any]) -> dict[str, Any] | None:
    """The shards' calibration panels as one: every device's, the first shard's for a
    device two shards share (collector/panel.py)."""
    good = [p for p in panels if isinstance(p, dict) and isinstance(p.get("devices"), dict)]
    if not good:
        return None
    out = {k: v for k, v in good[0].items() if k != "devices"}
    devices: dict[str, Any] = {}
    for panel in good:
        if panel.get("version") == good[0].get("version"):
            for uuid, device in panel["devices"].items():
                devices.setdefault(str(uuid), device)
    out["devices"] = devices
    out["device_seconds"] = round(
        sum(float(d.get("device_seconds") or 0) for d in devices.values() if isinstance(d, dict)),
        3,
    )
    return out


def load_plan(path: Path) -> dict[str, Any]:
    """The unsharded plan as `collectbot collect --plan-only` prints it."""
    data = jsonfile.read(path)
    if not isinstance(data, dict) or not isinstance(data.get("case_keys"), list):
        raise UserError(f"{path}: field 'case_keys' missing (write it with collect --plan-only)")
    if data.get("shard"):
        raise UserError(
            f"{path}: field 'shard' is {data['shard']!r}; give the unsharded plan "
            "(collect --plan-only without --shard)"
        )
    if not isinstance(data.get("plan_hash"), str):
        raise UserError(f"{path}: field 'plan_hash' missing")
    return data


def _shard_of_meta(record: RunRecord) -> tuple[int, int] | None:
    shard = record.meta.get("shard")
    if shard is None:
        return None
    if (
        not isinstance(shard, list)
        or len(shard) != 2
        or not all(isinstance(x, int) and not isinstance(x, bool) for x in shard)
        or not 1 <= shard[0] <= shard[1]
    ):
        raise UserError(f"{record.path / RUN_JSON}: field 'shard' has unexpected value {shard!r}")
    return int(shard[0]), int(shard[1])


def _case_keys(record: RunRecord) -> set[str]:
    keys = {f.case_key for f in record.failures}
    for table in record.perf.values():
        keys.update(str(k) for k in table.column("case_key").to_pylist())
    return keys


def _ok_count(record: RunRecord) -> int:
    return int((record.meta.get("counts") or {}).get("ok") or 0)


def _rank(record: RunRecord) -> tuple[int, int, str]:
    return (
        _STATUS_RANK.get(record.status, -1),
        _ok_count(record),
        str(record.meta.get("finished_at") or ""),
    )


def _same_image(first: RunRecord, other: RunRecord) -> tuple[str, Any, Any]:
    """Shards ran the same image: the same content hash when both ran in a container (trusted
    shards build their own, each with its own id), else the same reference."""
    hashes = [(r.meta.get("container") or {}).get("image_content_hash") for r in (first, other)]
    if all(hashes):
        return ("container.image_content_hash", hashes[0], hashes[1])
    return (
        "image.ref",
        (first.meta.get("image") or {}).get("ref"),
        (other.meta.get("image") or {}).get("ref"),
    )


def _check_same(first: RunRecord, other: RunRecord) -> None:
    checks: list[tuple[str, Any, Any]] = [
        (name, first.meta.get(name), other.meta.get(name)) for name in SAME_ACROSS_SHARDS
    ]
    checks.append(
        (
            "device.name",
            (first.meta.get("device") or {}).get("name"),
            (other.meta.get("device") or {}).get("name"),
        )
    )
    checks.append(_same_image(first, other))
    for name, want, got in checks:
        if want != got:
            raise UserError(
                f"{other.path / RUN_JSON}: {name} {got!r} differs from {want!r} in "
                f"{first.path / RUN_JSON}; shards of one plan must agree"
            )


def _read_shards(
    paths: Sequence[Path],
) -> tuple[list[tuple[int, int | None, RunRecord]], list[dict[str, str]]]:
    """Each path's record with its shard `(i, n)`, and the paths whose record is unreadable
    (a shard that died early); a path that is not a directory at all is a typo, refused."""
    records: list[tuple[int, int | None, RunRecord]] = []
    unreadable: list[dict[str, str]] = []
    for path in paths:
        if not path.is_dir():
            raise UserError(f"{path}: not a run record directory (no such directory)")
        try:
            record = read_record(path)
        except UserError as exc:
            unreadable.append({"path": str(path), "error": str(exc)})
            continue
        shard = _shard_of_meta(record)
        records.append((shard[0], shard[1], record) if shard else (1, None, record))
    return records, unreadable


def _shard_count(records: list[tuple[int, int | None, RunRecord]], count: int | None) -> int:
    """The n of the shards' `i/n`: one for all of them, and the one `--count` gives."""
    n_meta = {n for _, n, _ in records if n is not None}
    if len(n_meta) > 1:
        raise UserError(
            "merge: the shards were cut in different counts "
            f"({', '.join(sorted(f'{i}/{n}' for i, n, _ in records if n))}); one plan has one n"
        )
    n = count or (n_meta.pop() if n_meta else 1)
    for index, shard_n, record in records:
        if shard_n is None and n > 1:
            raise UserError(f"{record.path / RUN_JSON}: not a shard (no 'shard' field) of {n}")
        if shard_n is not None and shard_n != n:
            raise UserError(f"{record.path / RUN_JSON}: shard {index}/{shard_n} is not one of {n}")
    return n


def _choose(
    records: list[tuple[int, int | None, RunRecord]],
) -> tuple[dict[int, RunRecord], list[dict[str, Any]]]:
    """The best record of each shard index, and the duplicates left out (and why)."""
    by_index: dict[int, list[RunRecord]] = {}
    for index, _, record in records:
        by_index.setdefault(index, []).append(record)
    chosen: dict[int, RunRecord] = {}
    duplicates: list[dict[str, Any]] = []
    for index, group in sorted(by_index.items()):
        ranked = sorted(group, key=_rank, reverse=True)
        chosen[index] = ranked[0]
        for other in ranked[1:]:
            same = sha256_file(other.path / RUN_JSON) == sha256_file(ranked[0].path / RUN_JSON)
            duplicates.append(
                {
                    "index": index,
                    "kept": str(ranked[0].path),
                    "ignored": str(other.path),
                    "why": "identical record"
                    if same
                    else f"kept {ranked[0].status} with {_ok_count(ranked[0])} ok cases over "
                    f"{other.status} with {_ok_count(other)}",
                }
            )
    return chosen, duplicates


def _check_plan(chosen: dict[int, RunRecord], n: int, plan: dict[str, Any]) -> None:
    """Every case of every shard is in the plan, in the shard its key hashes to."""
    in_plan = {str(k) for k in plan["case_keys"]}
    for index, record in chosen.items():
        for key in sorted(_case_keys(record)):
            if key not in in_plan:
                raise UserError(f"{record.path}: case {key} is not in the plan {plan['plan_hash']}")
            if shard_of(key, n) != index:
                raise UserError(
                    f"{record.path}: case {key} belongs to shard {shard_of(key, n)}/{n} of "
                    f"plan {plan['plan_hash']}, not {index}/{n}"
                )


def _combine(chosen: dict[int, RunRecord], n: int) -> Combined:
    """The chosen shards' cases and runs; a case held by two shards means two plans."""
    combined = Combined()
    owner: dict[str, int] = {}
    for index, record in sorted(chosen.items()):
        for key in _case_keys(record):
            if key in owner and owner[key] != index:
                raise UserError(
                    f"{record.path}: case {key} is also in shard {owner[key]}/{n}; "
                    "the shards come from different plans"
                )
            owner[key] = index
        combined.add(record)
    return combined


def _merged_status(chosen: dict[int, RunRecord], missing: list[int]) -> str:
    statuses = [r.status for r in chosen.values()]
    if all(s == "failed" for s in statuses) and not missing:
        return "failed"
    if missing or any(s != "complete" for s in statuses):
        return "partial"
    return "complete"


def _shard_info(index: int, record: RunRecord) -> ShardInfo:
    source = source_entry(record)
    return ShardInfo(
        index=index,
        path=source["path"],
        run_id=str(source["run_id"]),
        status=record.status,
        run_json_sha256=source["run_json_sha256"],
        device=dict(record.meta.get("device") or {}),
        counts={k: v for k, v in (record.meta.get("counts") or {}).items() if k != "per_op"},
        started_at=source["started_at"],
        finished_at=source["finished_at"],
    )


def _merged_meta(
    first: RunRecord, chosen: dict[int, RunRecord], report: MergeReport
) -> dict[str, Any]:
    """run.json of the merged record: the first shard's, with the merge's own fields."""
    errors = [str(r.meta.get("error")) for r in chosen.values() if r.meta.get("error")]
    if report.missing:
        missing = ", ".join(f"{i}/{report.count}" for i in report.missing)
        errors.append(f"shards {missing} left no record")
    starts = [i.started_at for i in report.shards if i.started_at]
    ends = [i.finished_at for i in report.shards if i.finished_at]
    meta = inherited_meta(first.meta)
    meta.update(
        run_id=f"merged-{uuid.uuid4().hex[:12]}",
        shard=None,
        plan_hash=report.plan_hash,
        started_at=min(starts) if starts else None,
        finished_at=max(ends) if ends else None,
        error="; ".join(errors) or None,
        merged_from={k: v for k, v in report.to_json().items() if k not in ("out", "status")},
        panel=merged_panel([r.meta.get("panel") for _, r in sorted(chosen.items())]),
    )
    return meta


def merge_shards(
    paths: Sequence[Path],
    out: Path,
    *,
    count: int | None = None,
    plan: dict[str, Any] | None = None,
) -> MergeReport:
    """Write one record from the shards in `paths`; returns what was merged and what was not."""
    if not paths:
        raise UserError("merge: give at least one shard directory")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"{out}: not empty (choose a new --out)")
    records, unreadable = _read_shards(paths)
    if not records:
        detail = "; ".join(f"{u['path']}: {u['error']}" for u in unreadable)
        raise UserError(f"merge: no readable shard record ({detail})")
    if unreadable and (count or 1) == 1 and all(n is None for _, n, _ in records):
        # An unsharded record has no shard to be missing: the other path is not a run record.
        bad = unreadable[0]
        raise UserError(f"merge: {bad['path']} is not a run record ({bad['error']})")
    n = _shard_count(records, count)
    first = records[0][2]
    for _, _, record in records[1:]:
        _check_same(first, record)
    chosen, duplicates = _choose(records)
    missing = [i for i in range(1, n + 1) if i not in chosen]
    if plan is not None:
        _check_plan(chosen, n, plan)
    combined = _combine(chosen, n)
    keys = json.dumps(sorted(c.key for c in combined.cases.values()))
    plan_hash = str(plan["plan_hash"]) if plan else hashlib.sha256(keys.encode()).hexdigest()[:16]
    status = _merged_status(chosen, missing)
    report = MergeReport(
        out=str(out),
        count=n,
        status=status,
        shards=[_shard_info(index, record) for index, record in sorted(chosen.items())],
        missing=missing,
        duplicates=duplicates,
        unreadable=unreadable,
        plan_hash=plan_hash,
    )
    combined.write(out, _merged_meta(first, chosen, report), status)
    plan_keys = [str(k) for k in plan["case_keys"]] if plan else []
    _count_planned(out, chosen, missing, n, plan_keys, report)
    return report


def _count_planned(
    out: Path,
    chosen: dict[int, RunRecord],
    missing: list[int],
    n: int,
    plan_keys: list[str],
    report: MergeReport,
) -> None:
    """Planned = what each shard planned (its unattempted cases included) plus, from the
    plan, every case of a missing shard; then run.json is written again (it lists the other
    files' checksums, not its own)."""
    run_json = out / RUN_JSON
    record = json.loads(run_json.read_text())
    per_op: dict[str, dict[str, int]] = record["counts"]["per_op"]
    for op in per_op:
        per_op[op]["planned"] = sum(
            int(((r.meta.get("counts") or {}).get("per_op") or {}).get(op, {}).get("planned", 0))
            for r in chosen.values()
        )
    for key in plan_keys:
        if shard_of(key, n) in missing:
            op = key.split(":", 1)[0]
            if op in per_op:
                per_op[op]["planned"] += 1
    for c in per_op.values():
        c["planned"] = max(c["planned"], c["attempted"])
    record["counts"]["planned"] = sum(c["planned"] for c in per_op.values())
    report.planned = int(record["counts"]["planned"])
    report.attempted = int(record["counts"]["attempted"])
    record["merged_from"].update(planned=report.planned, attempted=report.attempted)
    write_json(run_json, record)
