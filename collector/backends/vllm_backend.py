"""The vllm backend: vLLM's own linear layers and attention backends, as vLLM dispatches them.

Construction only reads package metadata (no vLLM import), so it is cheap and runs on any
machine:
- vLLM installed: its version must equal the pin (`collector/versions.py`), else a
  one-line error before anything is collected;
- vLLM not installed: every case fails with `BackendUnavailable` (an ImportError, so it is
  classified `backend_unavailable`), with the reason and the way to install it.
vLLM itself is imported on the first prepared case (`vllm_runtime`, about 20 s); an import
that fails (a missing dependency of the bundle, say) fails every case the same way.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from collector.backends.base import Prepared
from collector.caseplan import Case
from collector.errors import UserError
from collector.versions import installed_version, require_pin

DISTRIBUTION = "vllm"
OPS = frozenset({"gemm", "context_attention", "generation_attention"})
INSTALL_HINT = (
    "install the pinned wheel bundle (collectbot bundle; README, 'Offline GPU runners') "
    "or pip install vllm==<pin>"
)


class BackendUnavailable(ImportError):
    """The framework cannot be used in this process; classified `backend_unavailable`."""


class VllmBackend:
    name = "vllm"
    framework = "vllm"

    def __init__(self, version_of: Callable[[str], str | None] = installed_version) -> None:
        self._installed = version_of(DISTRIBUTION)
        self._pin: str | None = None
        if self._installed is not None:
            # The gate: raises UserError (one line, nothing collected) on a mismatch.
            self._pin = require_pin(self.framework, self._installed)
        self._runtime: Any = None
        # Why this process cannot run vLLM, once found: (exception type, message).
        self._broken: tuple[type[Exception], str] | None = None

    def framework_version(self) -> str:
        return self._installed or "not installed"

    def supported_ops(self) -> frozenset[str]:
        return OPS

    def _load(self, device: str) -> Any:
        if self._installed is None:
            raise BackendUnavailable(
                f"vLLM not installed: no '{DISTRIBUTION}' distribution is visible to "
                f"{sys.executable}; {INSTALL_HINT}"
            )
        if not device.startswith("cuda"):
            raise NotImplementedError(f"the vllm backend needs a CUDA device, got {device!r}")
        if self._broken is not None:
            kind, message = self._broken
            raise kind(message)
        if self._runtime is None:
            try:
                from collector.backends import vllm_runtime
            except ImportError as exc:
                self._broken = (
                    BackendUnavailable,
                    f"vLLM {self._installed} is installed but does not import: "
                    f"{type(exc).__name__}: {exc}",
                )
                raise BackendUnavailable(self._broken[1]) from exc
            runtime = vllm_runtime.runtime(device)
            if runtime.version != self._installed:
                self._broken = (
                    UserError,
                    f"vllm imports as {runtime.version} but its metadata says "
                    f"{self._installed}: two installs shadow each other on sys.path",
                )
                raise UserError(self._broken[1])
            self._runtime = runtime
        return self._runtime

    def prepare(self, case: Case, device: str, l2_bytes: int) -> Prepared:
        if case.op not in OPS:
            raise NotImplementedError(f"the vllm backend does not implement op {case.op!r}")
        rt = self._load(device)
        if case.op == "gemm":
            from collector.backends.vllm_gemm import prepare_gemm

            return prepare_gemm(rt, case.params, l2_bytes)
        from collector.backends.vllm_attention import prepare_attention

        return prepare_attention(rt, case.op, case.params)
