"""GEMM through vLLM's linear layers: RowParallelLinear under its quantization config.

Each weight copy is a real layer built and loaded the way vLLM's model loader does it:
construct under the loader's context (current config, bf16 default dtype, target device),
load every parameter through its own `weight_loader` from a synthetic checkpoint, then
`quant_method.process_weights_after_loading`. The forward is the layer's own; the kernel
it dispatches is the one the quant method selected at `create_weights`.

- bfloat16: no quant config (UnquantizedLinearMethod) -> torch.nn.functional.linear (cuBLAS);
- fp8: Fp8Config, FP8 checkpoint, static activation scale -> CutlassFP8ScaledMMLinearKernel;
- fp8_block: Fp8Config with 128x128 weight blocks, dynamic activations ->
  FlashInferFp8DeepGEMMDynamicBlockScaledKernel, whose leaf is FlashInfer's kernel below
  32 rows and DeepGEMM's from 32 on; CutlassFp8BlockScaledMMKernel where N % 64 or K % 128
  is not 0 (what vLLM 0.24.0 selects on an H200).

The fp8 row uses a static per-tensor activation scale, as FP8 checkpoints with
`activation_scheme: static` do. The field's vLLM 0.24.0 table times a dynamic one (and
vLLM's unfused native quantisation): docs/backends.md, "The fp8 GEMM gap";
`activation_scheme="dynamic"` builds that layer for bench/gpu/gemm_gap.py.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from collector.backends.base import Prepared
from collector.backends.relocate import move_tensors
from collector.backends.torch_backend import rotation_copies
from collector.backends.vllm_runtime import VllmRuntime
from collector.backends.vllm_support import (
    FP8_BLOCK,
    FP8_E4M3_MAX,
    block_fp8_leaf,
    quantize_fp8_per_block,
    quantize_fp8_per_tensor,
)

GEMM_DTYPES = ("bfloat16", "fp8", "fp8_block")


def quant_config(gemm_dtype: str, activation_scheme: str = "static") -> Any:
    from vllm.model_executor.layers.quantization.fp8 import Fp8Config

    if gemm_dtype == "bfloat16":
        return None
    if gemm_dtype == "fp8":
        return Fp8Config(is_checkpoint_fp8_serialized=True, activation_scheme=activation_scheme)
    if gemm_dtype == "fp8_block":
        return Fp8Config(
            is_checkpoint_fp8_serialized=True,
            activation_scheme="dynamic",
            weight_block_size=list(FP8_BLOCK),
        )
    raise NotImplementedError(f"the vllm backend has no GEMM for gemm_dtype {gemm_dtype!r}")


def checkpoint(
    gemm_dtype: str, n: int, k: int, x: torch.Tensor, gen: torch.Generator
) -> dict[str, torch.Tensor]:
    """The tensors an (FP8) checkpoint would hold for this layer, on x's device."""
    w = torch.randn(n, k, generator=gen, device=x.device, dtype=torch.float32)
    if gemm_dtype == "bfloat16":
        return {"weight": w.to(torch.bfloat16)}
    if gemm_dtype == "fp8":
        q, scale = quantize_fp8_per_tensor(w)
        input_scale = (x.abs().amax().float() / FP8_E4M3_MAX).clamp(min=1e-12).reshape(1)
        return {"weight": q, "weight_scale": scale, "input_scale": input_scale}
    q, scale_inv = quantize_fp8_per_block(w, FP8_BLOCK)
    return {"weight": q, "weight_scale_inv": scale_inv}


