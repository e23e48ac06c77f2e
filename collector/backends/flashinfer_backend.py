"""The flashinfer backend: FlashInfer's own GEMM and paged-attention APIs, as it dispatches them.

Ops and the FlashInfer entry points (0.6.12):
- gemm bfloat16: `flashinfer.mm_bf16(backend="auto")`; fp8 (per-tensor scales):
  `flashinfer.bmm_fp8(backend="auto")`; fp8_block (1x128 / 128x128 scales):
  `flashinfer.gemm.fp8_blockscale_gemm_sm90` on SM 9.0, `gemm_fp8_nt_groupwise` on SM 10.x
  and 12.x, none elsewhere (an `unsupported` failure naming the capability);
- context_attention: `BatchPrefillWithPagedKVCacheWrapper(backend="auto")`;
- generation_attention: `BatchDecodeWithPagedKVCacheWrapper`;
both over a paged NHD KV cache in bf16, fp16 or fp8 (e4m3).

Two checks, in order (as the vllm backend):
- `check_installed_version` (run by `collectbot collect` before a run directory or a worker
  exists; reads package metadata only): an installed flashinfer-python must equal the pin
  (`collector/versions.py`, `expected_flashinfer_version`), else a one-line error;
- building the backend (in each worker): FlashInfer must be installed and import;
  otherwise `BackendUnavailable`, an ImportError, which the engine records as
  `backend_unavailable` for every planned case, and the run is marked failed.
Cases on a device that is not CUDA fail as `unsupported`. FlashInfer compiles its kernels
with the machine's nvcc on first use (JIT, cached under ~/.cache/flashinfer); that time is
spent in `prepare`, never in a timed call.
"""

from __future__ import annotations

from collector.backends.flashinfer_support import page_size
from collector.backends.framework_backend import BackendUnavailable, FrameworkBackend
from collector.errors import UserError


class FlashinferBackend(FrameworkBackend):
    name = "flashinfer"
    framework = "flashinfer"
    label = "FlashInfer"
    distribution = "flashinfer-python"
    install_hint = (
        "pip install flashinfer-python==<pin> (offline: pip install --no-index --no-deps from a "
        "wheel folder; docs/backends.md, 'The FlashInfer backend')"
    )


check_installed_version = FlashinferBackend.check_installed_version
require_cuda = FlashinferBackend.require_cuda


def preflight() -> None:
    """The gate and the backend's settings, before anything is collected."""
    check_installed_version()
    try:
        page_size()
    except ValueError as exc:
        raise UserError(str(exc)) from None


__all__ = [
    "BackendUnavailable",
    "FlashinferBackend",
    "check_installed_version",
    "preflight",
    "require_cuda",
]
