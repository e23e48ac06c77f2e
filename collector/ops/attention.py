"""Attention: context (prefill) and generation (decode), with bf16 or fp8 KV caches.

Fields follow the field's perf tables: `isl` is the prompt length of a context case (1 for
generation); `step` is the number of tokens already in the KV cache of a generation case;
`window_size` 0 means no sliding window. All attention is causal.
"""

from __future__ import annotations

from collections.abc import Callable

from collector.attn_backends import ATTN_BACKENDS, AUTO, FIELD
from collector.ops.base import OpSpec, OptionalField, Params

KV_BYTES = {"fp8": 1, "bfloat16": 2, "float16": 2, "float32": 4}
ACT_BYTES = 2

FIELDS = (
    ("batch_size", int),
    ("isl", int),
    ("num_heads", int),
    ("num_key_value_heads", int),
    ("head_dim", int),
    ("beam_width", int),
    ("attn_dtype", str),
    ("kv_cache_dtype", str),
    ("step", int),
    ("window_size", int),
)
# The backend vLLM dispatches the case through (collector/attn_backends.py); `auto` is left
# out of the key.
OPTIONAL = (OptionalField(FIELD, str, AUTO, ATTN_BACKENDS),)


def causal_pairs(queries: int, past: int, window: int) -> int:
    """(query, key) pairs a causal, optionally windowed, attention computes.

    Query i (0-based) of `queries` new tokens sees `past + i + 1` keys, capped by the window.
    """
    total = 0
    if window <= 0:
        return queries * past + queries * (queries + 1) // 2
    for i in range(queries):
        total += min(past + i + 1, window)
    return total


def kv_len(p: Params) -> int:
    length = int(p["step"]) + int(p["isl"])
    return min(length, int(p["window_size"])) if int(p["window_size"]) > 0 else length


def _context_flops(p: Params) -> float:
    pairs = causal_pairs(int(p["isl"]), int(p["step"]), int(p["window_size"]))
    return 4.0 * float(p["batch_size"] * p["num_heads"] * p["head_dim"]) * pairs


def _context_bytes(p: Params) -> float:
    b, s, d = p["batch_size"], p["isl"], p["head_dim"]
    kv = KV_BYTES.get(str(p["kv_cache_dtype"]), 2)
    q_and_o = 2 * b * s * p["num_heads"] * d * ACT_BYTES
    k_and_v = 2 * b * kv_len(p) * p["num_key_value_heads"] * d * kv
    return float(q_and_o + k_and_v)


def _generation_flops(p: Params) -> float:
    queries = p["batch_size"] * p["beam_width"]
    return 4.0 * float(queries * p["num_heads"] * p["head_dim"]) * kv_len(p)


def _generation_bytes(p: Params) -> float:
    queries = p["batch_size"] * p["beam_width"]
    kv = KV_BYTES.get(str(p["kv_cache_dtype"]), 2)
    q_and_o = 2 * queries * p["num_heads"] * p["head_dim"] * ACT_BYTES
    k_and_v = 2 * p["batch_size"] * kv_len(p) * p["num_key_value_heads"] * p["head_dim"] * kv
    return float(q_and_o + k_and_v)


def _attention(
    name: str, flops: Callable[[Params], float], moved: Callable[[Params], float]
) -> OpSpec:
    """The two attention ops share their case fields; each has its own cost model."""
    return OpSpec(
        name=name,
        fields=FIELDS,
        dtype_field="kv_cache_dtype",
        flops=flops,
        bytes_moved=moved,
        zero_ok=frozenset({"step", "window_size"}),
        compute_dtype_field="attn_dtype",
        optional=OPTIONAL,
    )


CONTEXT_ATTENTION = _attention("context_attention", _context_flops, _context_bytes)
GENERATION_ATTENTION = _attention("generation_attention", _generation_flops, _generation_bytes)
