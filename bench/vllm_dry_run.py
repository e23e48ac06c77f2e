"""A CPU dry run of the vllm backend against a pretend H200: everything up to the kernels.

Checks, without a GPU, that vLLM builds what the backend asks for: engine configs, the
distributed world, RowParallelLinear under each quant config loaded through the loader's
flow (and the kernel class vLLM selects for an SM 9.0 device), the Attention layer and its
backend, KV cache spec and layout, the metadata builder, and the arguments of the
attention kernel call. The CUDA kernels themselves are replaced by stand-ins that check
their arguments (shapes, slot ranges); their results are not real. Use it after a vLLM
bump, before spending GPU time.

Needs a CPU venv that mirrors the GPU image (Python 3.12, the image's torch, vLLM from the
bundle); no GPU, no CUDA driver:
    python3.12 -m venv /tmp/mirror && /tmp/mirror/bin/pip install torch==2.11.0 transformers
    bash bench/gpu/install_bundle.sh STAGE /tmp/vsite   # with PYTHON=/tmp/mirror/bin/python
    PYTHONPATH=/tmp/vsite:. /tmp/mirror/bin/python -m bench.vllm_dry_run
"""

from __future__ import annotations

import collections
import contextlib
import sys
import tempfile
import traceback
import types
from pathlib import Path
from typing import Any

import torch


def _pretend_h200() -> None:
    """Stand-ins for what needs a driver: extension modules, a few ops, the platform."""
    for name in ("vllm._C_stable_libtorch", "vllm._moe_C_stable_libtorch", "vllm._C"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["vllm.vllm_flash_attn._vllm_fa3_C"] = types.ModuleType("_vllm_fa3_C")
    lib = torch.library.Library("_C", "DEF")
    for op in (
        "cutlass_scaled_mm_supports_fp8",
        "cutlass_scaled_mm_supports_block_fp8",
        "cutlass_scaled_mm_supports_fp4",
        "cutlass_group_gemm_supported",
        "cutlass_scaled_mm_supports_int8",
    ):
        lib.define(f"{op}(int cap) -> bool")
        lib.impl(op, lambda cap: True, "CompositeExplicitAutograd")
    _pretend_h200.lib = lib  # type: ignore[attr-defined]  # keep the registrations alive

    import vllm.platforms as platforms
    from vllm.platforms.cuda import NonNvmlCudaPlatform
    from vllm.platforms.interface import DeviceCapability

    class PretendH200(NonNvmlCudaPlatform):
        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> DeviceCapability:
            return DeviceCapability(9, 0)

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return "NVIDIA H200 (pretend)"

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return 141 << 30

    platforms._current_platform = PretendH200()
    torch.cuda.set_device = lambda index: None  # type: ignore[assignment]

    import vllm._custom_ops as ops
    import vllm.model_executor.kernels.linear.scaled_mm.deep_gemm as deep_gemm
    import vllm.v1.attention.backends.flash_attn as flash_attn

    def quant(x: Any, scale: Any = None, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        if scale is None:
            scale = (x.abs().max().float() / 448).reshape(1)
        return (x.float() / scale).clamp(-448, 448).to(torch.float8_e4m3fn), scale

    def cache_write(key: Any, value: Any, key_cache: Any, value_cache: Any, slots: Any,
                    *args: Any) -> None:  # fmt: skip
        blocks, block = key_cache.shape[0], key_cache.shape[1]
        assert key.shape[0] == slots.shape[0] and key.shape[1:] == key_cache.shape[2:]
        assert slots.dtype == torch.int64 and block <= int(slots.min())
        assert int(slots.max()) < blocks * block, "slot beyond the cache"

    def attention(**kw: Any) -> None:
        q, k = kw["q"], kw["k"]
        assert q.shape[0] == int(kw["cu_seqlens_q"][-1]), "queries != cu_seqlens_q total"
        assert kw["block_table"].max() < k.shape[0], "block table points past the cache"
        print(
            f"      kernel call: q {tuple(q.shape)} {q.dtype}, cache {tuple(k.shape)} "
            f"{k.dtype}, window {kw['window_size']}, splits {kw['num_splits']}, "
            f"FA{kw['fa_version']}"
        )

    ops.scaled_fp8_quant = quant
    deep_gemm.deepgemm_post_process_fp8_weight_block = lambda wq, ws, *a, **k: (wq, ws)
    flash_attn.reshape_and_cache_flash = cache_write
    flash_attn.get_scheduler_metadata = lambda **kw: torch.zeros(8, dtype=torch.int32)
    flash_attn.flash_attn_varlen_func = attention


def cpu_runtime(label: str) -> Any:
    """The backend's VllmRuntime on the CPU (after `_pretend_h200`): gloo for the
    distributed world, the probe architecture registered, the base engine config current."""
    from vllm.config import set_current_vllm_config

    import collector.backends.vllm_runtime as R
    from collector.backends.vllm_support import model_hf_config

    module: Any = R
    init = module.init_distributed_environment
    module.init_distributed_environment = lambda **kw: init(**{**kw, "backend": "gloo"})
    rt = R.VllmRuntime.__new__(R.VllmRuntime)
    rt.device, rt.index, rt.version = torch.device("cpu"), 0, label
    rt._stack, rt._attention = contextlib.ExitStack(), collections.OrderedDict()
    rt._tmp = Path(tempfile.mkdtemp(prefix=f"collectbot-{label}-"))
    rt._register_probe_architecture()
    rt.base_config = rt._engine_config(
        model_hf_config(32, 8, 128, R.MAX_MODEL_LEN), cache_dtype="auto", enforce_eager=True
    )
    rt._stack.enter_context(set_current_vllm_config(rt.base_config))
    rt._init_distributed()
    return rt


def main() -> int:
    _pretend_h200()
    from collector.backends import vllm_attention, vllm_gemm
    from collector.caseplan import build_plan

    rt = cpu_runtime("dry-run")
    failures = 0
    plan = build_plan(("gemm", "context_attention", "generation_attention"), case_set="vllm-smoke")
    for case in plan.cases:
        try:
            if case.op == "gemm":
                # An H200's 60 MB L2: small weights rotate over several layer copies.
                prepared = vllm_gemm.prepare_gemm(rt, case.params, 60 << 20)
                print(f"ok  {case.key}: {prepared.kernel_source} ({prepared.copies} copies)")
            else:
                prepared = vllm_attention.prepare_attention(rt, case.op, case.params)
                print(f"ok  {case.key}: {prepared.kernel_source}")
                prepared.call(0)
        except Exception:
            failures += 1
            print(f"FAIL {case.key}\n{traceback.format_exc(limit=-4)}")
    print(f"{len(plan.cases) - failures} ok, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
