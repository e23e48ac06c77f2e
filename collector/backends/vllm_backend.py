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

from collector.backends.framework_backend import BackendUnavailable, FrameworkBackend


class VllmBackend(FrameworkBackend):
    name = "vllm"
    framework = "vllm"
    label = "vLLM"
    distribution = "vllm"
    install_hint = (
        "install the pinned wheel bundle (collectbot bundle; docs/backends.md, 'Offline GPU "
        "runners') or pip install vllm==<pin>"
    )


check_installed_version = VllmBackend.check_installed_version
require_cuda = VllmBackend.require_cuda

__all__ = ["BackendUnavailable", "VllmBackend", "check_installed_version", "require_cuda"]
