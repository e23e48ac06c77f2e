"""What the framework-backed backends (vllm, flashinfer) share.

Each is built in a worker: the framework must be installed, pass its version gate and
import; otherwise `BackendUnavailable`, an ImportError, which the engine records as
`backend_unavailable` for every planned case. The framework's CUDA-side runtime is set up
on the first prepared case, when the device is known, and checked against the metadata
(two installs shadowing each other on sys.path would time the wrong version).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from collector.backends.base import Prepared
from collector.caseplan import Case
from collector.errors import UserError
from collector.versions import installed_version, require_pin

VersionOf = Callable[[str], "str | None"]
FRAMEWORK_OPS = frozenset({"gemm", "context_attention", "generation_attention"})


class DeviceRuntime(Protocol):
    index: int
    device: Any


R = TypeVar("R", bound=DeviceRuntime)


class PerProcess(Generic[R]):
    """A framework's CUDA-side runtime: built once per process, for one device, as the
    engine's workers have; asking for another device is an error, not a silent switch."""

    def __init__(self, label: str, build: Callable[[str], R]) -> None:
        self._label = label
        self._build = build
        self._runtime: R | None = None

    def get(self, device: str) -> R:
        import torch

        if self._runtime is None:
            self._runtime = self._build(device)
        requested = torch.device(device).index
        if (requested if requested is not None else 0) != self._runtime.index:
            raise RuntimeError(
                f"this process already runs {self._label} on {self._runtime.device}; "
                "one device per process"
            )
        return self._runtime


def framework_module(backend: str, part: str) -> str:
    """A framework backend's module by role: collector/backends/<backend>_<part>.py, with
    `runtime` the one that imports the framework (what building the backend costs)."""
    return f"collector.backends.{backend}_{part}"


class BackendUnavailable(ImportError):
    """The framework cannot be used in this process; classified `backend_unavailable`."""


def require_cuda(backend: str, device: str) -> None:
    if not device.startswith("cuda"):
        raise NotImplementedError(f"the {backend} backend needs a CUDA device, got {device!r}")


def bind_cuda(backend: str, device: str) -> int:
    """Make the CUDA device `device` names (`cuda` is 0) this process's own; its index."""
    import torch

    parsed = torch.device(device)
    if parsed.type != "cuda":
        raise NotImplementedError(f"the {backend} backend needs a CUDA device, got {device!r}")
    index = parsed.index if parsed.index is not None else 0
    torch.cuda.set_device(index)
    return index


class FrameworkBackend:
    name: str
    framework: str
    label: ClassVar[str]  # the framework's name in messages, e.g. "vLLM"
    distribution: ClassVar[str]
    install_hint: ClassVar[str]

    def __init__(
        self,
        version_of: VersionOf = installed_version,
        import_runtime: Callable[[], ModuleType] | None = None,
    ) -> None:
        installed = self.check_installed_version(version_of)
        if installed is None:
            raise BackendUnavailable(
                f"{self.label} not installed: no '{self.distribution}' distribution is visible "
                f"to {sys.executable}; {self.install_hint}"
            )
        self._installed = installed
        try:
            self._module = (import_runtime or self.import_runtime)()
        except ImportError as exc:
            raise BackendUnavailable(
                f"{self.label} {installed} is installed but does not import: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        self._runtime: Any = None

    # A framework's modules are found by name (`framework_module`).

    @classmethod
    def check_installed_version(cls, version_of: VersionOf = installed_version) -> str | None:
        """The version gate: an installed distribution must equal the framework's pin.
        Returns the installed version (None: not installed, no gate; building says so)."""
        installed = version_of(cls.distribution)
        if installed is not None:
            require_pin(cls.framework, installed, cls.distribution)
        return installed

    @classmethod
    def require_cuda(cls, device: str) -> None:
        require_cuda(cls.framework, device)

    def _module_of(self, part: str) -> ModuleType:
        return importlib.import_module(framework_module(self.name, part))

    def import_runtime(self) -> ModuleType:
        return self._module_of("runtime")

    def prepare_with(self, runtime: Any, case: Case, l2_bytes: int) -> Prepared:
        if case.op == "gemm":
            prepared: Prepared = self._module_of("gemm").prepare_gemm(
                runtime, case.params, l2_bytes
            )
        else:
            attention = self._module_of("attention")
            prepared = attention.prepare_attention(runtime, case.op, case.params, l2_bytes)
        return prepared

    # The shared part.
    def framework_version(self) -> str:
        return self._installed

    def supported_ops(self) -> frozenset[str]:
        return FRAMEWORK_OPS

    def _load(self, device: str) -> Any:
        require_cuda(self.name, device)
        if self._runtime is None:
            runtime = self._module.runtime(device)
            if runtime.version != self._installed:
                raise UserError(
                    f"{self.name} imports as {runtime.version} but its metadata says "
                    f"{self._installed}: two installs shadow each other on sys.path"
                )
            self._runtime = runtime
        return self._runtime

    def prepare(self, case: Case, device: str, l2_bytes: int) -> Prepared:
        if case.op not in FRAMEWORK_OPS:
            raise NotImplementedError(f"the {self.name} backend does not implement op {case.op!r}")
        return self.prepare_with(self._load(device), case, l2_bytes)
