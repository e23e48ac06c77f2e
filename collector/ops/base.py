"""What every op declares so that plans, records and comparisons can treat ops alike."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Params = Mapping[str, Any]

# Every dtype name a case may give (a backend may still not support one: that is an
# `unsupported` outcome); anything else is a typo, refused when the plan is built.
KNOWN_DTYPES = frozenset(
    {"float32", "float16", "bfloat16", "fp8", "fp8_block", "int8", "int4", "nvfp4"}
)


@dataclass(frozen=True)
class OptionalField:
    """A case field a case may leave out; at its default it is left out of the case key (so
    keys of cases written before the field existed stay the same)."""

    name: str
    type: type
    default: Any
    choices: tuple[Any, ...] = ()


@dataclass(frozen=True)
class OpSpec:
    """An op's contract.

    `fields` are the case fields in the order of the field's de-facto perf tables (they are
    also the parquet column names); `dtype_field` names the field whose value is the case's
    dtype family, used to group failures and aggregate ratios.
    """

    name: str
    fields: tuple[tuple[str, type], ...]
    dtype_field: str
    flops: Callable[[Params], float]
    bytes_moved: Callable[[Params], float]
    # Integer fields that may be zero (all others must be positive).
    zero_ok: frozenset[str] = frozenset()
    # The field naming the dtype the math runs in (for the roofline peak); default dtype_field.
    compute_dtype_field: str | None = None
    # Fields after `fields` that a case may leave out (see OptionalField).
    optional: tuple[OptionalField, ...] = ()

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.fields)

    @property
    def optional_defaults(self) -> dict[str, Any]:
        return {f.name: f.default for f in self.optional}

    def with_defaults(self, params: Params) -> dict[str, Any]:
        """A case's values with every optional field filled (what a perf row records)."""
        return {**self.optional_defaults, **params}

    def case_params(self, row: Params) -> dict[str, Any]:
        """The case values held in a perf row: every field, and the optional ones it has."""
        params = {name: row[name] for name in self.field_names}
        params.update({f.name: row[f.name] for f in self.optional if row.get(f.name) is not None})
        return params

    @property
    def dtype_fields(self) -> tuple[str, ...]:
        """The fields whose values are dtype names (`gemm_dtype`, `kv_cache_dtype`...)."""
        return tuple(name for name in self.field_names if name.endswith("dtype"))

    def dtype_of(self, params: Params) -> str:
        return str(params[self.dtype_field])

    def compute_dtype_of(self, params: Params) -> str:
        return str(params[self.compute_dtype_field or self.dtype_field])
