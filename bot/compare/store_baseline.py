"""The previous-run baseline: the latest complete stored run with the candidate's key."""

from __future__ import annotations

from pathlib import Path

from bot.compare.comparison import Baseline
from collector.errors import UserError
from collector.record import RunRecord, read_record


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
    from bot.store import RunStore, key_of

    store = RunStore(url)
    entry = store.latest(key_of(cand.meta), ref=ref, exclude_run_id=cand.meta.get("run_id"))
    if entry is None:
        raise UserError(
            f"{url}: no stored run for {key_of(cand.meta).label}"
            + (f" under ref {ref!r}" if ref else "")
        )
    base = read_record(store.get(entry, dest))
    baseline = Baseline(
        kind=kind or "previous-run",
        paired=paired,
        store={"url": store.url, "key": entry.key.label, "entry": entry.name},
    )
    return base, baseline
