"""The torch backend: always available, and the CPU path of every op it implements."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from collector.backends.base import Prepared
from collector.caseplan import Case

_FLOAT_DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}
MAX_COPIES = 6


def rotation_copies(weight_bytes: int, l2_bytes: int) -> int:
    """Weight copies needed so that consecutive calls miss the cache (DESIGN.md section 5)."""
    if l2_bytes <= 0 or weight_bytes <= 0:
        return 1
    return max(1, min(MAX_COPIES, math.ceil(2 * l2_bytes / weight_bytes)))


class TorchBackend:
    name = "torch"
    framework = "torch"

    def framework_version(self) -> str:
        return str(torch.__version__).split("+")[0]

    def supported_ops(self) -> frozenset[str]:
        return frozenset({"gemm"})

    def prepare(self, case: Case, device: str, l2_bytes: int) -> Prepared:
        if case.op == "gemm":
            return _prepare_gemm(case.params, device, l2_bytes)
        raise NotImplementedError(f"torch backend does not implement op {case.op!r}")


def _prepare_gemm(p: dict[str, Any], device: str, l2_bytes: int) -> Prepared:
    m, n, k, dtype = p["m"], p["n"], p["k"], p["gemm_dtype"]
    gen = torch.Generator(device="cpu").manual_seed(0)
    if dtype in _FLOAT_DTYPES:
        tdt = _FLOAT_DTYPES[dtype]
        copies = rotation_copies(n * k * tdt.itemsize, l2_bytes)
        x = torch.randn(m, k, generator=gen).to(device=device, dtype=tdt)
        ws = [torch.randn(n, k, generator=gen).to(device=device, dtype=tdt) for _ in range(copies)]

        def call(i: int) -> torch.Tensor:
            return F.linear(x, ws[i % copies])

        return Prepared(call=call, copies=copies, kernel_source="torch.nn.functional.linear")
    if dtype == "fp8":
        fp8 = torch.float8_e4m3fn
        copies = rotation_copies(n * k, l2_bytes)
        xq = torch.randn(m, k, generator=gen).to(device=device).to(fp8)
        # _scaled_mm wants the second operand column-major: a transposed row-major [n, k].
        wqs = [torch.randn(n, k, generator=gen).to(device=device).to(fp8) for _ in range(copies)]
        one = torch.ones((), device=device, dtype=torch.float32)

        def call_fp8(i: int) -> torch.Tensor:
            return torch._scaled_mm(
                xq, wqs[i % copies].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16
            )

        return Prepared(call=call_fp8, copies=copies, kernel_source="torch._scaled_mm")
    raise NotImplementedError(f"torch backend has no GEMM for dtype {dtype!r}")
