"""The run store: run records kept by (backend, framework version, GPU, ops), for baselines.

A store is a local directory or any fsspec URL (`s3://bucket/prefix` with the `s3` extra
installed; endpoint and credentials come from the usual AWS variables: AWS_ENDPOINT_URL,
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY). Layout, one entry per stored run:

    <root>/collectbot-store.json                 format marker
    <root>/<backend>/<version>/<gpu>/<ops>/<stored-at>-<run id>/
        run.json, <op>_perf.parquet, ...         the run record's files
        manifest.json                            written last: the entry's commit point

An entry without a manifest (an interrupted upload) is invisible, so writes are atomic on
any object store; the manifest holds the sha256 of every file and `get` verifies them all.
Retention keeps the newest N entries per key: the manifest goes first, so a reader never
sees half an entry.

Jobs hand files to each other as their run's own artifacts, never through the store.

Trust levels (docs/security.md): the store holds trusted data only, written by trusted jobs
(the baseline workflow). A pull request's jobs get it read-only: their runners' credentials
or file permissions allow no write, and their configuration says so (`read_only`, from
COLLECTBOT_STORE_ACCESS=read), so even a misconfigured runner refuses in one line.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.keys import StoreKey, slug
from collector.errors import UserError
from collector.record import RUN_JSON, read_record, sha256_file

STORE_FORMAT = 1
MARKER = "collectbot-store.json"
MANIFEST = "manifest.json"
DEFAULT_KEEP = 20
# `read` in a job's environment: this job may read the store, never write it.
STORE_ACCESS_ENV = "COLLECTBOT_STORE_ACCESS"


def read_only_from_env(environ: dict[str, str] | None = None) -> bool:
    """Whether the job's configuration says the store is read-only (`read`, or a typo of it:
    anything but empty or `write` is read-only, so a mistake never grants writes)."""
    import os

    value = (os.environ if environ is None else environ).get(STORE_ACCESS_ENV, "").strip()
    return value.lower() not in ("", "write")


def key_of(meta: dict[str, Any]) -> StoreKey:
    """The store key of a run record's run.json."""
    device = meta.get("device") or {}
    return StoreKey(
        backend=str(meta.get("backend") or meta.get("framework") or "unknown"),
        framework_version=str(meta.get("framework_version") or "unknown"),
        gpu=str(device.get("name") or "unknown"),
        ops=tuple(sorted(str(o) for o in meta.get("ops") or [])),
    )


def record_gpu_uuids(record: Any) -> list[str]:
    """Every GPU UUID a run record names: its cases' (perf rows), else its device's."""
    found: set[str] = set()
    for table in record.perf.values():
        if "gpu_uuid" in table.column_names:
            for value in table.column("gpu_uuid").unique().to_pylist():
                found.update(u for u in str(value or "").split("|") if u)
    if not found:
        uuid = (record.meta.get("device") or {}).get("uuid")
        if uuid:
            found.add(str(uuid))
    return sorted(found)


@dataclass(frozen=True)
class Entry:
    key: StoreKey
    name: str
    manifest: dict[str, Any]

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id"))

    @property
    def status(self) -> str:
        return str(self.manifest.get("status"))

    @property
    def gpu_uuids(self) -> list[str]:
        """The GPUs that measured the stored run (entries stored before docs/fleet.md: [])."""
        uuids = self.manifest.get("gpu_uuids")
        return [str(u) for u in uuids] if isinstance(uuids, list) else []

    @property
    def ref(self) -> str | None:
        ref = self.manifest.get("ref")
        return str(ref) if ref is not None else None

    def summary(self) -> dict[str, Any]:
        m = self.manifest
        return {
            "key": self.key.to_json(),
            "entry": self.name,
            "run_id": self.run_id,
            "status": self.status,
            "ref": self.ref,
            "git_sha": m.get("git_sha"),
            "stored_at": m.get("stored_at"),
            "source": m.get("source"),
            "gpu_uuids": self.gpu_uuids,
        }


