"""`rotation_copies`: the weight copies that make consecutive calls miss the L2 cache.

The rule is max(1, min(6, ceil(2 * L2 / weight bytes))): enough copies that the set being
rotated through is at least twice the L2, at most six. The seed campaign's block-FP8 shapes
(one byte per weight) on a 60 MiB L2 give 6, 2 and 1.
"""

from __future__ import annotations

import math

import pytest

from collector.backends.torch_backend import MAX_COPIES, rotation_copies

MIB = 1 << 20
L2 = 60 * MIB


@pytest.mark.parametrize(
    ("n", "k", "copies"),
    [(6144, 2560, 6), (8448, 8192, 2), (16384, 8192, 1)],
)
def test_the_seed_campaigns_block_fp8_shapes(n: int, k: int, copies: int) -> None:
    assert rotation_copies(n * k, L2) == copies  # FP8: one byte per weight


@pytest.mark.parametrize(
    ("weight", "copies"),
    [
        (2 * L2, 1),  # the weight alone is twice the L2: no copy needed
        (2 * L2 + 1, 1),
        (2 * L2 - 1, 2),  # just under: a second copy
        (L2, 2),
        (L2 - 1, 3),
        (2 * L2 // 5, 5),  # exactly 2 L2 / 5
        (2 * L2 // 5 - 1, 6),
        (2 * L2 // 6, 6),  # exactly at the cap
        (2 * L2 // 7, 6),  # would need 7: capped
        (1, 6),
    ],
)
def test_the_boundaries(weight: int, copies: int) -> None:
    assert rotation_copies(weight, L2) == copies
    assert copies == max(1, min(MAX_COPIES, math.ceil(2 * L2 / weight)))


@pytest.mark.parametrize(("weight", "l2"), [(0, L2), (-5, L2), (MIB, 0), (MIB, -1)])
def test_degenerate_sizes_give_one_copy(weight: int, l2: int) -> None:
    assert rotation_copies(weight, l2) == 1


def test_the_cap_is_six() -> None:
    assert MAX_COPIES == 6
