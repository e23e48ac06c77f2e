"""Process-wide vLLM state for the vllm backend: imported once, then kept for the process.

A model worker sets up the same state before it builds layers: a distributed world (here
of one rank), tensor/pipeline groups of one, a current `VllmConfig` (kept entered for the
whole process, so custom ops and kernels that consult it at call time find one), and the
default torch dtype while layers are created. Importing this module imports vLLM, which
takes about 20 s cold; `vllm_backend` imports it on the first prepared case only.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import socket
import tempfile
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Before vLLM reads its environment: an offline, quiet process. The user's values win.
for _key, _value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "VLLM_LOGGING_LEVEL": "WARNING",
}.items():
    os.environ.setdefault(_key, _value)

import torch  # noqa: E402
import vllm  # noqa: E402
from vllm.config import set_current_vllm_config  # noqa: E402
from vllm.distributed import (  # noqa: E402
    ensure_model_parallel_initialized,
    init_distributed_environment,
)
from vllm.distributed.parallel_state import model_parallel_is_initialized  # noqa: E402
from vllm.engine.arg_utils import EngineArgs  # noqa: E402
from vllm.utils.torch_utils import set_default_torch_dtype  # noqa: E402

from collector.backends.framework_backend import PerProcess, bind_cuda  # noqa: E402
from collector.backends.vllm_support import (  # noqa: E402
    ACT_DTYPES,
    PROBE_ARCHITECTURE,
    model_hf_config,
)

# What building a GEMM layer and its first call import; vLLM imports them lazily, so a
# fresh worker paid them on its first case (on the H200: 2.1-2.5 s on its first vLLM case).
# Imported with this module, a forkserver imports them once for every worker it forks; none
# makes a CUDA context. FlashInfer's GEMM module (3 s on a first block-FP8 case) is left
# out: on a GPU machine its import makes one, and no forked worker could use CUDA then.
FIRST_CASE_MODULES = (
    "vllm.model_executor.layers.linear",
    "vllm.model_executor.layers.quantization.fp8",
)
for _module in FIRST_CASE_MODULES:
    importlib.import_module(_module)


def _eager_weight_requantisation() -> None:
    """Run vLLM's block-FP8 weight requantisation eagerly rather than `torch.compile`d.

    With power-of-two scales (VLLM_USE_DEEP_GEMM_E8M0, on by default) a block-FP8 layer's
    `process_weights_after_loading` requantises its weight through
    `vllm.utils.deep_gemm.per_block_cast_to_fp8`, a `torch.compile(dynamic=True)` function
    that every fresh worker compiled again: 2.6-4.6 s on its first block-FP8 case and
    0.9-1.8 s on the next shapes, on the H200. It prepares weights and is never timed, so
    its own eager body (the same torch ops) gives the same weights and scales for free.
    `requant_weight_ue8m0_inplace` looks it up at call time, so rebinding the module
    attribute reaches it.
    """
    import vllm.utils.deep_gemm as deep_gemm

    compiled = deep_gemm.per_block_cast_to_fp8
    deep_gemm.per_block_cast_to_fp8 = getattr(compiled, "_torchdynamo_orig_callable", compiled)


_eager_weight_requantisation()

# The KV cache page size. vLLM's serving default on CUDA is 16; the field's H200 tables
# (aiconfigurator, vLLM 0.24.0) were collected with 64, so 64 keeps rows comparable.
BLOCK_SIZE_ENV = "COLLECTBOT_VLLM_BLOCK_SIZE"
DEFAULT_BLOCK_SIZE = 64
# Model length and concurrent sequences the configs allow; they size a few metadata
# buffers only (FlashInfer page tables: max_num_seqs x max_len / block_size int32).
MAX_MODEL_LEN = 262144
MAX_NUM_SEQS = 2048
# Attention configs kept alive at once (each holds a registered layer and a builder).
MAX_ATTENTION_ENTRIES = 8


def block_size() -> int:
    raw = os.environ.get(BLOCK_SIZE_ENV, "").strip()
    if not raw:
        return DEFAULT_BLOCK_SIZE
    if not raw.isdigit() or int(raw) % 16:
        raise ValueError(f"${BLOCK_SIZE_ENV} must be a multiple of 16, got {raw!r}")
    return int(raw)


@dataclass(frozen=True)
class AttentionKey:
    num_heads: int
    num_kv_heads: int
    head_dim: int
    act_dtype: str
    cache_dtype: str  # vLLM's --kv-cache-dtype
    window: int
    block_size: int
    attention_backend: str | None = None  # EngineArgs' attention_backend; None: vLLM selects


@dataclass
class AttentionEntry:
    """A registered Attention layer and the config it lives in, reused across cases."""

    vllm_config: Any
    layer: Any
    backend: Any
    layer_name: str


class VllmRuntime:
    """One per process: call `runtime(device)`."""

    def __init__(self, device: str) -> None:
        self.index = bind_cuda("vllm", device)
        self.device = torch.device(device)
        self.version = str(vllm.__version__)
        self._stack = contextlib.ExitStack()
        self._tmp = Path(tempfile.mkdtemp(prefix="collectbot-vllm-"))
        self._attention: OrderedDict[AttentionKey, AttentionEntry] = OrderedDict()
        self._register_probe_architecture()
        # The config linear layers are built under: a one-layer bf16 model, run eagerly.
        # Eager (compilation mode NONE) keeps vLLM's custom ops on, so a linear layer's
        # activation quantization is vLLM's CUDA kernel (as `--enforce-eager` runs it)
        # rather than the torch-native fallback that torch.compile would otherwise fuse.
        self.base_config = self._engine_config(
            model_hf_config(32, 8, 128, MAX_MODEL_LEN), cache_dtype="auto", enforce_eager=True
        )
        self._stack.enter_context(set_current_vllm_config(self.base_config))
        self._init_distributed()

    # -- set-up -----------------------------------------------------------------------
    @staticmethod
    def _register_probe_architecture() -> None:
        """Register Llama under the probe name, as an out-of-tree model would be.

        A lazily registered architecture is inspected in a subprocess that imports vLLM
        again (about 20 s on a fresh machine); a class registered in-process is not.
        """
        from vllm import ModelRegistry
        from vllm.model_executor.models.llama import LlamaForCausalLM

        if PROBE_ARCHITECTURE not in ModelRegistry.get_supported_archs():
            ModelRegistry.register_model(PROBE_ARCHITECTURE, LlamaForCausalLM)

    def _init_distributed(self) -> None:
        if model_parallel_is_initialized():
            return
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        init_distributed_environment(
            world_size=1,
            rank=0,
            distributed_init_method=f"tcp://127.0.0.1:{port}",
            local_rank=self.index,
            backend="nccl",
        )
        ensure_model_parallel_initialized(1, 1)

    def _engine_config(
        self,
        hf_config: dict[str, Any],
        cache_dtype: str,
        block: int | None = None,
        dtype: str = "bfloat16",
        enforce_eager: bool = False,
        attention_backend: str | None = None,
    ) -> Any:
        """A VllmConfig built the way `vllm serve` builds one, from engine arguments.

        Attention configs keep serving's defaults (CUDA graphs on), which set how the
        metadata builders plan kernels (FA3's split bound for graph-sized batches).
        `attention_backend` becomes `attention_config.backend`, which vLLM's selector obeys
        (vLLM 0.24.0 reads no VLLM_ATTENTION_BACKEND variable any more).
        """
        model_dir = Path(tempfile.mkdtemp(prefix="model-", dir=self._tmp))
        (model_dir / "config.json").write_text(json.dumps(hf_config, indent=1))
        args = EngineArgs(
            model=str(model_dir),
            tokenizer=str(model_dir),
            skip_tokenizer_init=True,
            load_format="dummy",
            dtype=dtype,
            seed=0,
            max_model_len=int(hf_config["max_position_embeddings"]),
            kv_cache_dtype=cache_dtype,
            block_size=block if block is not None else block_size(),
            max_num_seqs=MAX_NUM_SEQS,
            enforce_eager=enforce_eager,
            attention_backend=attention_backend,
        )
        return args.create_engine_config()

    # -- per-case helpers ----------------------------------------------------------------
    @contextlib.contextmanager
    def building(self, vllm_config: Any, dtype: torch.dtype) -> Iterator[None]:
        """The model loader's context: current config, default dtype, target device."""
        with (
            set_current_vllm_config(vllm_config),
            set_default_torch_dtype(dtype),
            self.device,
        ):
            yield

    def attention_entry(self, key: AttentionKey) -> AttentionEntry:
        entry = self._attention.get(key)
        if entry is not None:
            self._attention.move_to_end(key)
            return entry
        from vllm.model_executor.layers.attention import Attention

        hf = model_hf_config(
            key.num_heads,
            key.num_kv_heads,
            key.head_dim,
            MAX_MODEL_LEN,
            key.window,
            key.act_dtype,
        )
        cfg = self._engine_config(
            hf,
            key.cache_dtype,
            key.block_size,
            key.act_dtype,
            attention_backend=key.attention_backend,
        )
        name = "model.layers.0.self_attn.attn"
        with self.building(cfg, ACT_DTYPES[key.act_dtype]):
            layer = Attention(
                num_heads=key.num_heads,
                head_size=key.head_dim,
                scale=key.head_dim**-0.5,
                num_kv_heads=key.num_kv_heads,
                cache_config=cfg.cache_config,
                per_layer_sliding_window=key.window or None,
                prefix=name,
            )
            # What the loader does for attention modules after the weights are in.
            layer.process_weights_after_loading(ACT_DTYPES[key.act_dtype])
        entry = AttentionEntry(cfg, layer, layer.attn_backend, name)
        self._attention[key] = entry
        while len(self._attention) > MAX_ATTENTION_ENTRIES:
            self._attention.popitem(last=False)
        return entry


_RUNTIME = PerProcess("vLLM", VllmRuntime)


def runtime(device: str) -> VllmRuntime:
    """The process's runtime; one device per process."""
    return _RUNTIME.get(device)
