"""A forkserver's vLLM import covers a worker's first GEMM case, with vLLM 0.24.0's own modules.

What building a layer imports lazily (vLLM's linear layers, its FP8 method, FlashInfer's GEMM
module where FlashInfer is installed) is imported with `collector.backends.vllm_runtime`, the
module the forkserver preloads, and none of it makes a CUDA context (a forked worker could not
use CUDA then). Skipped, saying why, where vLLM 0.24.0 is not installed
(scripts/vllm-cpu-env.sh makes it importable).
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import importlib.util, json, sys
import torch
import collector.backends.vllm_runtime as runtime
installed = [m for m in runtime.FIRST_CASE_MODULES
             if importlib.util.find_spec(m.partition(".")[0]) is not None]
print(json.dumps({"installed": installed,
                  "missing": [m for m in installed if m not in sys.modules],
                  "cuda": torch.cuda.is_initialized()}))
"""


def test_the_preloaded_runtime_imports_a_first_gemm_case_s_modules_without_cuda() -> None:
    try:
        version = metadata.version("vllm")
    except metadata.PackageNotFoundError:
        pytest.skip("vLLM is not installed here (scripts/vllm-cpu-env.sh makes it importable)")
    if version != "0.24.0":
        pytest.skip(f"vLLM {version} is installed; this checks 0.24.0")
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert "vllm.model_executor.layers.linear" in found["installed"]
    assert found["missing"] == []
    assert found["cuda"] is False
