"""Pure helpers of the vLLM backend: no vLLM import, so they run (and are tested) on a CPU.

Everything here encodes a rule read from vLLM 0.24.0's source, with the place it comes from,
so that a version bump can be checked rule by rule:

- how a checkpoint stores FP8 weights (per-tensor and 128x128 block scales) for the loader;
- how a paged KV cache lays out sequences (block table, slot mapping), as vLLM's block
  allocator and `reshape_and_cache_flash` see them;
- which leaf kernel a dynamic block-FP8 kernel dispatches to for a given M;
- how an attention backend is named in `kernel_source` (the field's naming);
- the FP8-KV/FlashInfer dtype alignment carried from the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from collector.attn_backends import AUTO, FIELD, VLLM_ATTN_BACKENDS

# torch.finfo(torch.float8_e4m3fn).max: the largest finite e4m3 value.
FP8_E4M3_MAX = 448.0
FP8_BLOCK = (128, 128)
# A model architecture name registered in-process for the synthetic model configs (see
# vllm_runtime): vLLM inspects registered classes in-process instead of in a subprocess.
PROBE_ARCHITECTURE = "CollectbotProbeForCausalLM"

# vLLM 0.24.0, model_executor/kernels/linear/scaled_mm/flashinfer.py,
# `_dynamic_flashinfer_deepgemm_blockscale_gemm_impl`: `condition = input.shape[0] < 32`
# picks FlashInfer's swapAB kernel (the "base") below 32 rows, DeepGEMM (the "fallback")
# from 32 on; VLLM_BATCH_INVARIANT forces the fallback.
DYNAMIC_BLOCK_FP8_M_THRESHOLD = {"FlashInferFp8DeepGEMMDynamicBlockScaledKernel": 32}

# Dtype names of the op specs -> torch dtypes (activations and unquantized weights).
ACT_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}


def quantize_fp8_per_tensor(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A per-tensor FP8 checkpoint entry: (e4m3 weight, float32 scale of shape [1]).

    Dequantised, `weight.float() * scale` approximates `w` (the FP8 checkpoint convention
    that vLLM's Fp8LinearMethod loads).
    """
    amax = w.detach().abs().amax().float().clamp(min=1e-12)
    scale = amax / FP8_E4M3_MAX
    q = (w.float() / scale).clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX).to(torch.float8_e4m3fn)
    return q, scale.reshape(1)


def quantize_fp8_per_block(
    w: torch.Tensor, block: tuple[int, int] = FP8_BLOCK
) -> tuple[torch.Tensor, torch.Tensor]:
    """A block-FP8 checkpoint entry: (e4m3 weight [n, k], float32 `weight_scale_inv`).

    `weight_scale_inv` has one scale per (block_n x block_k) tile, shape
    [ceil(n / block_n), ceil(k / block_k)], the layout Fp8LinearMethod creates for
    `weight_block_size` and DeepSeek-style checkpoints store.
    """
    n, k = w.shape
    bn, bk = block
    nb, kb = math.ceil(n / bn), math.ceil(k / bk)
    padded = torch.zeros(nb * bn, kb * bk, dtype=torch.float32, device=w.device)
    padded[:n, :k] = w.float()
    tiles = padded.view(nb, bn, kb, bk)
    amax = tiles.abs().amax(dim=(1, 3)).clamp(min=1e-12)
    scale = amax / FP8_E4M3_MAX
    q = (tiles / scale[:, None, :, None]).clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX)
    q8 = q.view(nb * bn, kb * bk)[:n, :k].contiguous().to(torch.float8_e4m3fn)
    return q8, scale.contiguous()


def dequantize_fp8_per_block(
    q: torch.Tensor, scale: torch.Tensor, block: tuple[int, int] = FP8_BLOCK
) -> torch.Tensor:
    """Inverse of `quantize_fp8_per_block` (up to e4m3 rounding)."""
    n, k = q.shape
    bn, bk = block
    expanded = scale.repeat_interleave(bn, dim=0).repeat_interleave(bk, dim=1)
    return q.float() * expanded[:n, :k]


def block_fp8_leaf(kernel: str, m: int, base: str, fallback: str, batch_invariant: bool) -> str:
    """The leaf kernel a block-FP8 linear runs for an M-row input.

    A dynamic kernel (`Fp8BlockScaledDynamicMMLinearKernel`) holds two kernels and picks
    one per call; the row names the one that ran. Any other kernel is its own leaf.
    """
    threshold = DYNAMIC_BLOCK_FP8_M_THRESHOLD.get(kernel)
    if threshold is None:
        return kernel
    if batch_invariant:
        return fallback
    return base if m < threshold else fallback


