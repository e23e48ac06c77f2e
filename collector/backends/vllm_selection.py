"""Which attention kernel vLLM 0.24.0 selects for a case on SM90, and what that needs installed.

Pure (no vLLM import), read from vLLM 0.24.0's source, so the offline bundle can be checked
on a CPU against the shipped case sets (tests/test_vllm_selection.py):

- `auto` takes the first valid backend of `_get_backend_priorities` (platforms/cuda.py):
  FLASH_ATTN, then FLASHINFER, TRITON_ATTN, FLEX_ATTENTION. FLASH_ATTN accepts head sizes
  that are multiples of 8 up to 256, and up to 512 when FA4 is present
  (`FlashAttentionBackend.supports_head_size`); FA4 counts as present when its source file
  is, so `auto` keeps FLASH_ATTN for head_dim 512 even where cutlass is missing.
- FLASH_ATTN resolves FA3 on SM90 and upgrades to FA4 for head_size > 256
  (v1/attention/backends/fa_utils.py, `get_flash_attn_version`).
- FA4 is CuTe-DSL code (vllm_flash_attn/cute/interface.py imports `cutlass`, `quack` and
  `cuda.bindings`).
- FLEX_ATTENTION takes no fp8 KV cache (`supported_kv_cache_dtypes`: auto, float16,
  bfloat16): vLLM refuses the case, a classified failure rather than a package to carry.

`bench/vllm_selection_check.py` builds every shipped case's layer through vLLM's selector on
a pretend H200 and compares with these rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from collector.attn_backends import AUTO, FIELD

# The kernel family a case runs -> the distributions that family imports beyond vLLM's own
# import closure (declared once; the bundle check reads it).
KERNEL_PACKAGES: dict[str, tuple[str, ...]] = {
    "fa3": (),
    "fa4": (
        "nvidia-cutlass-dsl",
        "nvidia-cutlass-dsl-libs-base",
        "nvidia-cutlass-dsl-libs-cu13",
        "quack-kernels",
        "cuda-python",
        "cuda-bindings",
        "torch-c-dlpack-ext",
    ),
    "flashinfer": ("flashinfer-python", "apache-tvm-ffi"),
    "triton_attn": ("triton",),
    "flex_attention": (),
}
FA3_MAX_HEAD = 256
FA4_MAX_HEAD = 512


def sm90_kernel(params: Mapping[str, Any]) -> str:
    """The kernel family (a KERNEL_PACKAGES key) vLLM runs an attention case with on SM90."""
    backend = str(params.get(FIELD, AUTO))
    head = int(params["head_dim"])
    if backend in (AUTO, "FLASH_ATTN"):
        if head % 8 == 0 and head <= FA4_MAX_HEAD:
            return "fa3" if head <= FA3_MAX_HEAD else "fa4"
        if backend == "FLASH_ATTN":
            raise ValueError(f"FLASH_ATTN does not support head_dim {head}")
        backend = "FLASHINFER"  # the next in vLLM's priority order
    if backend == "FLEX_ATTENTION" and str(params["kv_cache_dtype"]) == "fp8":
        raise ValueError("FLEX_ATTENTION does not support an fp8 KV cache")
    return {
        "FLASHINFER": "flashinfer",
        "TRITON_ATTN": "triton_attn",
        "FLEX_ATTENTION": "flex_attention",
    }[backend]


def sm90_packages(params: Mapping[str, Any]) -> tuple[str, ...]:
    """What an attention case needs installed on SM90 beyond vLLM's import closure."""
    return KERNEL_PACKAGES[sm90_kernel(params)]
