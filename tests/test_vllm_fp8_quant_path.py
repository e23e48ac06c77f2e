"""Why the field's fp8 GEMM table is slower than ours, shown with vLLM 0.24.0's own classes.

The field's collector builds its linear layers under a default `VllmConfig()`, whose
compilation defaults (inductor, `custom_ops=['none']`) turn vLLM's custom ops off, and runs
them without compiling: the activation's FP8 quantisation takes `QuantFP8.forward_native`,
unfused element-wise ops (five for a static scale; the field's dynamic scale adds a
reduction and its scale's ops). Ours builds under the engine config of
`--enforce-eager`, which keeps custom ops on: vLLM's one fused quantisation kernel.
docs/backends.md, "The fp8 GEMM gap". `bench/vllm_quant_path.py` reads it in its own process.

Skipped, saying why, where vLLM 0.24.0 is not installed (scripts/vllm-cpu-env.sh makes it).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.vllm_subprocess import vllm_probe


@pytest.fixture(scope="module")
def path() -> dict[str, Any]:
    return vllm_probe(["-m", "bench.vllm_quant_path"])


def test_the_fields_default_config_turns_the_fused_quantisation_off(path: dict[str, Any]) -> None:
    assert path["field_config"]["custom_ops"] == ["none"]
    assert path["field_config"]["quant_fp8_enabled"] is False
    assert path["collector_config"]["mode"] == 0  # CompilationMode.NONE: --enforce-eager
    assert path["collector_config"]["quant_fp8_enabled"] is True


def test_the_native_quantisation_is_unfused_element_wise_ops(path: dict[str, Any]) -> None:
    static, dynamic = path["native"]["static"], path["native"]["dynamic"]
    assert static["dtype"] == dynamic["dtype"] == "torch.float8_e4m3fn"
    assert static["ops"] == ["_to_copy", "reciprocal", "mul", "clamp", "_to_copy"]
    # A dynamic scale adds the input's absolute maximum (a reduction) and the scale's ops.
    assert dynamic["ops"][:2] == ["abs", "max"] and dynamic["ops"][-4:] == static["ops"][1:]


def test_each_gap_variant_builds_the_layer_it_names(path: dict[str, Any]) -> None:
    layers = path["gap_variants"]
    assert {v["kernel"] for v in layers.values()} == {"CutlassFP8ScaledMMLinearKernel"}
    assert layers["ours"] == {
        "kernel": "CutlassFP8ScaledMMLinearKernel",
        "static_input_scale": True,
        "quant_forward": "forward_cuda",
    }
    assert not layers["dynamic"]["static_input_scale"]
    assert layers["dynamic"]["quant_forward"] == "forward_cuda"
    for variant in ("dynamic_native", "field"):
        assert not layers[variant]["static_input_scale"]
        assert layers[variant]["quant_forward"] == "forward_native"
