"""A forkserver's vLLM import covers a worker's first GEMM case, with vLLM 0.24.0's own modules.

And a block-FP8 layer's weight requantisation runs eagerly, with the compiled function's
weights and scales, so that no worker compiles it again.

What building a layer imports lazily (vLLM's linear layers and its FP8 method) is imported
with `collector.backends.vllm_runtime`, the module the forkserver preloads, and none of it
makes a CUDA context here (a forked worker could not use CUDA then; a GPU machine can still
make one, which collector/worker_start.py detects). Skipped, saying why, where vLLM 0.24.0 is not installed
(scripts/vllm-cpu-env.sh makes it importable).
"""

from __future__ import annotations

from typing import Any

from tests.vllm_subprocess import vllm_probe

PROBE = """
import json, sys
import torch
import collector.backends.vllm_runtime as runtime
print(json.dumps({"installed": list(runtime.FIRST_CASE_MODULES),
                  "missing": [m for m in runtime.FIRST_CASE_MODULES if m not in sys.modules],
                  "cuda": torch.cuda.is_initialized()}))
"""


REQUANT = """
import json, torch
import collector.backends.vllm_runtime
import vllm.utils.deep_gemm as deep_gemm
from torch._dynamo.utils import counters
from vllm.model_executor.layers.quantization.utils.fp8_utils import requant_weight_ue8m0_inplace
torch.manual_seed(0)
weight = torch.randn(256, 384).to(torch.float8_e4m3fn)
scale = torch.rand(2, 3) + 0.5
dequantised = weight.float() * scale.repeat_interleave(128, 0).repeat_interleave(128, 1)
requant_weight_ue8m0_inplace(weight, scale, (128, 128))
graphs = dict(counters["stats"])
compiled = torch.compile(deep_gemm.per_block_cast_to_fp8, dynamic=True)
want_weight, want_scale = compiled(dequantised, [128, 128], use_ue8m0=True)
print(json.dumps({"graphs_while_preparing": graphs,
                  "same_weight": bool(torch.equal(weight.view(torch.uint8), want_weight.view(torch.uint8))),
                  "same_scale": bool(torch.equal(scale, want_scale)),
                  "power_of_two": bool((torch.log2(scale) == torch.log2(scale).round()).all())}))
"""


def _probe(code: str) -> dict[str, Any]:
    return vllm_probe(["-c", code])


def test_the_preloaded_runtime_imports_a_first_gemm_case_s_modules_without_cuda() -> None:
    found = _probe(PROBE)
    assert "vllm.model_executor.layers.linear" in found["installed"]
    assert found["missing"] == []
    assert found["cuda"] is False


def test_block_fp8_weights_are_requantised_eagerly_to_the_compiled_function_s_result() -> None:
    found = _probe(REQUANT)
    assert found["graphs_while_preparing"] == {}
    assert found["same_weight"] is True
    assert found["same_scale"] is True
    assert found["power_of_two"] is True
