"""The part the framework-backed backends share, on the CPU: one runtime per process."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from collector.backends.framework_backend import PerProcess


@dataclass
class FakeRuntime:
    device: str
    index: int = field(init=False)

    def __post_init__(self) -> None:
        self.index = int(self.device.partition(":")[2] or 0)


def test_the_runtime_is_built_once_and_refuses_another_device() -> None:
    built: list[str] = []

    def build(device: str) -> FakeRuntime:
        built.append(device)
        return FakeRuntime(device)

    per_process = PerProcess("Fake", build)
    first = per_process.get("cuda:1")
    assert per_process.get("cuda:1") is first
    assert built == ["cuda:1"]
    with pytest.raises(RuntimeError, match="already runs Fake on cuda:1; one device per process"):
        per_process.get("cuda:0")
    assert PerProcess("Fake", build).get("cuda").index == 0  # a bare "cuda" is device 0
