"""The history's only coupling to the run store: pick a series of entries and read them.

A series is the runs of one backend, GPU and op set under one ref (branch), oldest first,
across framework versions (an upgrade is a point in the history, not a new history). Every
entry is fetched with its manifest's checksums and read with the record reader, which checks
run.json's: an entry that fails either is skipped with a one-line warning, never used.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.keys import Series
from bot.render.sanitize import clean
from collector.errors import UserError
from collector.record import RunRecord, read_record


@dataclass(frozen=True)
class Selection:
    """Filters on the store's keys; None matches anything."""

    backend: str | None = None
    gpu: str | None = None
    ops: tuple[str, ...] | None = None
    ref: str | None = None
    framework_version: str | None = None

    def matches(self, series: Series, framework_version: str) -> bool:
        ops = None if self.ops is None else tuple(sorted(self.ops))
        wanted = (self.backend, self.gpu, ops, self.ref, self.framework_version)
        found = (series.backend, series.gpu, series.ops, series.ref, framework_version)
        return all(w is None or w == f for w, f in zip(wanted, found, strict=True))


@dataclass(frozen=True)
class StoredRun:
    """One entry as the history sees it: where it sits and when it was stored."""

    name: str
    ref: str | None
    stored_at: str | None
    handle: Any  # the store's entry, handed back to `read`


Warn = Callable[[str], None]


def warn_stderr(message: str) -> None:
    print(f"warning: {clean(message, 500).replace(chr(10), ' ')}", file=sys.stderr)


def list_series(url: str, selection: Selection) -> dict[Series, list[StoredRun]]:
    """Entries of the store grouped into series (each oldest first)."""
    from bot.store import RunStore

    out: dict[Series, list[StoredRun]] = {}
    for entry in RunStore(url).entries():
        key = entry.key
        series = Series(key.backend, key.gpu, tuple(sorted(key.ops)), entry.ref)
        if not selection.matches(series, key.framework_version):
            continue
        stored = entry.manifest.get("stored_at")
        out.setdefault(series, []).append(
            StoredRun(entry.name, entry.ref, str(stored) if stored else None, entry)
        )
    for runs in out.values():
        runs.sort(key=lambda r: r.name)  # names start with the time they were stored
    return out


def one_series(url: str, selection: Selection) -> tuple[Series, list[StoredRun]]:
    """The single series the selection names; a user error when none or several match."""
    found = list_series(url, selection)
    if not found:
        raise UserError(f"{url}: no stored runs match the selection")
    if len(found) > 1:
        labels = "; ".join(sorted(s.label for s in found)[:5])
        raise UserError(
            f"{url}: {len(found)} histories match ({labels}); narrow with --backend, --gpu, "
            "--ops or --ref"
        )
    return next(iter(found.items()))


def read_runs(
    url: str, runs: list[StoredRun], warn: Warn = warn_stderr
) -> Iterator[tuple[StoredRun, RunRecord]]:
    """Each run's record, fetched and verified one at a time; a damaged one is skipped."""
    from bot.store import RunStore

    store = RunStore(url)
    scratch = Path(tempfile.mkdtemp(prefix="collectbot-history-"))
    try:
        for i, run in enumerate(runs):
            dest = scratch / str(i)
            try:
                record = read_record(store.get(run.handle, dest))
            except (UserError, OSError) as exc:
                # A checksum that fails, a file gone or unreadable: never part of the history.
                warn(f"skipped stored run {run.name}: {exc}")
                shutil.rmtree(dest, ignore_errors=True)
                continue
            yield run, record
            shutil.rmtree(dest, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
