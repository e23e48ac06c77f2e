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

import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from collector.backends.base import Prepared
from collector.backends.flashinfer_support import page_size
from collector.caseplan import Case
from collector.errors import UserError
from collector.versions import check_pin, expected_flashinfer_version, installed_version

DISTRIBUTION = "flashinfer-python"
OPS = frozenset({"gemm", "context_attention", "generation_attention"})
INSTALL_HINT = (
    "pip install flashinfer-python==<pin> (offline: pip install --no-index --no-deps from a "
    "wheel folder; README, 'FlashInfer backend')"
)

VersionOf = Callable[[str], "str | None"]


class BackendUnavailable(ImportError):
    """FlashInfer cannot be used in this process; classified `backend_unavailable`."""


def check_installed_version(version_of: VersionOf = installed_version) -> str | None:
    """The version gate; returns the installed version (None: not installed, no gate)."""
    installed = version_of(DISTRIBUTION)
    if installed is None:
        return None
    expected = expected_flashinfer_version()
    if expected is None:
        raise UserError(
            "no pinned FlashInfer version: the manifest pins none and "
            "COLLECTBOT_FRAMEWORK_VERSION is unset (pass --framework-version)"
        )
    check_pin(DISTRIBUTION, installed, expected)
    return installed


def preflight() -> None:
    """The gate and the backend's settings, before anything is collected."""
    check_installed_version()
    try:
        page_size()
    except ValueError as exc:
        raise UserError(str(exc)) from None


def require_cuda(device: str) -> None:
    if not device.startswith("cuda"):
        raise NotImplementedError(f"the flashinfer backend needs a CUDA device, got {device!r}")


def _import_runtime() -> ModuleType:
    from collector.backends import flashinfer_runtime

    return flashinfer_runtime


class FlashinferBackend:
    name = "flashinfer"
    framework = "flashinfer"

    def __init__(
        self,
        version_of: VersionOf = installed_version,
        import_runtime: Callable[[], ModuleType] = _import_runtime,
    ) -> None:
        installed = check_installed_version(version_of)
        if installed is None:
            raise BackendUnavailable(
                f"FlashInfer not installed: no '{DISTRIBUTION}' distribution is visible to "
                f"{sys.executable}; {INSTALL_HINT}"
            )
        self._installed = installed
        try:
            self._module = import_runtime()
        except ImportError as exc:
            raise BackendUnavailable(
                f"FlashInfer {installed} is installed but does not import: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        self._runtime: Any = None

    def framework_version(self) -> str:
        return self._installed

    def supported_ops(self) -> frozenset[str]:
        return OPS

    def _load(self, device: str) -> Any:
        require_cuda(device)
        if self._runtime is None:
            runtime = self._module.runtime(device)
            if runtime.version != self._installed:
                raise UserError(
                    f"flashinfer imports as {runtime.version} but its metadata says "
                    f"{self._installed}: two installs shadow each other on sys.path"
                )
            self._runtime = runtime
        return self._runtime

    def prepare(self, case: Case, device: str, l2_bytes: int) -> Prepared:
        if case.op not in OPS:
            raise NotImplementedError(f"the flashinfer backend does not implement op {case.op!r}")
        rt = self._load(device)
        if case.op == "gemm":
            from collector.backends.flashinfer_gemm import prepare_gemm

            return prepare_gemm(rt, case.params, l2_bytes)
        from collector.backends.flashinfer_attention import prepare_attention

        return prepare_attention(rt, case.op, case.params, l2_bytes)
