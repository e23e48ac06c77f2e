"""Process-wide FlashInfer state for the flashinfer backend: imported once per worker.

Importing this module imports FlashInfer (a few seconds; no kernel is compiled yet). The
runtime holds what every case shares: the device and its compute capability, and the
394 MiB float workspace (vLLM's size) the attention wrappers plan into (zeroed once, as
FlashInfer asks before its first use). Kernels are JIT-compiled by FlashInfer at the first
`plan` or call of a variant and cached on disk (~/.cache/flashinfer) and in the process.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import flashinfer
import torch
from flashinfer.autotuner import AutoTuner
from flashinfer.utils import BackendSupportedError

from collector.backends.flashinfer_support import WORKSPACE_BYTES, unsupported_message
from collector.backends.framework_backend import PerProcess, bind_cuda

T = TypeVar("T")


class FlashinferRuntime:
    """One per process: call `runtime(device)`."""

    def __init__(self, device: str) -> None:
        self.index = bind_cuda("flashinfer", device)
        self.device = torch.device("cuda", self.index)
        self.version = str(flashinfer.__version__)
        self.capability: tuple[int, int] = tuple(  # type: ignore[assignment]
            torch.cuda.get_device_capability(self.index)
        )
        self._workspace: torch.Tensor | None = None

    @property
    def workspace(self) -> torch.Tensor:
        """The attention wrappers' float workspace; one case is prepared at a time."""
        if self._workspace is None:
            self._workspace = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=self.device)
        return self._workspace

    def first_call(self, api: str, fn: Callable[[], T]) -> T:
        """Run `fn` once (JIT, cuDNN graph building); FlashInfer's refusal of this device
        (`BackendSupportedError`) becomes an `unsupported` failure naming the capability."""
        try:
            return fn()
        except BackendSupportedError as exc:
            raise NotImplementedError(unsupported_message(api, self.capability, str(exc))) from exc


@contextlib.contextmanager
def observe_dispatch() -> Iterator[list[str]]:
    """The runner classes FlashInfer's AutoTuner hands back while the block runs.

    `mm_bf16(backend="auto")` and `bmm_fp8(backend="auto")` build their candidate runners
    and let `AutoTuner.choose_one` pick (outside tuning mode: a tuned entry from its cache,
    else the first candidate). The pick is observed, not predicted: `choose_one` is wrapped
    on the singleton for the duration of the block and restored after.
    """
    tuner: Any = AutoTuner.get()
    own = vars(tuner).get("choose_one")  # normally None: the class's method
    original = tuner.choose_one
    seen: list[str] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        runner, tactic = original(*args, **kwargs)
        seen.append(type(runner).__name__)
        return runner, tactic

    tuner.choose_one = spy
    try:
        yield seen
    finally:
        if own is None:
            del tuner.choose_one  # the instance attribute goes; the class method is back
        else:
            tuner.choose_one = own


_RUNTIME = PerProcess("FlashInfer", FlashinferRuntime)


def runtime(device: str) -> FlashinferRuntime:
    """The process's runtime; one device per process."""
    return _RUNTIME.get(device)
