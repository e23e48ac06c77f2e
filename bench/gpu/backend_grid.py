"""The backend x KV dtype x head_dim grid of vLLM attention records, as a markdown table.

Usage:
    python -m bench.gpu.backend_grid RUN_DIR [RUN_DIR ...]

One line per (op, attn_backend, kv_cache_dtype, head_dim): the planned cases, the rows, the
failures by classification, the kernel sources the rows name and their median latency. The
acceptance reading: every cell has rows naming a kernel, or classified failures (never an
unexplained gap).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import markdown_table
from collector.attn_backends import AUTO
from collector.record import RunRecord, read_record

ATTN_OPS = ("context_attention", "generation_attention")


@dataclass
class Cell:
    rows: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    kernels: set[str] = field(default_factory=set)
    failures: dict[str, int] = field(default_factory=dict)

    @property
    def planned(self) -> int:
        return self.rows + sum(self.failures.values())


CellKey = tuple[str, str, str, int]  # op, attn_backend, kv_cache_dtype, head_dim


def grid(records: Sequence[RunRecord]) -> dict[CellKey, Cell]:
    cells: dict[CellKey, Cell] = {}
    for record in records:
        for op in ATTN_OPS:
            if op not in record.perf:
                continue
            for row in record.perf[op].to_pylist():
                key = (op, row.get("attn_backend") or AUTO, row["kv_cache_dtype"], row["head_dim"])
                cell = cells.setdefault(key, Cell())
                cell.rows += 1
                cell.latencies_ms.append(float(row["latency"]))
                cell.kernels.add(str(row["kernel_source"]))
        for failure in record.failures:
            params = failure.params or {}
            if failure.op not in ATTN_OPS or "head_dim" not in params:
                continue
            key = (
                failure.op,
                str(params.get("attn_backend", AUTO)),
                str(params["kv_cache_dtype"]),
                int(params["head_dim"]),
            )
            cell = cells.setdefault(key, Cell())
            cell.failures[failure.classification] = cell.failures.get(failure.classification, 0) + 1
    return cells


def markdown(cells: dict[CellKey, Cell]) -> str:
    header = ["op", "backend", "KV", "head_dim", "planned", "rows", "failures", "kernel"]
    header.append("median latency")
    rows = []
    for (op, backend, kv, head), cell in sorted(cells.items()):
        failures = ", ".join(f"{k} {n}" for k, n in sorted(cell.failures.items())) or "-"
        kernels = ", ".join(f"`{k}`" for k in sorted(cell.kernels)) or "-"
        median = (
            f"{statistics.median(cell.latencies_ms) * 1e3:.1f} us" if cell.latencies_ms else "-"
        )
        rows.append((op, backend, kv, head, cell.planned, cell.rows, failures, kernels, median))
    return markdown_table(header, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="Run record directories.")
    args = parser.parse_args()
    print(markdown(grid([read_record(p) for p in args.runs])))


if __name__ == "__main__":
    main()
