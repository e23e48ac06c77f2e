"""Backends behind one registry. A backend builds a timed callable for a case on a device.

The backend's own dispatch chooses the kernel; `kernel_source` records what ran. A backend
never swaps to another implementation when one fails: the failure is the observation.
"""

from __future__ import annotations

from collections.abc import Callable

from collector.backends.base import Backend, Prepared
from collector.errors import UserError


def _torch() -> Backend:
    from collector.backends.torch_backend import TorchBackend

    return TorchBackend()


_FACTORIES: dict[str, Callable[[], Backend]] = {"torch": _torch}
BACKEND_NAMES = tuple(sorted(_FACTORIES))


def get_backend(name: str) -> Backend:
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise UserError(
            f"unknown backend {name!r}; known backends: {', '.join(BACKEND_NAMES)}"
        ) from None
    return factory()


__all__ = ["BACKEND_NAMES", "Backend", "Prepared", "get_backend"]
