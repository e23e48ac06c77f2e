"""The canary: a built-in, recorded way to make a known change, proving the bot detects it.

A canary slows the cases its selector matches by a known factor (extra time after each call,
sized from the case's own pilot latency) and makes the cases of another selector raise. It is
written into run.json, and every comment built from such a run says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from collector.caseplan import Case, CaseSelector
from collector.timing import Slowdown


class CanaryFailure(RuntimeError):
    """The failure a canary injects."""


@dataclass(frozen=True)
class Canary:
    slow: CaseSelector | None = None
    factor: float = 1.0
    fail: CaseSelector | None = None

    def slowdown_for(self, case: Case) -> Slowdown | None:
        if self.slow is not None and self.factor != 1.0 and self.slow.matches(case):
            return Slowdown(self.factor)
        return None

    def check_fail(self, case: Case) -> None:
        if self.fail is not None and self.fail.matches(case):
            raise CanaryFailure(f"canary: injected failure in {case.key}")

    def to_json(self) -> dict[str, Any]:
        return {
            "slow": self.slow.text if self.slow else None,
            "factor": self.factor,
            "fail": self.fail.text if self.fail else None,
        }
