"""The checkpoint journal: each finished run and failure, appended and fsynced."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collector import jsonfile
from collector.aggregate import RunResult
from collector.errors import RecordWriteError, UserError
from collector.failures import FailureRecord
from collector.record.files import write_failure


class Checkpoint:
    """Append-only JSON lines: each finished run and each failure, fsynced as it happens.

    An append is all or nothing: a write the disk cannot take is cut back off, and a torn
    last line left by a crash is cut off when the checkpoint is opened again, so the next
    entry never fuses with it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            _cut_torn_tail(path)
            self._fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise RecordWriteError(
                f"cannot open the checkpoint {write_failure(path, exc)}"
            ) from None

    def append(self, kind: str, payload: dict[str, Any]) -> None:
        if self._fd is None:
            raise RecordWriteError(f"{self.path}: checkpoint already closed")
        data = (json.dumps({"kind": kind, **payload}, separators=(",", ":")) + "\n").encode()
        start = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            os.fsync(self._fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
            raise RecordWriteError(
                f"cannot append to the checkpoint {write_failure(self.path, exc)}; every entry "
                "before this one is kept: free space and rerun with --resume"
            ) from None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @staticmethod
    def read(path: Path) -> Iterator[dict[str, Any]]:
        """Entries in order; a torn last line (a crash mid-write) is skipped, not fatal."""
        if not path.exists():
            return
        with path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    entry = jsonfile.loads(line, str(path))
                except UserError:
                    continue
                if isinstance(entry, dict) and "kind" in entry:
                    yield entry


def _cut_torn_tail(path: Path) -> None:
    """Truncate a checkpoint after its last newline (a crash can leave half a line)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size == 0:
        return
    with path.open("rb+") as fh:
        end = size
        while end > 0:
            start = max(0, end - (1 << 16))
            fh.seek(start)
            chunk = fh.read(end - start)
            if start + len(chunk) == size and chunk.endswith(b"\n"):
                return  # intact
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                fh.truncate(start + cut + 1)
                return
            end = start
        fh.truncate(0)


@dataclass
class CheckpointState:
    runs: dict[str, list[RunResult]] = field(default_factory=dict)
    failures: list[FailureRecord] = field(default_factory=list)
    # Calibration-panel runs (collector/panel.py) and panel kernels that failed.
    panel: list[RunResult] = field(default_factory=list)
    panel_failures: int = 0

    @classmethod
    def load(cls, path: Path) -> CheckpointState:
        state = cls()
        for entry in Checkpoint.read(path):
            if entry["kind"] == "run":
                result = RunResult.from_json(entry)
                state.runs.setdefault(result.case_key, []).append(result)
            elif entry["kind"] == "failure":
                state.failures.append(FailureRecord.from_json(entry))
            elif entry["kind"] == "panel":
                state.panel.append(RunResult.from_json(entry))
            elif entry["kind"] == "panel_failure":
                state.panel_failures += 1
        return state

    @property
    def failed_keys(self) -> set[str]:
        return {f.case_key for f in self.failures}
