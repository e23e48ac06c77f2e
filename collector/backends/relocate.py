"""Another buffer set without building the op again: its tensors copied to fresh memory.

A run over several buffer sets (collector/timing.py) needs the op's tensors at new
addresses. Building vLLM's fp8 layers again cost 15-20 ms a set on the H200, more than the
set's graph capture and samples (docs/benchmarks.md). A captured CUDA graph keeps the
addresses it was captured with, so once a set's graph is captured its op's tensors can move:
the next set's graph then reads the copies. The tensors moved away are handed back, for the
caller to keep alive while the graph that reads them may replay.
"""

from __future__ import annotations

import types
from collections.abc import Iterable
from typing import Any

import torch

# How deep to follow plain objects from a module (its quant method, the method's kernel,
# the kernel's base and fallback): tensors further away are left where they are.
DEPTH = 4
_SKIP = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, str, bytes)


def move_tensors(roots: Iterable[Any]) -> list[torch.Tensor]:
    """Give each tensor the roots hold a fresh copy, in place: parameters (their `.data`),
    buffers, and tensors in the attributes, lists and dicts of the modules and plain objects
    reachable from them. Returns the tensors moved away."""
    moved: list[torch.Tensor] = []
    seen: set[int] = set()
    for root in roots:
        _move(root, DEPTH, moved, seen)
    return moved


def _move(obj: Any, depth: int, moved: list[torch.Tensor], seen: set[int]) -> None:
    if depth < 0 or id(obj) in seen or isinstance(obj, _SKIP):
        return
    seen.add(id(obj))
    if isinstance(obj, torch.nn.Module):
        for param in obj._parameters.values():
            if param is not None:
                _move_parameter(param, moved, seen)
        for name, buffer in list(obj._buffers.items()):
            if buffer is not None:
                moved.append(buffer)
                obj._buffers[name] = buffer.clone()
        for child in obj._modules.values():
            _move(child, depth, moved, seen)
    if isinstance(obj, list):
        for i, item in enumerate(obj):
            obj[i] = _moved_or_walked(item, depth, moved, seen)
    elif isinstance(obj, dict):
        for key, item in list(obj.items()):
            obj[key] = _moved_or_walked(item, depth, moved, seen)
    elif hasattr(obj, "__dict__") and not isinstance(obj, torch.Tensor):
        attributes = vars(obj)
        for key, item in list(attributes.items()):
            if key.startswith("_") and isinstance(obj, torch.nn.Module):
                continue  # parameters, buffers and children: walked above
            attributes[key] = _moved_or_walked(item, depth, moved, seen)


def _moved_or_walked(item: Any, depth: int, moved: list[torch.Tensor], seen: set[int]) -> Any:
    """A plain tensor's copy (the tensor joins `moved`), or the item walked one level down."""
    if isinstance(item, torch.nn.Parameter):
        _move_parameter(item, moved, seen)
        return item
    if isinstance(item, torch.Tensor):
        if id(item) in seen:
            return item
        seen.add(id(item))
        moved.append(item)
        copy = item.clone()
        seen.add(id(copy))
        return copy
    _move(item, depth - 1, moved, seen)
    return item


def _move_parameter(param: torch.nn.Parameter, moved: list[torch.Tensor], seen: set[int]) -> None:
    if id(param) not in seen:
        seen.add(id(param))
        moved.append(param.data)
        param.data = param.data.clone()
