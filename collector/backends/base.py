"""The backend contract."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from collector.caseplan import Case


@dataclass
class Prepared:
    """A case ready to time: `call(i)` runs the op once on rotation copy `i % copies`."""

    call: Callable[[int], Any]
    copies: int
    kernel_source: str
    # False when the op cannot be captured in a CUDA graph; the row then says `eager`.
    graphable: bool = True
    # Another buffer set from this one, cheaper than `prepare`: the op's tensors moved to
    # fresh memory (collector/backends/relocate.py). Only once this set's graph is captured:
    # `call` then reads the new tensors.
    relocate: Callable[[], Prepared] | None = None
    # What an earlier set's captured graph still reads: kept alive with this set.
    holds: list[Any] = field(default_factory=list)


class Backend(Protocol):
    name: str
    framework: str

    def framework_version(self) -> str: ...

    def supported_ops(self) -> frozenset[str]: ...

    def prepare(self, case: Case, device: str, l2_bytes: int) -> Prepared: ...
