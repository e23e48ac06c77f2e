"""GEMM: out[m, n] = x[m, k] @ w[n, k]^T, as a linear layer computes it."""

from __future__ import annotations

from collector.ops.base import OpSpec, Params

# Bytes per element of each GEMM input dtype; outputs of low-precision GEMMs are bf16.
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8": 1, "fp8_block": 1}


def _flops(p: Params) -> float:
    return 2.0 * float(p["m"]) * float(p["n"]) * float(p["k"])


def _bytes(p: Params) -> float:
    in_bytes = DTYPE_BYTES.get(str(p["gemm_dtype"]), 2)
    out_bytes = 4 if p["gemm_dtype"] == "float32" else 2
    return float(in_bytes * (p["m"] * p["k"] + p["n"] * p["k"]) + out_bytes * p["m"] * p["n"])


GEMM = OpSpec(
    name="gemm",
    fields=(("gemm_dtype", str), ("m", int), ("n", int), ("k", int)),
    dtype_field="gemm_dtype",
    flops=_flops,
    bytes_moved=_bytes,
)
