"""What a spare vLLM worker loads while the round before it measures, without a CUDA context.

A fresh worker's first block-FP8 case paid about 1.4 s on the H200 where later ones paid
0.12 s: FlashInfer's GEMM module imported on first use, and its SM90 block-FP8 library
loaded (a ninja up-to-date check over the library's sources, then the library). A spare
(collector/pool.py, `prestart`) does both before its turn. FlashInfer's import asks torch
for each device's compute capability, which would make torch initialise CUDA in the spare;
NVML gives the same answer without, as FLASHINFER_CUDA_ARCH_LIST (the architectures its JIT
targets: the flags are the same either way). Nothing is compiled here: a library not built
yet is left to the case that needs it, so a spare never competes for the CPU with a build.
"""

from __future__ import annotations

import os

from collector.device import nvml_compute_capability

ARCH_ENV = "FLASHINFER_CUDA_ARCH_LIST"
# FlashInfer's SM90 block-FP8 GEMM library, as its `fp8_blockscale_gemm_sm90` loads it.
SM90 = (9, 0)


def warm(device_index: int) -> list[str]:
    """Load what a first block-FP8 case would; returns what was loaded, in order."""
    capability = nvml_compute_capability(device_index)
    if capability is None:
        return []  # without the architecture, FlashInfer's import would ask torch
    os.environ.setdefault(ARCH_ENV, f"{capability[0]}.{capability[1]}")
    import flashinfer.gemm  # noqa: F401  (what the first case imports)

    loaded = ["flashinfer.gemm"]
    if capability == SM90:
        from flashinfer.jit.gemm.fp8_blockscale import gen_fp8_blockscale_gemm_sm90_module

        if gen_fp8_blockscale_gemm_sm90_module().is_compiled:
            from flashinfer.gemm.gemm_base import get_fp8_blockscale_gemm_runner_sm90

            get_fp8_blockscale_gemm_runner_sm90()  # cached: the first case finds it loaded
            loaded.append("fp8_blockscale_gemm_90")
    return loaded
