"""What a spare worker loads before its turn (`standby_warm`), and what its pool reports.

The vLLM backend's spare imports FlashInfer's GEMM module and loads its SM90 block-FP8
library, which a fresh worker's first block-FP8 case paid otherwise (about 1.4 s on the
H200), with FlashInfer told the architecture by NVML so that torch makes no CUDA context.
FlashInfer stands in here as a package on disk whose modules record what they were asked.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from collector.backends import standby_warm, vllm_standby
from collector.pool import WorkerPool
from collector.timing import Protocol
from collector.worker import WorkerSpec

FILES = {
    "flashinfer/__init__.py": "",
    # FlashInfer's import reads the architectures to build for (else it asks torch).
    "flashinfer/gemm/__init__.py": "import os\nARCH = os.environ.get('FLASHINFER_CUDA_ARCH_LIST')\n",
    "flashinfer/gemm/gemm_base.py": "LOADED = []\n"
    "def get_fp8_blockscale_gemm_runner_sm90():\n    LOADED.append('sm90')\n",
    "flashinfer/jit/__init__.py": "",
    "flashinfer/jit/gemm/__init__.py": "",
    "flashinfer/jit/gemm/fp8_blockscale.py": "import os, types\n"
    "def gen_fp8_blockscale_gemm_sm90_module():\n"
    "    return types.SimpleNamespace(is_compiled=os.environ.get('BUILT') == '1')\n",
}


@pytest.fixture
def fake_flashinfer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "flashinfer" or m.startswith("flashinfer.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delenv(vllm_standby.ARCH_ENV, raising=False)
    return tmp_path


@pytest.mark.parametrize("built", [True, False])
def test_a_vllm_spare_loads_flashinfers_block_fp8_gemm_told_the_arch_by_nvml(
    fake_flashinfer: Path, monkeypatch: pytest.MonkeyPatch, built: bool
) -> None:
    asked: list[int] = []

    def capability(index: int) -> tuple[int, int]:
        asked.append(index)
        return 9, 0

    monkeypatch.setattr(vllm_standby, "nvml_compute_capability", capability)
    monkeypatch.setenv("BUILT", "1" if built else "0")
    loaded = standby_warm("vllm", "cuda:3")
    gemm, base = (
        importlib.import_module(m) for m in ("flashinfer.gemm", "flashinfer.gemm.gemm_base")
    )

    assert asked == [3]
    assert gemm.ARCH == "9.0"  # set before FlashInfer's import read it
    # A library not built yet is left to the case that needs it: a spare never compiles.
    assert loaded == (
        ["flashinfer.gemm", "fp8_blockscale_gemm_90"] if built else ["flashinfer.gemm"]
    )
    assert (["sm90"] if built else []) == base.LOADED


def test_without_nvml_or_on_another_arch_nothing_is_loaded_that_would_ask_torch(
    fake_flashinfer: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BUILT", "1")
    monkeypatch.setattr(vllm_standby, "nvml_compute_capability", lambda i: None)
    assert standby_warm("vllm", "cuda:0") == []
    assert "flashinfer" not in sys.modules
    monkeypatch.setattr(vllm_standby, "nvml_compute_capability", lambda i: (10, 0))
    assert standby_warm("vllm", "cuda:0") == ["flashinfer.gemm"]  # no SM90 library on SM100


def test_the_torch_backend_and_cpu_devices_warm_nothing() -> None:
    assert standby_warm("torch", "cuda:0") == []
    assert standby_warm("vllm", "cpu") == []


def test_a_pool_reports_what_its_spares_warmed() -> None:
    spec = WorkerSpec(backend="torch", device="cpu", protocol=Protocol(), name="w0")
    pool = WorkerPool([spec], case_timeout_s=60, prestart=True)
    try:
        pool.wait_ready()
        assert pool.warm_summary()["spares"] == 0  # the first round's worker was no spare
        for _ in range(2):
            pool.prestart()
            pool.recycle()
        summary = pool.warm_summary()
    finally:
        pool.close()
    assert summary["spares"] == 2 and summary["loaded"] == [] and summary["errors"] == 0
    assert summary["cuda_before_go"] == summary["unknown_context"] == 0


def test_with_standby_warm_off_a_spare_only_imports_its_backend() -> None:
    protocol = Protocol(standby_warm=False)
    spec = WorkerSpec(backend="torch", device="cpu", protocol=protocol, name="w0")
    pool = WorkerPool([spec], case_timeout_s=60, prestart=True)
    try:
        pool.wait_ready()
        pool.prestart()
        pool.recycle()
        assert pool.prestarted == 1 and pool.warm_summary()["spares"] == 0
    finally:
        pool.close()