def attention_kernel_source(
    backend: str, fa_version: int | None = None, phase_metadata: str | None = None
) -> str:
    """`kernel_source` of an attention row, in the field's naming.

    FLASH_ATTN -> `vllm_flash_attn_fa{version}` (the version the impl resolved);
    FLASHINFER -> `vllm_flashinfer_<class of the prefill or decode metadata it built>`;
    any other backend -> `vllm_<backend name>`; all lower case.
    """
    if backend == "FLASH_ATTN":
        if fa_version is None:
            raise RuntimeError("vLLM selected FLASH_ATTN but its impl resolved no FA version")
        return f"vllm_flash_attn_fa{fa_version}"
    if backend == "FLASHINFER":
        if not phase_metadata:
            raise RuntimeError("FlashInfer metadata has neither a prefill nor a decode part")
        return f"vllm_flashinfer_{phase_metadata}".lower()
    return f"vllm_{backend}".lower()


def check_selected_backend(requested: str, selected: str) -> None:
    """The backend vLLM built the layer with must be the one the case named (vLLM raises on
    an invalid choice; this catches a choice that was silently not applied)."""
    if requested != AUTO and selected != requested:
        raise RuntimeError(
            f"the case asked for attention backend {requested}; vLLM built {selected}"
        )


def kv_spec_quantized(spec: Any) -> bool:
    """Whether a KV-cache spec carries a quantisation mode (vLLM 0.24.0: `AttentionSpec.
    kv_quant_mode`, an IntEnum whose NONE is 0; older specs lack the field)."""
    return bool(getattr(spec, "kv_quant_mode", 0))


def align_model_dtype_for_flashinfer(
    model_config: Any, kv_spec_dtype: torch.dtype, backend: str, kv_quantized: bool
) -> bool:
    """Carry the field's FP8-KV/FlashInfer fix; returns True when it changed the config.

    vLLM 0.22+ (0.24.0: v1/attention/backends/flashinfer.py, FlashInferMetadataBuilder)
    asserts `kv_cache_spec.dtype == model_config.dtype` when the spec carries no KV
    quantization mode. A spec whose dtype is FP8 but whose quant mode is NONE (how specs
    built outside the Attention layer look) trips it, so the model dtype is aligned with
    the spec before the builder is constructed. Specs from `Attention.get_kv_cache_spec`
    carry `KVQuantMode.FP8_PER_TENSOR` and take the quantized branch: nothing to align.
    """
    if backend != "FLASHINFER" or kv_quantized:
        return False
    if model_config.dtype == kv_spec_dtype:
        return False
    model_config.dtype = kv_spec_dtype
    return True


@dataclass(frozen=True)
class AttentionShape:
    """An attention case as vLLM's scheduler would hand it to a layer."""

    num_seqs: int
    query_len: int  # new tokens per sequence this step
    past_len: int  # tokens already in the KV cache per sequence
    num_heads: int
    num_kv_heads: int
    head_dim: int
    window: int  # 0: no sliding window
    act_dtype: str
    kv_cache_dtype: str  # op-spec name: bfloat16 | float16 | fp8
    attn_backend: str = AUTO  # vLLM's backend name, or auto: its selector chooses

    @property
    def vllm_attention_backend(self) -> str | None:
        """EngineArgs' `attention_backend` (-> `attention_config.backend`); None: select."""
        return None if self.attn_backend == AUTO else self.attn_backend

    @property
    def seq_len(self) -> int:
        return self.past_len + self.query_len

    @property
    def num_tokens(self) -> int:
        return self.num_seqs * self.query_len

    @property
    def vllm_cache_dtype(self) -> str:
        """vLLM's `--kv-cache-dtype`: `auto` when the cache keeps the activation dtype."""
        if self.kv_cache_dtype == "fp8":
            return "fp8"
        if self.kv_cache_dtype == self.act_dtype:
            return "auto"
        return self.kv_cache_dtype


def attention_shape(op: str, p: dict[str, Any]) -> AttentionShape:
    """Map an attention case to the batch vLLM would run; unsupported fields raise."""
    if int(p["beam_width"]) != 1:
        raise NotImplementedError("the vllm backend collects beam_width 1 only")
    if str(p["attn_dtype"]) not in ACT_DTYPES:
        raise NotImplementedError(f"attn_dtype {p['attn_dtype']!r} is not a vLLM model dtype")
    if str(p["kv_cache_dtype"]) not in ("bfloat16", "float16", "fp8"):
        raise NotImplementedError(f"kv_cache_dtype {p['kv_cache_dtype']!r} is not supported")
    num_heads, num_kv_heads = int(p["num_heads"]), int(p["num_key_value_heads"])
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads {num_heads} is not a multiple of {num_kv_heads} KV heads")
    attn_backend = str(p.get(FIELD, AUTO))
    if attn_backend != AUTO and attn_backend not in VLLM_ATTN_BACKENDS:
        raise ValueError(f"{FIELD} {attn_backend!r} is not a vLLM attention backend")
    isl, step = int(p["isl"]), int(p["step"])
    if op == "generation_attention" and isl != 1:
        raise ValueError(f"generation_attention decodes one token per sequence; isl={isl}")
    return AttentionShape(
        num_seqs=int(p["batch_size"]),
        query_len=isl,
        past_len=step,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        head_dim=int(p["head_dim"]),
        window=int(p["window_size"]),
        act_dtype=str(p["attn_dtype"]),
        kv_cache_dtype=str(p["kv_cache_dtype"]),
        attn_backend=attn_backend,
    )


