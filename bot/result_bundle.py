"""The result bundle: what an untrusted collection run hands to the trusted publisher.

(Not to be confused with `bot/bundle.py`, the offline wheel bundle of a framework.)

The collection workflow runs approved PR code on GPU runners with a read-only token; the
publishing workflow (`workflow_run`) holds the write token and runs no PR code. Between them
travels a bundle: data only, never markdown. The publisher renders the comment itself, with
its own (default-branch) code, from:

    bundle.json       kind, repository, workflow run id, head SHA, stage and error, and the
                      sha256 and size of every other file
    plan.json         the plan decision (`collectbot plan`)
    comparison.json   kind `comparison`: validated against the comparison schema
    run/...           kind `run`: the run record that could not be compared (or what is left)
    log.txt           kind `run`: the end of the failing stage's log

`make_result` writes one; `load_result` accepts one only when every listed file is there with
its checksum and size, nothing unlisted is there, the files are within size limits and the
JSON documents have the expected shape. The checksums catch a truncated or mixed-up
transfer; they prove nothing about who wrote the files, so the publisher also binds the
bundle to the run GitHub says finished (repository, run id, head SHA) and trusts no PR
number from it.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from collector import jsonfile
from collector.errors import UserError
from collector.jsonfile import is_json_type, read_bytes
from collector.record import sha256_file

BUNDLE_JSON = "bundle.json"
PLAN_JSON = "plan.json"
COMPARISON_JSON = "comparison.json"
RUN_DIR = "run"
LOG_TXT = "log.txt"
BUNDLE_VERSION = 1
KINDS = ("skip", "comparison", "run")
MAX_BUNDLE_JSON = 1 << 20
MAX_FILE = 256 << 20
MAX_TOTAL = 512 << 20
MAX_FILES = 200
LOG_TAIL_LINES = 200
_SHA = re.compile(r"^[0-9a-f]{40}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


@dataclass(frozen=True)
class ResultBundle:
    path: Path
    meta: dict[str, Any]
    plan: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.meta["kind"])

    @property
    def head_sha(self) -> str:
        return str(self.meta["head_sha"])

    def file(self, name: str) -> Path:
        return self.path / name


def _read_json(path: Path, what: str, limit: int = MAX_FILE) -> Any:
    if not path.is_file():
        raise UserError(f"{path}: {what} not found")
    if path.stat().st_size > limit:
        raise UserError(f"{path}: {what} is larger than {limit} bytes")
    return jsonfile.loads(read_bytes(path, limit=limit), f"{path}: {what}")


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise UserError(message)


def check_plan(plan: Any, source: str) -> dict[str, Any]:
    """The fields of plan.json the publisher relies on, with their types."""
    _require(isinstance(plan, dict), f"{source}: must hold a JSON object")
    assert isinstance(plan, dict)
    _require(plan.get("schema_version") == 1, f"{source}: unknown schema_version")
    types: dict[str, tuple[type, ...]] = {
        "trigger": (bool,),
        **dict.fromkeys(("code", "reason", "event"), (str,)),
        **dict.fromkeys(("repo", "label", "labeler", "backend", "head_sha"), (str, type(None))),
        "pr": (int, type(None)),
        "remove_labels": (list,),
    }
    for name, allowed in types.items():
        value = plan.get(name)
        ok = is_json_type(value, *allowed)
        _require(ok, f"{source}: field {name!r} has unexpected value {value!r}")
    _require(
        all(isinstance(x, str) for x in plan["remove_labels"]),
        f"{source}: field 'remove_labels' must list label names",
    )
    return plan


def _safe_name(name: str, source: str) -> str:
    rel = PurePosixPath(name)
    _require(
        not rel.is_absolute()
        and 0 < len(rel.parts) <= 2
        and all(_NAME.match(p) and p not in (".", "..") for p in rel.parts)
        and name == rel.as_posix(),
        f"{source}: bad file name {name!r}",
    )
    return name


def make_result(
    out: Path,
    *,
    plan_path: Path,
    workflow_run_id: int,
    run_attempt: int = 1,
    repo: str | None = None,
    head_sha: str | None = None,
    comparison: Path | None = None,
    run: Path | None = None,
    stage: str | None = None,
    error: str | None = None,
    log: Path | None = None,
    marker: dict[str, str] | None = None,
) -> Path:
    """Write a bundle into `out` (new or empty); returns bundle.json's path."""
    plan = check_plan(_read_json(plan_path, "plan"), str(plan_path))
    repo = repo or plan.get("repo")
    head = head_sha or plan.get("head_sha")
    _require(isinstance(repo, str) and "/" in repo, f"{plan_path}: no repository (give --repo)")
    _require(
        isinstance(head, str) and bool(_SHA.match(head)),
        f"{plan_path}: head SHA {head!r} is not a 40-digit commit SHA (give --head-sha)",
    )
    if comparison is not None:
        kind = "comparison"
    elif run is not None or error is not None or plan["trigger"]:
        kind = "run"
    else:
        kind = "skip"
    if out.exists() and any(out.iterdir()):
        raise UserError(f"{out}: not empty")
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(plan_path, out / PLAN_JSON)
    if comparison is not None:
        from bot.compare.validate import validate_comparison

        source = comparison / COMPARISON_JSON if comparison.is_dir() else comparison
        validate_comparison(_read_json(source, "comparison"), str(source))
        shutil.copyfile(source, out / COMPARISON_JSON)
    if run is not None and run.is_dir():
        for path in sorted(run.iterdir()):
            if path.is_file() and not path.is_symlink() and not path.name.startswith("."):
                (out / RUN_DIR).mkdir(exist_ok=True)
                shutil.copyfile(path, out / RUN_DIR / path.name)
    if log is not None and log.is_file():
        lines = log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
        (out / LOG_TXT).write_text("\n".join(lines) + "\n")
    files: dict[str, dict[str, Any]] = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        rel = path.relative_to(out).as_posix()
        size = path.stat().st_size
        files[_safe_name(rel, str(out))] = {"sha256": sha256_file(path), "bytes": size}
    meta = {
        "schema_version": BUNDLE_VERSION,
        "kind": kind,
        "repo": repo,
        "workflow_run_id": int(workflow_run_id),
        "run_attempt": int(run_attempt),
        "head_sha": head,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "stage": stage,
        "error": error[:4000] if error else None,
        "marker": {k: str(v)[:200] for k, v in (marker or {}).items() if v},
        "files": files,
    }
    (out / BUNDLE_JSON).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return out / BUNDLE_JSON