def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class RunStore:
    """Run records under one root (a directory or an fsspec URL)."""

    def __init__(
        self, url: str, storage_options: dict[str, Any] | None = None, read_only: bool = False
    ) -> None:
        import fsspec

        self.url = url
        self.read_only = read_only
        try:
            self.fs, self.root = fsspec.core.url_to_fs(url, **(storage_options or {}))
        except ImportError as exc:
            raise UserError(
                f"store {url!r}: this protocol needs an extra package ({exc.name or exc}); "
                "for s3:// install collectbot[s3]"
            ) from None
        except ValueError as exc:
            raise UserError(f"store {url!r}: not a usable URL ({exc})") from None
        self.root = self.root.rstrip("/")
        self.local = "file" in _protocols(self.fs)

    def _writable(self, what: str) -> None:
        """Refuse a write through a read-only configuration (a pull request's job)."""
        if self.read_only:
            raise UserError(
                f"{self.url}: read-only for this job ({STORE_ACCESS_ENV}=read, an untrusted "
                f"job); {what} is done by trusted jobs only (the baseline workflow)"
            )

    @contextmanager
    def _denied_is_one_line(self, what: str) -> Iterator[None]:
        """The runner's credentials or file permissions refuse a write: one line."""
        try:
            yield
        except PermissionError as exc:
            raise UserError(
                f"{self.url}: {what} refused by the store ({exc.strerror or exc}); this job's "
                "credentials are read-only (a pull request's job), or lack the trusted role"
            ) from None

    def _join(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def _write_atomic(self, path: str, data: bytes) -> None:
        """Local: temp file and rename. Object stores: one PUT is already atomic."""
        if self.local:
            tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
            self.fs.pipe_file(tmp, data)
            self.fs.mv(tmp, path)
        else:
            self.fs.pipe_file(path, data)

    def _ensure_marker(self) -> None:
        marker = self._join(MARKER)
        if self.fs.exists(marker):
            fmt = json.loads(self.fs.cat_file(marker)).get("format")
            if fmt != STORE_FORMAT:
                raise UserError(f"{self.url}: store format {fmt!r}, this tool knows {STORE_FORMAT}")
            return
        if self.local:
            self.fs.makedirs(self.root, exist_ok=True)
        self._write_atomic(marker, json.dumps({"format": STORE_FORMAT}).encode())

    def put(self, record_dir: Path, ref: str | None = None, keep: int | None = None) -> Entry:
        """Store a run record (validated first); idempotent for a run already stored."""
        self._writable("storing a run (a baseline)")
        with self._denied_is_one_line("storing a run"):
            return self._put(record_dir, ref, keep)

    def _put(self, record_dir: Path, ref: str | None, keep: int | None) -> Entry:
        record = read_record(record_dir)
        key = key_of(record.meta)
        run_sha = sha256_file(record_dir / RUN_JSON)
        for existing in self.entries(key):
            same_run = existing.run_id == record.meta["run_id"] and existing.ref == ref
            if same_run and existing.manifest["files"].get(RUN_JSON) == run_sha:
                return existing
        self._ensure_marker()
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        name = f"{stamp}-{slug(str(record.meta['run_id']))}"
        entry_path = self._join(key.path, name)
        names = [*sorted(record.meta["files"]), RUN_JSON]
        files: dict[str, str] = {}
        size = 0
        if self.local:
            self.fs.makedirs(entry_path, exist_ok=True)
        for file_name in names:
            local = record_dir / file_name
            files[file_name] = sha256_file(local)
            size += local.stat().st_size
            self.fs.put_file(str(local), f"{entry_path}/{file_name}")
        manifest = {
            "format": STORE_FORMAT,
            "key": key.to_json(),
            "run_id": record.meta["run_id"],
            "status": record.status,
            "ref": ref,
            "git_sha": record.meta.get("git_sha"),
            "source": record.meta.get("source", "collector"),
            "stored_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "files": files,
            "size_bytes": size,
            # Which physical GPUs measured it: a baseline is taken from the same GPUs when
            # the store has one (bot/compare/store_baseline.py, docs/fleet.md).
            "gpu_uuids": record_gpu_uuids(record),
        }
        self._write_atomic(f"{entry_path}/{MANIFEST}", json.dumps(manifest, indent=1).encode())
        entry = Entry(key, name, manifest)
        if keep is not None:
            self.prune(key, keep)
        return entry

    def entries(self, key: StoreKey | None = None, ref: str | None = None) -> list[Entry]:
        """Committed entries, oldest first; optionally one key's and one ref's."""
        pattern = self._join(key.path if key else "*/*/*/*", "*", MANIFEST)
        entries = []
        for path in sorted(self.fs.glob(pattern)):
            try:
                manifest = json.loads(self.fs.cat_file(path))
                entry_key = StoreKey.from_json(manifest["key"])
            except (ValueError, KeyError, TypeError):
                continue  # not ours, or damaged: never a baseline
            name = str(path).rstrip("/").split("/")[-2]
            if ref is not None and manifest.get("ref") != ref:
                continue
            entries.append(Entry(entry_key, name, manifest))
        return sorted(entries, key=lambda e: (e.name, e.key.path))

    def latest(
        self,
        key: StoreKey,
        ref: str | None = None,
        exclude_run_id: str | None = None,
        complete_only: bool = True,
    ) -> Entry | None:
        """The newest entry of a key: the previous run to compare a new one against."""
        for entry in reversed(self.entries(key, ref)):
            if exclude_run_id is not None and entry.run_id == exclude_run_id:
                continue
            if complete_only and entry.status != "complete":
                continue
            return entry
        return None

    def find(self, run_id: str) -> Entry:
        matches = [e for e in self.entries() if e.run_id == run_id]
        if not matches:
            raise UserError(f"{self.url}: no stored run with id {run_id!r}")
        return matches[-1]

    def get(self, entry: Entry, dest: Path) -> Path:
        """Download an entry into `dest` (new or empty) and verify every checksum."""
        if dest.exists() and any(dest.iterdir()):
            raise UserError(f"{dest}: not empty")
        dest.mkdir(parents=True, exist_ok=True)
        entry_path = self._join(entry.key.path, entry.name)
        for file_name, digest in sorted(entry.manifest["files"].items()):
            if "/" in file_name or file_name in ("", ".", ".."):
                raise UserError(f"{self.url}: entry {entry.name} lists a bad file {file_name!r}")
            data = self.fs.cat_file(f"{entry_path}/{file_name}")
            if _sha256_bytes(data) != digest:
                raise UserError(
                    f"{self.url}: {entry.name}/{file_name}: checksum mismatch "
                    f"(manifest says {digest[:12]}, store has {_sha256_bytes(data)[:12]})"
                )
            (dest / file_name).write_bytes(data)
        return dest

    def prune(self, key: StoreKey, keep: int) -> list[Entry]:
        """Keep the newest `keep` entries of a key; delete the rest, manifest first."""
        self._writable("pruning stored runs")
        if keep < 1:
            raise UserError(f"--keep: must be at least 1, got {keep}")
        entries = self.entries(key)
        doomed = entries[: max(0, len(entries) - keep)]
        for entry in doomed:
            entry_path = self._join(entry.key.path, entry.name)
            self.fs.rm_file(f"{entry_path}/{MANIFEST}")
            self.fs.rm(entry_path, recursive=True)
        return doomed


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)
