"""A buffer set moved instead of built again: every tensor the op reads gets fresh memory.

`move_tensors` copies the parameters, buffers and tensor attributes of modules, of plain
objects they hold (vLLM's quant method and its kernel) and of lists (the activations), and
hands back what it moved, for the caller to keep alive while a graph captured on it may
replay. With vLLM 0.24.0 installed, it moves the real layers' parameters of each GEMM dtype.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from collector.backends.base import Prepared
from collector.backends.relocate import move_tensors
from collector.measure import relocated
from tests.vllm_subprocess import vllm_probe


class Kernel:
    """Stands for a quant method's kernel: a plain object holding a tensor."""

    def __init__(self) -> None:
        self.workspace = torch.arange(8.0)


def test_every_tensor_an_op_reads_moves_and_keeps_its_values() -> None:
    layer: Any = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    layer.kernel = Kernel()  # an attribute, as vLLM sets them
    xs = [torch.randn(2, 4), torch.randn(2, 4)]
    tensors = [*layer.parameters(), *layer.buffers(), layer.kernel.workspace, *xs]
    values = [t.clone() for t in tensors]
    addresses = {t.data_ptr() for t in tensors}
    weight = layer[0].weight
    layer.eval()
    want = [layer(x) for x in xs]

    moved = move_tensors([layer, xs])

    now = [*layer.parameters(), *layer.buffers(), layer.kernel.workspace, *xs]
    assert {t.data_ptr() for t in now}.isdisjoint(addresses)
    assert all(torch.equal(a, b) for a, b in zip(now, values, strict=True))
    assert {t.data_ptr() for t in moved} == addresses
    assert layer[0].weight is weight  # the same Parameter, on new memory
    assert all(torch.equal(layer(x), w) for x, w in zip(xs, want, strict=True))


def test_a_set_whose_move_fails_is_prepared_afresh() -> None:
    def refuse() -> Prepared:
        raise RuntimeError("the relocated layer computed other outputs")

    moved = Prepared(call=lambda i: None, copies=1, kernel_source="k")
    assert relocated(Prepared(call=lambda i: None, copies=1, kernel_source="k")) is None
    assert relocated(Prepared(lambda i: None, 1, "k", relocate=refuse)) is None
    assert relocated(Prepared(lambda i: None, 1, "k", relocate=lambda: moved)) is moved


PROBE = """
import json, torch
from bench.vllm_dry_run import _pretend_h200, cpu_runtime
_pretend_h200()
import collector.backends.vllm_gemm as gemm
from collector.backends.relocate import move_tensors
rt = cpu_runtime("relocate")
out = {}
for dtype in ("bfloat16", "fp8", "fp8_block"):
    built = []
    build = gemm.build_layer
    gemm.build_layer = lambda *a, **k: built.append(build(*a, **k)) or built[-1]
    try:
        gemm.prepare_gemm(rt, {"m": 16, "n": 256, "k": 256, "gemm_dtype": dtype}, 0)
    finally:
        gemm.build_layer = build
    layer = built[0]
    before = {n: (p.data_ptr(), p.data.clone()) for n, p in layer.named_parameters()}
    move_tensors([layer])
    now = dict(layer.named_parameters())
    out[dtype] = {"params": sorted(before),
                  "all_moved": all(now[n].data_ptr() != before[n][0] for n in before),
                  "equal": all(torch.equal(now[n].data, before[n][1]) for n in before)}
checks, equal = [], torch.equal
torch.equal = lambda a, b: checks.append(1) or equal(a, b)
first = gemm.prepare_gemm(rt, {"m": 16, "n": 256, "k": 256, "gemm_dtype": "bfloat16"}, 0)
moved = [first.relocate()]
after_first = len(checks)
for _ in range(3):
    moved.append(moved[-1].relocate())
torch.equal = equal
out["checks"] = {"copies": first.copies, "first": after_first, "all": len(checks),
                 "distinct": len({id(t) for m in moved for t in m.holds})}
print(json.dumps(out))
"""


@pytest.mark.parametrize(
    ("dtype", "params"),
    [
        ("bfloat16", ["weight"]),
        ("fp8", ["input_scale", "weight", "weight_scale"]),
        ("fp8_block", ["weight", "weight_scale_inv"]),
    ],
)
def test_vllm_layers_of_each_gemm_dtype_move_every_parameter(dtype: str, params: Any) -> None:
    found = _layers()[dtype]
    assert found["params"] == params
    assert found["all_moved"] is True
    assert found["equal"] is True


_CACHE: dict[str, Any] = {}


def _layers() -> dict[str, Any]:
    if not _CACHE:
        _CACHE.update(vllm_probe(["-c", PROBE]))
    return _CACHE


def test_only_a_runs_first_move_is_checked_against_the_layers_outputs() -> None:
    # Each check costs the layer's calls and a sync; later moves move the same tensors.
    checks = _layers()["checks"]
    assert checks["first"] == checks["all"] == checks["copies"] >= 1
    assert checks["distinct"] >= 4  # every move handed back tensors of its own
