"""The previous-run baseline: a stored complete run with the candidate's key, preferably
measured on the same GPUs (docs/fleet.md).

The store key holds the GPU model; each entry's manifest lists the GPU UUIDs that measured
it. The newest entry whose GPUs cover every GPU the candidate used is taken (every case is
then compared on one physical GPU); without one, the newest of the same model, and the
comparison corrects for the GPU offset through the calibration panels (or says it could
not).

With `history_runs`, the last N complete entries of the key and ref up to the baseline
(the baseline last) are read too, checksums verified, for each case's range over them
(bot/compare/history_verdict.py); an entry that fails its checksum is left out and named.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from bot.compare.comparison import Baseline
from collector.errors import UserError
from collector.record import RunRecord, read_record

if TYPE_CHECKING:
    from bot.compare.history_verdict import BaselineHistory
    from bot.store import Entry, RunStore

SAME_GPU, SAME_MODEL = "same-gpu", "same-model"


def choose_baseline(
    entries: list[Entry], gpus: set[str], exclude_run_id: str | None = None
) -> tuple[Entry | None, str]:
    """From one key's entries (oldest first): the newest complete one measured on all of
    `gpus`, else the newest complete one; and which of the two it is."""
    usable = [
        e
        for e in entries
        if e.status == "complete" and (exclude_run_id is None or e.run_id != exclude_run_id)
    ]
    if not usable:
        return None, ""
    if gpus:
        same = [e for e in usable if gpus <= set(e.gpu_uuids)]
        if same:
            return same[-1], SAME_GPU
    return usable[-1], SAME_MODEL


def history_window(
    entries: list[Entry], baseline: Entry, runs: int, exclude_run_id: str | None = None
) -> list[Entry]:
    """The last `runs` complete entries up to and including `baseline`, oldest first."""
    if runs <= 0:
        return []
    upto = entries[: entries.index(baseline) + 1] if baseline in entries else [baseline]
    usable = [
        e
        for e in upto
        if e.status == "complete" and (exclude_run_id is None or e.run_id != exclude_run_id)
    ]
    return usable[-runs:]


def record_latencies(record: RunRecord) -> dict[str, float]:
    """Each case's latency in a record (the comparison's estimate of it), by case key."""
    out: dict[str, float] = {}
    for table in record.perf.values():
        keys = table.column("case_key").to_pylist()
        values = table.column("latency").to_pylist()
        out.update({str(k): float(v) for k, v in zip(keys, values, strict=True) if v is not None})
    return out


def read_history(
    store: RunStore,
    window: list[Entry],
    baseline: tuple[Entry, RunRecord],
    dest: Path,
) -> BaselineHistory:
    """Every case's latency in each entry of the window (the baseline's record reused)."""
    from bot.compare.history_verdict import BaselineHistory, WindowRun
    from bot.keys import Series, series_dir

    runs, columns, skipped = [], [], []
    for i, entry in enumerate(window):
        if entry is baseline[0]:
            record = baseline[1]
        else:
            try:
                record = read_record(store.get(entry, dest / str(i)))
            except (UserError, OSError) as exc:
                # A checksum that fails, a file gone: never part of the history.
                skipped.append(f"skipped stored run {entry.name}: {exc}"[:500])
                continue
            finally:
                shutil.rmtree(dest / str(i), ignore_errors=True)
        runs.append(
            WindowRun(
                entry.name,
                entry.run_id,
                str(record.meta["git_sha"]) if record.meta.get("git_sha") else None,
                str(entry.manifest["stored_at"]) if entry.manifest.get("stored_at") else None,
            )
        )
        columns.append(record_latencies(record))
    keys = set().union(*columns) if columns else set()
    points: dict[str, list[float | None]] = {k: [c.get(k) for c in columns] for k in keys}
    key = baseline[0].key
    series = Series(key.backend, key.gpu, tuple(sorted(key.ops)), baseline[0].ref)
    return BaselineHistory(runs, points, series_dir(series), skipped)


def baseline_from_store(
    cand: RunRecord,
    url: str,
    dest: Path,
    *,
    ref: str | None = None,
    kind: str | None = None,
    paired: bool = False,
    history_runs: int = 0,
) -> tuple[RunRecord, Baseline]:
    """Fetch (into `dest`, checksums verified) the run to compare `cand` with, and with
    `history_runs` the latencies of the last that many baselines (the history)."""
    from bot.store import RunStore, key_of, record_gpu_uuids

    store = RunStore(url)
    key = key_of(cand.meta)
    gpus = set(record_gpu_uuids(cand))
    entries = store.entries(key, ref)
    entry, selection = choose_baseline(entries, gpus, exclude_run_id=cand.meta.get("run_id"))
    if entry is None:
        raise UserError(
            f"{url}: no stored run for {key.label}" + (f" under ref {ref!r}" if ref else "")
        )
    base = read_record(store.get(entry, dest))
    baseline = Baseline(
        kind=kind or "previous-run",
        paired=paired,
        store={
            "url": store.url,
            "key": entry.key.label,
            "entry": entry.name,
            # The branch (or other label) the baseline was stored under, for the comment.
            "ref": entry.ref,
            "selection": selection,
            "gpu_uuids": entry.gpu_uuids,
        },
    )
    window = history_window(entries, entry, history_runs, cand.meta.get("run_id"))
    if window:
        scratch = dest.parent / f"{dest.name}-history"
        baseline.history = read_history(store, window, (entry, base), scratch)
    return base, baseline
