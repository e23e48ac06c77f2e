"""Which FP8 activation quantisation a vLLM 0.24.0 linear layer runs, under the field
collector's config and under ours, on the CPU (vLLM's own classes on a pretend H200).

    PYTHONPATH=.:$VLLM_CPU/site:$VLLM_CPU/deps python -m bench.vllm_quant_path

Prints one JSON object: whether `QuantFP8` (vLLM's fused custom op) is enabled under a
default `VllmConfig()` (the field's `collect_gemm.py`) and under the collector's
`--enforce-eager` engine config; the aten ops `QuantFP8.forward_native` dispatches for a
static and for a dynamic per-tensor scale (what runs when the custom op is off and nothing
is compiled); and, for each variant of bench/gpu/gemm_gap.py, the fp8 layer it builds (the
kernel vLLM selects, whether it holds a static input scale, which forward its quantisation
op takes).
docs/backends.md, "The fp8 GEMM gap". Its own process: the pretend platform must be in place
before vLLM's config modules bind it.
"""

from __future__ import annotations

import json
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class _Ops(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """The aten ops a call dispatches, in order."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.ops: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops.append(str(func).split(".")[1])
        return func(*args, **(kwargs or {}))


def quant_path() -> dict[str, Any]:
    from bench.vllm_dry_run import _pretend_h200, cpu_runtime

    _pretend_h200()
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.quantization.input_quant_fp8 import QuantFP8
    from vllm.model_executor.layers.quantization.utils.quant_utils import GroupShape

    def enabled(config: Any) -> bool:
        with set_current_vllm_config(config):
            return bool(QuantFP8.enabled())

    field, ours = VllmConfig(), cpu_runtime("quant-path").base_config
    native = {}
    for scheme, static in (("static", True), ("dynamic", False)):
        with set_current_vllm_config(field):
            quant = QuantFP8(static=static, group_shape=GroupShape.PER_TENSOR)
        x, scale = torch.randn(16, 256, dtype=torch.bfloat16), torch.tensor([0.01])
        with _Ops() as seen:
            out = quant.forward_native(x, scale if static else None)
        out = out[0] if isinstance(out, tuple) else out
        native[scheme] = {"ops": seen.ops, "dtype": str(out.dtype)}
    return {
        "field_config": {
            "mode": int(field.compilation_config.mode),
            "custom_ops": list(field.compilation_config.custom_ops),
            "quant_fp8_enabled": enabled(field),
        },
        "collector_config": {
            "mode": int(ours.compilation_config.mode),
            "custom_ops": list(ours.compilation_config.custom_ops),
            "quant_fp8_enabled": enabled(ours),
        },
        "native": native,
        "gap_variants": gap_variant_layers(cpu_runtime("quant-path")),
    }


def gap_variant_layers(runtime: Any) -> dict[str, dict[str, Any]]:
    """Each gemm_gap variant's fp8 layer, as built on the CPU (kernels are not run)."""
    import collector.backends.vllm_gemm as gemm
    from bench.gpu.gemm_gap import VARIANTS, prepare
    from collector.caseplan import Case

    built: list[Any] = []
    build = gemm.build_layer

    def keep(*args: Any, **kwargs: Any) -> Any:
        built.append(build(*args, **kwargs))
        return built[-1]

    case = Case.build("gemm", {"gemm_dtype": "fp8", "m": 16, "n": 256, "k": 256})
    layers: dict[str, dict[str, Any]] = {}
    gemm.build_layer = keep
    try:
        for variant in VARIANTS:
            built.clear()
            prepared = prepare(runtime, case, variant, 0)
            layer = built[0]
            quant = layer.quant_method.fp8_linear.quant_fp8
            layers[variant] = {
                "kernel": prepared.kernel_source,
                "static_input_scale": "input_scale" in dict(layer.named_parameters()),
                "quant_forward": quant._forward_method.__name__,
            }
    finally:
        gemm.build_layer = build
    return layers


def main() -> int:
    print(json.dumps(quant_path()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
