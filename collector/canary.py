"""The canary: a built-in, recorded way to make a known change, proving the bot detects it.

A canary slows the cases its selector matches by a known factor (extra time after each call,
sized from the case's own pilot latency) and can inject faults into chosen cases: an ordinary
exception (`fail`), a CUDA-fatal-looking error (`cuda_fatal`), a hang (`hang`) or a worker
segfault (`crash`). It is written into run.json, and every comment built from such a run says
so. The fault kinds exist to prove, with real processes, that the collector records each
failure once, names it, and carries on.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from typing import Any

from collector.caseplan import Case, CaseSelector
from collector.timing import Slowdown

FAULT_KINDS = ("fail", "cuda_fatal", "hang", "crash")


class CanaryFailure(RuntimeError):
    """The failure a canary injects."""


@dataclass(frozen=True)
class Canary:
    slow: CaseSelector | None = None
    factor: float = 1.0
    fail: CaseSelector | None = None
    cuda_fatal: CaseSelector | None = None
    hang: CaseSelector | None = None
    crash: CaseSelector | None = None

    def slowdown_for(self, case: Case) -> Slowdown | None:
        if self.slow is not None and self.factor != 1.0 and self.slow.matches(case):
            return Slowdown(self.factor)
        return None

    def inject(self, case: Case) -> None:
        """Raise, hang or crash as the selectors say; called where the case is measured."""
        if self.fail is not None and self.fail.matches(case):
            raise CanaryFailure(f"canary: injected failure in {case.key}")
        if self.cuda_fatal is not None and self.cuda_fatal.matches(case):
            raise CanaryFailure(
                "CUDA error: an illegal memory access was encountered (canary-injected)"
            )
        if self.hang is not None and self.hang.matches(case):
            while True:  # a hung kernel, as the watchdog sees it
                time.sleep(3600)
        if self.crash is not None and self.crash.matches(case):
            os.kill(os.getpid(), signal.SIGSEGV)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "slow": self.slow.text if self.slow else None,
            "factor": self.factor,
        }
        for kind in FAULT_KINDS:
            selector = getattr(self, kind)
            out[kind] = selector.text if selector else None
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Canary | None:
        if not data:
            return None

        def sel(key: str) -> CaseSelector | None:
            text = data.get(key)
            return CaseSelector.parse(text) if text else None

        return cls(
            slow=sel("slow"),
            factor=float(data.get("factor", 1.0)),
            **{kind: sel(kind) for kind in FAULT_KINDS},
        )
