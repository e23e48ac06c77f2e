"""The FP8-KV/FlashInfer dtype alignment against vLLM 0.24.0's own classes, on the CPU.

What is real: vLLM's `ModelConfig` (built from a one-layer config.json), its KV-cache spec
(`FullAttentionSpec`, `KVQuantMode`), and the dtype branch of `FlashInferMetadataBuilder.
__init__`, taken from vLLM's installed source and executed as written. What is not: the
builder itself, whose module imports FlashInfer's CUDA kernels and whose constructor needs a
CUDA platform and a DCP group; the branch is executed on a namespace holding the real spec
and config (docs/benchmarks.md, "vLLM's classes on the CPU", says how to get vLLM 0.24.0
importable there without its CUDA dependencies).

Skipped, saying why, where vLLM 0.24.0 does not import.
"""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from collector.backends.vllm_support import (
    align_model_dtype_for_flashinfer,
    kv_spec_quantized,
    model_hf_config,
)

VLLM_VERSION = "0.24.0"
BRANCH_TEST = "self.kv_cache_spec.kv_quant_mode != KVQuantMode.NONE"


def _vllm() -> Any:
    try:
        import vllm
        import vllm.config
        import vllm.v1.kv_cache_interface
    except Exception as exc:
        pytest.skip(f"vLLM does not import here ({type(exc).__name__}: {str(exc)[:120]})")
    if vllm.__version__ != VLLM_VERSION:
        pytest.skip(f"vLLM {vllm.__version__} is installed; this checks {VLLM_VERSION}")
    return vllm


@pytest.fixture(scope="module")
def vllm() -> Any:
    return _vllm()


def _builder_dtype_branch(vllm: Any) -> Any:
    """`FlashInferMetadataBuilder.__init__`'s KV dtype branch from vLLM's source, as a
    function of (self, KVQuantMode, FlashInferBackend, current_platform)."""
    path = Path(vllm.__file__).parent / "v1" / "attention" / "backends" / "flashinfer.py"
    source = path.read_text()
    tree = ast.parse(source)
    builder = next(
        n
        for n in tree.body
        if isinstance(n, ast.ClassDef) and n.name == "FlashInferMetadataBuilder"
    )
    init = next(n for n in builder.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    branch = next(
        n for n in ast.walk(init) if isinstance(n, ast.If) and ast.unparse(n.test) == BRANCH_TEST
    )
    body = textwrap.indent(ast.unparse(branch), "    ")
    code = f"def branch(self, KVQuantMode, FlashInferBackend, current_platform):\n{body}\n"
    namespace: dict[str, Any] = {}
    exec(compile(code, str(path), "exec"), namespace)
    return namespace["branch"]


def _model_config(vllm: Any, tmp: Path) -> Any:
    hf = model_hf_config(8, 2, 64, 2048)
    hf["architectures"] = ["LlamaForCausalLM"]
    (tmp / "config.json").write_text(json.dumps(hf))
    from vllm.config import ModelConfig

    return ModelConfig(model=str(tmp), dtype="bfloat16", skip_tokenizer_init=True)


def _run_branch(vllm: Any, spec: Any, model_config: Any, cache_dtype: str) -> SimpleNamespace:
    from vllm.v1.kv_cache_interface import KVQuantMode

    backend = SimpleNamespace(get_dtype_for_flashinfer=lambda name: torch.float8_e4m3fn)
    platform = SimpleNamespace(is_device_capability_family=lambda family: False)
    builder = SimpleNamespace(
        kv_cache_spec=spec,
        model_config=model_config,
        cache_config=SimpleNamespace(cache_dtype=cache_dtype),
    )
    _builder_dtype_branch(vllm)(builder, KVQuantMode, backend, platform)
    return builder


def test_an_unquantised_fp8_spec_trips_vllms_assert_until_aligned(
    vllm: Any, tmp_path: Path
) -> None:
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    spec = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=64, dtype=torch.float8_e4m3fn)
    assert not kv_spec_quantized(spec)
    config = _model_config(vllm, tmp_path)
    assert config.dtype == torch.bfloat16
    with pytest.raises(AssertionError):  # the field's failure, from vLLM's own line
        _run_branch(vllm, spec, config, "fp8")
    assert align_model_dtype_for_flashinfer(config, spec.dtype, "FLASHINFER", kv_quantized=False)
    assert config.dtype == torch.float8_e4m3fn
    built = _run_branch(vllm, spec, config, "fp8")
    assert built.kv_cache_dtype == torch.float8_e4m3fn and built.cache_dtype == "auto"


def test_a_quantised_spec_takes_vllms_quantised_branch_and_is_left_alone(
    vllm: Any, tmp_path: Path
) -> None:
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVQuantMode

    spec = FullAttentionSpec(
        block_size=16,
        num_kv_heads=2,
        head_size=64,
        dtype=torch.uint8,
        kv_quant_mode=KVQuantMode.FP8_PER_TENSOR,
    )
    assert kv_spec_quantized(spec)
    config = _model_config(vllm, tmp_path)
    assert not align_model_dtype_for_flashinfer(
        config, spec.dtype, "FLASHINFER", kv_quantized=kv_spec_quantized(spec)
    )
    assert config.dtype == torch.bfloat16  # nothing aligned: uint8 storage is not the op dtype
    built = _run_branch(vllm, spec, config, "fp8")
    assert built.cache_dtype == "fp8" and built.kv_cache_dtype == torch.float8_e4m3fn


def test_other_backends_and_matching_dtypes_are_left_alone(vllm: Any, tmp_path: Path) -> None:
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    config = _model_config(vllm, tmp_path)
    fp8 = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=64, dtype=torch.float8_e4m3fn)
    assert not align_model_dtype_for_flashinfer(config, fp8.dtype, "FLASH_ATTN", False)
    same = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=64, dtype=torch.bfloat16)
    assert not align_model_dtype_for_flashinfer(config, same.dtype, "FLASHINFER", False)
    assert config.dtype == torch.bfloat16
    _run_branch(vllm, same, config, "auto")  # equal dtypes pass vLLM's assert as they are


def test_kv_spec_quantized_reads_the_mode_and_tolerates_older_specs() -> None:
    assert not kv_spec_quantized(SimpleNamespace(dtype=torch.bfloat16))  # no field: older vLLM
    assert not kv_spec_quantized(SimpleNamespace(kv_quant_mode=0))
    assert kv_spec_quantized(SimpleNamespace(kv_quant_mode=1))
