"""Files written atomically (staged, fsynced, renamed) and their checksums."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_failure(path: Path, exc: OSError) -> str:
    """One line for an OSError while writing part of a record."""
    code = errno.errorcode.get(exc.errno or 0, "")
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{path}: {reason}{f' ({code})' if code else ''}"


def _fsync_path(path: Path, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _stage_bytes(path: Path, data: bytes) -> Path:
    """Write `data` next to `path` under a temporary name, fsynced; the caller renames it."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk must not keep the half-written file
        raise
    return tmp


def _stage_parquet(path: Path, table: pa.Table) -> Path:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        pq.write_table(table, tmp, compression="zstd")
        _fsync_path(tmp)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _json_bytes(data: Any) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    _stage_bytes(path, data).replace(path)


def write_json(path: Path, data: Any) -> None:
    _atomic_write_bytes(path, _json_bytes(data))
