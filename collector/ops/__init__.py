"""Op definitions: case fields, work counts and dtype families, independent of any backend."""

from __future__ import annotations

from collector.errors import UserError
from collector.ops.attention import CONTEXT_ATTENTION, GENERATION_ATTENTION
from collector.ops.base import OpSpec
from collector.ops.gemm import GEMM

OPS: dict[str, OpSpec] = {
    spec.name: spec for spec in (GEMM, CONTEXT_ATTENTION, GENERATION_ATTENTION)
}


def get_op(name: str) -> OpSpec:
    try:
        return OPS[name]
    except KeyError:
        raise UserError(f"unknown op {name!r}; known ops: {', '.join(sorted(OPS))}") from None


__all__ = ["OPS", "OpSpec", "get_op"]