def build_layer(
    rt: VllmRuntime,
    gemm_dtype: str,
    n: int,
    k: int,
    x: torch.Tensor,
    gen: torch.Generator,
    activation_scheme: str = "static",
) -> torch.nn.Module:
    from vllm.model_executor.layers.linear import RowParallelLinear

    with rt.building(rt.base_config, torch.bfloat16):
        layer: Any = RowParallelLinear(
            input_size=k,
            output_size=n,
            bias=False,
            params_dtype=torch.bfloat16,
            quant_config=quant_config(gemm_dtype, activation_scheme),
            prefix="model.layers.0.mlp.down_proj",
            return_bias=False,
            disable_tp=True,
        )
        tensors = checkpoint(gemm_dtype, n, k, x, gen)
        params = dict(layer.named_parameters())
        missing = sorted(set(params) - set(tensors))
        if missing:
            raise RuntimeError(
                f"{type(layer.quant_method).__name__} created parameters the synthetic "
                f"checkpoint does not provide: {', '.join(missing)}"
            )
        for name, param in params.items():
            param.weight_loader(param, tensors[name])
        layer.quant_method.process_weights_after_loading(layer)
    module: torch.nn.Module = layer.eval()
    return module


def kernel_source(layer: torch.nn.Module, m: int) -> str:
    """The leaf kernel the layer's quant method dispatches to for M rows."""
    import vllm.envs as envs
    from vllm.model_executor.layers import utils as layer_utils
    from vllm.model_executor.layers.linear import UnquantizedLinearMethod

    method = layer.quant_method
    if isinstance(method, UnquantizedLinearMethod):
        if envs.VLLM_BATCH_INVARIANT:
            return "vllm.model_executor.layers.batch_invariant.linear_batch_invariant"
        fn = layer_utils.dispatch_unquantized_gemm()
        if fn is layer_utils.default_unquantized_gemm:
            # `default_unquantized_gemm` is `torch.nn.functional.linear(x, weight, bias)`.
            return "torch.nn.functional.linear"
        return f"{fn.__module__}.{fn.__qualname__}"
    kernel = getattr(method, "fp8_linear", None)
    if kernel is None:
        return type(method).__name__
    name = type(kernel).__name__
    base, fallback = getattr(kernel, "base", None), getattr(kernel, "fallback", None)
    if base is None or fallback is None:
        return name
    return block_fp8_leaf(
        name,
        m,
        base=type(base).__name__,
        fallback=type(fallback).__name__,
        batch_invariant=bool(envs.VLLM_BATCH_INVARIANT),
    )


def prepare_gemm(
    rt: VllmRuntime, p: dict[str, Any], l2_bytes: int, activation_scheme: str = "static"
) -> Prepared:
    m, n, k, gemm_dtype = int(p["m"]), int(p["n"]), int(p["k"]), str(p["gemm_dtype"])
    if gemm_dtype not in GEMM_DTYPES:
        raise NotImplementedError(f"the vllm backend has no GEMM for gemm_dtype {gemm_dtype!r}")
    gen = torch.Generator(device=rt.device).manual_seed(0)
    weight_bytes = n * k * (2 if gemm_dtype == "bfloat16" else 1)
    copies = rotation_copies(weight_bytes, l2_bytes)
    # Activations rotate with the weights (as in the torch backend): where one buffer
    # lands in memory must not set the speed of a whole run.
    xs = [
        torch.randn(m, k, generator=gen, device=rt.device, dtype=torch.float32).to(torch.bfloat16)
        for _ in range(copies)
    ]
    layers = [build_layer(rt, gemm_dtype, n, k, x, gen, activation_scheme) for x in xs]
    source = kernel_source(layers[0], m)

    def call(i: int) -> torch.Tensor:
        j = i % copies
        out: torch.Tensor = layers[j](xs[j])
        return out

    def relocate(check: bool = True) -> Prepared:
        # The same op on fresh memory; a copy that computes otherwise is refused. The first
        # move of a run is checked: later ones move the same tensors again (each check cost
        # its calls and a sync, about a tenth of a short kernel's run on the H200).
        before = [call(j) for j in range(copies)] if check else []
        moved = move_tensors([*layers, xs])
        if not all(torch.equal(b, call(j)) for j, b in enumerate(before)):
            raise RuntimeError("the relocated layer computed other outputs")
        again = functools.partial(relocate, check=False)
        return Prepared(call, copies, source, relocate=again, holds=moved)

    return Prepared(call=call, copies=copies, kernel_source=source, relocate=relocate)
