"""The trigger-label grammar.

    collect/<backend>[:<scope>[+<scope>...]][@<case-set>][~<baseline>]

- `<backend>`: a collector backend (`collect/vllm`, `collect/torch`).
- `<scope>`: an op (`gemm`, `context_attention`) or an op family: a word that names every op
  ending in `_<word>` (`attention` = `context_attention` + `generation_attention`). Without a
  scope, every op the backend collects by default.
- `<case-set>`: a named case set (`smoke`, `default`); without one, `default`.
- `<baseline>`: what the run is compared with: `paired` (the default: a paired A/B campaign
  of the PR against its merge base on one GPU, same-GPU by construction; about twice a
  single collection's device time, docs/fleet.md) or `store` (the latest stored run of the
  base branch: a same-GPU entry when the store has one, else compared across GPUs through
  the calibration panels, which the headline says).

Examples: `collect/vllm`, `collect/vllm:gemm`, `collect/vllm:gemm+attention@smoke`,
`collect/vllm:gemm~store`.
Label names are matched case-insensitively, as GitHub does. A label that starts with
`collect/` but breaks the grammar is reported, never silently ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from collector.errors import UserError

PREFIX = "collect/"
BASELINES = ("store", "paired")
_WORD = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


class LabelError(UserError):
    """A `collect/...` label that breaks the grammar."""


@dataclass(frozen=True)
class TriggerLabel:
    name: str
    backend: str
    ops: tuple[str, ...]  # empty: the backend's default scope
    case_set: str
    baseline: str = "paired"

    @property
    def scope_text(self) -> str:
        return "+".join(self.ops) if self.ops else "default scope"


def is_trigger_name(name: str) -> bool:
    return name.strip().lower().startswith(PREFIX)


def _expand_scope(word: str, known_ops: Iterable[str], label: str) -> list[str]:
    ops = sorted(known_ops)
    if word in ops:
        return [word]
    family = [op for op in ops if op.endswith(f"_{word}")]
    if family:
        return family
    raise LabelError(
        f"label {label!r}: unknown op or op family {word!r}; known ops: {', '.join(ops)}"
    )


def parse_label(name: str, *, backends: Iterable[str], ops: Iterable[str]) -> TriggerLabel | None:
    """The trigger a label names; None for labels outside the grammar's `collect/` prefix."""
    if not is_trigger_name(name):
        return None
    label = name.strip()
    rest = label[len(PREFIX) :].lower()
    baseline = "paired"
    if "~" in rest:
        rest, baseline = rest.split("~", 1)
        if baseline not in BASELINES:
            raise LabelError(
                f"label {label!r}: unknown baseline {baseline!r} after '~'; "
                f"use one of {', '.join(BASELINES)}"
            )
    case_set = "default"
    if "@" in rest:
        rest, case_set = rest.split("@", 1)
        if not _WORD.match(case_set):
            raise LabelError(f"label {label!r}: bad case set {case_set!r} after '@'")
    backend, _, scope = rest.partition(":")
    known_backends = sorted(backends)
    if not backend:
        raise LabelError(f"label {label!r}: no backend after {PREFIX!r}")
    if backend not in known_backends:
        raise LabelError(
            f"label {label!r}: unknown backend {backend!r}; "
            f"known backends: {', '.join(known_backends)}"
        )
    selected: list[str] = []
    if scope or label.endswith(":"):
        words = [w for w in re.split(r"[+,]", scope)]
        if not all(words):
            raise LabelError(f"label {label!r}: empty op in the scope after ':'")
        known_ops = list(ops)
        for word in words:
            for op in _expand_scope(word, known_ops, label):
                if op not in selected:
                    selected.append(op)
    return TriggerLabel(
        name=label, backend=backend, ops=tuple(selected), case_set=case_set, baseline=baseline
    )


def default_vocabulary() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Backends and ops this installation knows (no torch import)."""
    from collector.backends import BACKEND_NAMES
    from collector.ops import OPS

    return tuple(BACKEND_NAMES), tuple(sorted(OPS))
