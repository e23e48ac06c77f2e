"""Backends behind one registry. A backend builds a timed callable for a case on a device.

The backend's own dispatch chooses the kernel; `kernel_source` records what ran. A backend
never swaps to another implementation when one fails: the failure is the observation.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

from collector.backends.base import Backend, Prepared
from collector.errors import UserError


def _torch(**options: Any) -> Backend:
    from collector.backends.torch_backend import TorchBackend

    missing = options.get("_fail_import")
    if missing:  # test seam: behave as if a framework module were not installed
        importlib.import_module(str(missing))

    return TorchBackend()


def _vllm(**options: Any) -> Backend:
    # Imports vLLM (about 20 s): a missing or broken install is an ImportError here, which
    # the engine records as `backend_unavailable` for every case.
    from collector.backends.vllm_backend import VllmBackend

    return VllmBackend()


def _flashinfer(**options: Any) -> Backend:
    # Imports FlashInfer (no kernel is compiled yet); missing or broken: an ImportError,
    # recorded as `backend_unavailable` for every case.
    from collector.backends.flashinfer_backend import FlashinferBackend

    return FlashinferBackend()


def _preflight_vllm() -> None:
    from collector.backends.vllm_backend import check_installed_version

    check_installed_version()


def _preflight_flashinfer() -> None:
    from collector.backends.flashinfer_backend import preflight as check

    check()


_FACTORIES: dict[str, Callable[..., Backend]] = {
    "torch": _torch,
    "flashinfer": _flashinfer,
    "vllm": _vllm,
}
# Cheap checks run once, before a run directory or a worker exists (no framework import).
_PREFLIGHT: dict[str, Callable[[], None]] = {
    "flashinfer": _preflight_flashinfer,
    "vllm": _preflight_vllm,
}
BACKEND_NAMES = tuple(sorted(_FACTORIES))


def check_backend_name(name: str) -> None:
    if name not in _FACTORIES:
        raise UserError(f"unknown backend {name!r}; known backends: {', '.join(BACKEND_NAMES)}")


def preflight(name: str) -> None:
    """The backend's version gate: a one-line UserError before anything is collected."""
    check_backend_name(name)
    check = _PREFLIGHT.get(name)
    if check is not None:
        check()


# What building the torch backend imports; a framework backend's build imports its runtime
# module (`framework_module`), which imports the framework itself (vLLM: about 20 s).
_TORCH_MODULE = "collector.backends.torch_backend"


def preload_module(name: str) -> str:
    """The module that building backend `name` imports: the framework's heavy part."""
    check_backend_name(name)
    if name == "torch":
        return _TORCH_MODULE
    from collector.backends.framework_backend import framework_module

    return framework_module(name, "runtime")


def preload(name: str) -> None:
    """Import what building backend `name` imports, without touching a device (no CUDA
    context is made): a spare worker, or the server workers fork from, does it before a
    round (collector/pool.py), so that the import's seconds are not spent while the GPU
    waits."""
    importlib.import_module(preload_module(name))


def standby_warm(name: str, device: str) -> list[str]:
    """What a spare worker of backend `name` loads before its turn, still without a CUDA
    context: the framework's `standby` module where it has one (collector/backends/
    vllm_standby.py), nothing otherwise. Returns what it loaded."""
    check_backend_name(name)
    if name == "torch" or not device.startswith("cuda"):
        return []
    from collector.backends.framework_backend import framework_module

    module = framework_module(name, "standby")
    if importlib.util.find_spec(module) is None:
        return []
    _, _, index = device.partition(":")
    loaded: list[str] = importlib.import_module(module).warm(int(index) if index.isdigit() else 0)
    return loaded


def get_backend(name: str, **options: Any) -> Backend:
    """Build a backend; ImportError means its framework is missing (a classified failure)."""
    check_backend_name(name)
    return _FACTORIES[name](**options)


__all__ = [
    "BACKEND_NAMES",
    "Backend",
    "Prepared",
    "get_backend",
    "preflight",
    "preload",
    "preload_module",
    "standby_warm",
]
