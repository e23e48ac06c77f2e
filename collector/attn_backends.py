"""The attention backend as a case dimension: vLLM's backend names, the default, the run option.

A case may name the backend vLLM dispatches its attention through (`attn_backend`); `auto`
(the default) leaves the choice to vLLM's selector, and is left out of the case key so that
keys of cases without the field never change. The names are static (vLLM 0.24.0, the pin), so
a wrong one is refused when the plan is built; tests/test_attn_backend.py checks them against
the installed vLLM's own registry where it imports.
"""

from __future__ import annotations

from dataclasses import dataclass

from collector.settings import setting

FIELD = "attn_backend"
AUTO = "auto"
# vLLM 0.24.0's non-MLA attention backends on SM90, in its priority order (platforms/cuda.py,
# `_get_backend_priorities`, use_mla=False, major != 10), less TURBOQUANT: it runs only with a
# `turboquant_*` KV cache dtype, which no case can name.
VLLM_ATTN_BACKENDS = ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION")
ATTN_BACKENDS = (AUTO, *VLLM_ATTN_BACKENDS)
# Collector backends that honour the field; any other refuses a plan that names a backend.
HONOURED_BY = ("vllm",)


@dataclass(frozen=True)
class Dispatch:
    """Run-wide dispatch choices (`collectbot collect` options)."""

    attn_backend: str = setting(
        AUTO,
        choices=ATTN_BACKENDS,
        help="vLLM attention backend for every attention case that names none (auto: vLLM's "
        "selector). Recorded in each row and part of the case key.",
    )
