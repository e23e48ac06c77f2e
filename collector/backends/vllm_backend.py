"""The vllm backend: vLLM's own linear layers and attention backends, as vLLM dispatches them.

Two checks, in order:
- `check_installed_version` (run by `collectbot collect` before a run directory or a worker
  exists; reads package metadata only): an installed vLLM must equal the pin
  (`collector/versions.py`), else a one-line error and nothing is collected;
- building the backend (in each worker): vLLM must be installed and import (about 20 s);
  otherwise `BackendUnavailable`, an ImportError, which the engine records as
  `backend_unavailable` for every planned case, and the run is marked failed.
The CUDA side (distributed world of one, configs) is set up on the first prepared case,
when the device is known (`vllm_runtime`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType
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

VersionOf = Callable[[str], "str | None"]


class BackendUnavailable(ImportError):
    """The framework cannot be used in this process; classified `backend_unavailable`."""


def check_installed_version(version_of: VersionOf = installed_version) -> str | None:
    """The version gate; returns the installed version (None: not installed, no gate)."""
    installed = version_of(DISTRIBUTION)
    if installed is not None:
        require_pin("vllm", installed)
    return installed


def require_cuda(device: str) -> None:
    if not device.startswith("cuda"):
        raise NotImplementedError(f"the vllm backend needs a CUDA device, got {device!r}")


def _import_runtime() -> ModuleType:
    from collector.backends import vllm_runtime

    return vllm_runtime


class VllmBackend:
    name = "vllm"
    framework = "vllm"

    def __init__(
        self,
        version_of: VersionOf = installed_version,
        import_runtime: Callable[[], ModuleType] = _import_runtime,
    ) -> None:
        installed = check_installed_version(version_of)
        if installed is None:
            raise BackendUnavailable(
                f"vLLM not installed: no '{DISTRIBUTION}' distribution is visible to "
                f"{sys.executable}; {INSTALL_HINT}"
            )
        self._installed = installed
        try:
            self._module = import_runtime()
        except ImportError as exc:
            raise BackendUnavailable(
                f"vLLM {installed} is installed but does not import: {type(exc).__name__}: {exc}"
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
                    f"vllm imports as {runtime.version} but its metadata says "
                    f"{self._installed}: two installs shadow each other on sys.path"
                )
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
