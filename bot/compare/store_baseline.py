"""The previous-run baseline: a stored complete run with the candidate's key, preferably
measured on the same GPUs (docs/fleet.md).

The store key holds the GPU model; each entry's manifest lists the GPU UUIDs that measured
it. The newest entry whose GPUs cover every GPU the candidate used is taken (every case is
then compared on one physical GPU); without one, the newest of the same model, and the
comparison corrects for the GPU offset through the calibration panels (or says it could
not).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bot.compare.comparison import Baseline
from collector.errors import UserError
from collector.record import RunRecord, read_record

if TYPE_CHECKING:
    from bot.store import Entry

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


def baseline_from_store(
    cand: RunRecord,
    url: str,
    dest: Path,
    *,
    ref: str | None = None,
    kind: str | None = None,
    paired: bool = False,
) -> tuple[RunRecord, Baseline]:
    """Fetch (into `dest`, checksums verified) the run to compare `cand` with."""
    from bot.store import RunStore, key_of, record_gpu_uuids

    store = RunStore(url)
    key = key_of(cand.meta)
    gpus = set(record_gpu_uuids(cand))
    entry, selection = choose_baseline(
        store.entries(key, ref), gpus, exclude_run_id=cand.meta.get("run_id")
    )
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
    return base, baseline
