"""Which device measures each case: fixed for the whole collection (docs/fleet.md).

Two GPUs of one model time the same kernels up to 2-3% apart, so a case whose runs were
spread over several GPUs would mix their offsets into its spread. Every case is pinned to
one device slot: cases are ranked by a stable hash of their key (the shard assignment's
hash) and dealt out in turn, so the slots get equal counts (+-1) and the same plan always
gets the same assignment, on any machine and after `--resume`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from collector.caseplan import shard_of

# The hash space shard_of draws from; a case's rank is its hash in it.
_HASH_SPACE = 1 << 48


def device_slots(keys: Sequence[str], slots: int) -> dict[str, int]:
    """Slot (0-based) of every case key: balanced, deterministic, independent of order."""
    if slots < 1:
        raise ValueError("at least one device slot is needed")
    ranked = sorted(set(keys), key=lambda k: (shard_of(k, _HASH_SPACE), k))
    return {key: i % slots for i, key in enumerate(ranked)}


def sticky_slots(
    keys: Sequence[str],
    slot_uuids: Sequence[str],
    measured_on: Mapping[str, str],
) -> dict[str, int]:
    """`device_slots`, except that a case already measured (a resumed collection) stays on
    the device whose UUID took its earlier runs, when that device is still here."""
    out = device_slots(keys, len(slot_uuids))
    where = {uuid: i for i, uuid in enumerate(slot_uuids) if uuid}
    for key, uuid in measured_on.items():
        if key in out and uuid in where:
            out[key] = where[uuid]
    return out