def model_hf_config(
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    max_len: int,
    window: int = 0,
    dtype: str = "bfloat16",
) -> dict[str, Any]:
    """A one-layer Llama-style `config.json` whose attention matches the case.

    Metadata builders read head counts and head size from the model config; the weights
    are never loaded. The architecture is the in-process probe (see PROBE_ARCHITECTURE).
    """
    config: dict[str, Any] = {
        "architectures": [PROBE_ARCHITECTURE],
        "model_type": "llama",
        "hidden_size": num_heads * head_dim,
        "num_attention_heads": num_heads,
        "num_key_value_heads": num_kv_heads,
        "head_dim": head_dim,
        "intermediate_size": 4 * num_heads * head_dim,
        "num_hidden_layers": 1,
        "max_position_embeddings": max_len,
        "vocab_size": 32000,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "torch_dtype": dtype,
        "tie_word_embeddings": False,
    }
    if window > 0:
        config["sliding_window"] = window
    return config


@dataclass
class PagedLayout:
    """Where each sequence's tokens live in a paged KV cache (CPU tensors)."""

    block_table: torch.Tensor  # int32 [num_seqs, blocks_per_seq]
    slot_mapping: torch.Tensor  # int64 [num_tokens]: slots of this step's new tokens
    history_slots: torch.Tensor  # int64 [num_seqs * past_len]: slots of cached tokens
    query_start_loc: torch.Tensor  # int32 [num_seqs + 1]
    seq_lens: torch.Tensor  # int32 [num_seqs]
    num_blocks: int  # including the null block 0


def paged_layout(
    shape: AttentionShape, block_size: int, generator: torch.Generator | None = None
) -> PagedLayout:
    """Allocate every sequence its blocks, scattered as after allocator churn.

    Block 0 is vLLM's null block and is never handed out; the others are a random
    permutation, so consecutive blocks of a sequence are not adjacent in memory (as in a
    long-running server). Token t of sequence s lives in slot
    `block_table[s, t // block_size] * block_size + t % block_size`.
    """
    if block_size <= 0:
        raise ValueError(f"block_size must be positive, got {block_size}")
    per_seq = math.ceil(shape.seq_len / block_size)
    used = shape.num_seqs * per_seq
    perm = torch.randperm(used, generator=generator, device="cpu") + 1
    block_table = perm.view(shape.num_seqs, per_seq).to(torch.int32)

    def slots(start: int, stop: int) -> torch.Tensor:
        t = torch.arange(start, stop, dtype=torch.int64, device="cpu")
        blocks = block_table[:, t // block_size].to(torch.int64)
        return (blocks * block_size + (t % block_size)).reshape(-1)

    lens = torch.full((shape.num_seqs,), shape.seq_len, dtype=torch.int32, device="cpu")
    qsl = torch.arange(0, shape.num_seqs + 1, dtype=torch.int32, device="cpu") * shape.query_len
    return PagedLayout(
        block_table=block_table,
        slot_mapping=slots(shape.past_len, shape.seq_len),
        history_slots=slots(0, shape.past_len),
        query_start_loc=qsl,
        seq_lens=lens,
        num_blocks=used + 1,
    )


def kv_cache_tensor(
    backend: Any, spec: Any, num_blocks: int, cache_dtype: str, device: torch.device
) -> Any:
    """A zeroed KV cache: the backend's logical shape over its physical (stride) order.

    What vLLM's model runner does (v1/worker/gpu/attn_utils.py, `_reshape_attention_kv_cache`):
    allocate in the order `get_kv_cache_stride_order()` names, then permute back, so the
    kernels see the logical shape with the backend's strides.
    """
    shape = backend.get_kv_cache_shape(
        num_blocks, spec.block_size, spec.num_kv_heads, spec.head_size, cache_dtype_str=cache_dtype
    )
    try:
        order = tuple(backend.get_kv_cache_stride_order())
        if len(order) != len(shape):
            raise ValueError(f"stride order {order} does not match KV cache shape {shape}")
    except (AttributeError, NotImplementedError):
        order = tuple(range(len(shape)))
    physical = tuple(shape[i] for i in order)
    inverse = [order.index(i) for i in range(len(order))]
    return torch.zeros(physical, dtype=spec.dtype, device=device).permute(*inverse)
