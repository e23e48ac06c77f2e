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

from collector.backends import framework_backend
from collector.backends.framework_backend import (
    FRAMEWORK_OPS,
    BackendUnavailable,
    FrameworkBackend,
    VersionOf,
)
from collector.versions import installed_version, require_pin

DISTRIBUTION = "vllm"
OPS = FRAMEWORK_OPS
INSTALL_HINT = (
    "install the pinned wheel bundle (collectbot bundle; docs/backends.md, 'Offline GPU runners') "
    "or pip install vllm==<pin>"
)


def check_installed_version(version_of: VersionOf = installed_version) -> str | None:
    """The version gate; returns the installed version (None: not installed, no gate)."""
    installed = version_of(DISTRIBUTION)
    if installed is not None:
        require_pin("vllm", installed)
    return installed


def require_cuda(device: str) -> None:
    framework_backend.require_cuda("vllm", device)


class VllmBackend(FrameworkBackend):
    name = "vllm"
    framework = "vllm"
    label = "vLLM"
    distribution = DISTRIBUTION
    install_hint = INSTALL_HINT
    version_gate = staticmethod(check_installed_version)


__all__ = ["OPS", "BackendUnavailable", "VllmBackend", "check_installed_version", "require_cuda"]