def load_result(path: Path) -> ResultBundle:
    """Read and verify a bundle: every check fails with one line naming file and field."""
    _require(path.is_dir(), f"{path}: bundle directory not found")
    source = str(path / BUNDLE_JSON)
    meta = _read_json(path / BUNDLE_JSON, "bundle.json", MAX_BUNDLE_JSON)
    _require(isinstance(meta, dict), f"{source}: must hold a JSON object")
    _require(
        meta.get("schema_version") == BUNDLE_VERSION,
        f"{source}: unknown schema_version {meta.get('schema_version')!r}",
    )
    _require(meta.get("kind") in KINDS, f"{source}: unknown kind {meta.get('kind')!r}")
    repo = meta.get("repo")
    _require(isinstance(repo, str) and repo.count("/") == 1, f"{source}: bad repo {repo!r}")
    run_id = meta.get("workflow_run_id")
    _require(
        is_json_type(run_id, int) and run_id > 0,
        f"{source}: bad workflow_run_id {run_id!r}",
    )
    head = meta.get("head_sha")
    _require(isinstance(head, str) and bool(_SHA.match(head)), f"{source}: bad head_sha {head!r}")
    for name in ("stage", "error"):
        _require(
            meta.get(name) is None or isinstance(meta.get(name), str),
            f"{source}: field {name!r} must be text",
        )
    marker = meta.get("marker") or {}
    _require(
        isinstance(marker, dict) and all(isinstance(v, str) for v in marker.values()),
        f"{source}: field 'marker' must map names to text",
    )
    files = meta.get("files")
    _require(isinstance(files, dict) and 0 < len(files) <= MAX_FILES, f"{source}: bad 'files'")
    assert isinstance(files, dict)
    total = 0
    for name, entry in files.items():
        _safe_name(str(name), source)
        _require(
            isinstance(entry, dict)
            and isinstance(entry.get("sha256"), str)
            and bool(_HEX64.match(entry["sha256"]))
            and isinstance(entry.get("bytes"), int),
            f"{source}: bad entry for {name!r}",
        )
        target = path / name
        _require(target.is_file() and not target.is_symlink(), f"{target}: listed but missing")
        size = target.stat().st_size
        _require(
            size == entry["bytes"], f"{target}: {size} bytes, bundle.json says {entry['bytes']}"
        )
        _require(size <= MAX_FILE, f"{target}: larger than {MAX_FILE} bytes")
        total += size
        actual = sha256_file(target)
        _require(
            actual == entry["sha256"],
            f"{target}: checksum mismatch (bundle.json says {entry['sha256'][:12]}, "
            f"file is {actual[:12]})",
        )
    _require(total <= MAX_TOTAL, f"{path}: bundle holds {total} bytes, more than {MAX_TOTAL}")
    listed = set(files) | {BUNDLE_JSON}
    for extra in sorted(p for p in path.rglob("*") if not p.is_dir()):
        rel = extra.relative_to(path).as_posix()
        _require(rel in listed, f"{extra}: not listed in bundle.json")
    _require(PLAN_JSON in files, f"{source}: no {PLAN_JSON}")
    plan = check_plan(_read_json(path / PLAN_JSON, "plan"), str(path / PLAN_JSON))
    kind = meta["kind"]
    if kind == "comparison":
        from bot.compare.validate import validate_comparison

        _require(COMPARISON_JSON in files, f"{source}: kind comparison without {COMPARISON_JSON}")
        validate_comparison(
            _read_json(path / COMPARISON_JSON, "comparison"), str(path / COMPARISON_JSON)
        )
    _require(
        kind != "skip" or not plan["trigger"], f"{source}: kind skip for a plan that triggered"
    )
    _require(
        kind == "skip" or plan["trigger"], f"{source}: kind {kind} for a plan that did not trigger"
    )
    _require(
        plan.get("head_sha") in (None, head),
        f"{path / PLAN_JSON}: head_sha {plan.get('head_sha')!r} differs from bundle.json's {head}",
    )
    return ResultBundle(path, meta, plan)
