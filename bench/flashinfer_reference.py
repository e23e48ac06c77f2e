"""Check flashinfer-backend rows against references: other backends' records of the same
cases on the same machine, and the field's H200 vLLM tables.

Usage:
    python -m bench.flashinfer_reference FI_RECORD [FI_RECORD ...]
        [--against RECORD ...] [--reference-dir DIR]
        [--version 0.24.0] [--no-tables] [--json out.json] [--markdown out.md]

Records are run record directories or tars of one (as `bench/gpu/flashinfer_session.sh`
writes them). Each `--against` record (the torch or vllm backend, same machine) is a
reference of its own; the aiconfigurator tables are the other (vLLM 0.24.0 on an H200: no
FlashInfer attention rows there, so attention is compared with vLLM's FlashAttention-3
kernels and GEMM with cuBLAS / CUTLASS / DeepGEMM / FlashInfer block-FP8, as the table
names them). Per reference and (op, dtype): matched rows, the median and p10/p90 of
latency / reference latency, the share within 5%, and the kernel pairs.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from bench import reference_data
from bench.vllm_reference import (
    TABLES,
    GroupResult,
    compare_rows,
    markdown,
    rows_from_record,
)


@contextmanager
def record_dir(path: Path) -> Iterator[Path]:
    """A run record directory from a directory or a tar holding one."""
    if path.is_dir():
        yield path
        return
    if not tarfile.is_tarfile(path):
        raise SystemExit(f"error: {path}: neither a run record directory nor a tar of one")
    with tempfile.TemporaryDirectory(prefix="fi-ref-") as tmp:
        with tarfile.open(path) as tar:
            tar.extractall(tmp, filter="data")
        found = sorted(p.parent for p in Path(tmp).rglob("run.json"))
        if len(found) != 1:
            raise SystemExit(f"error: {path}: holds {len(found)} run records, expected 1")
        yield found[0]


def load_rows(paths: Sequence[Path]) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """Rows per op of all records, and each record's `backend framework_version` label."""
    rows: dict[str, list[dict[str, Any]]] = {}
    labels = []
    with ExitStack() as stack:
        for path in paths:
            directory = stack.enter_context(record_dir(path))
            meta = json.loads((directory / "run.json").read_text())
            labels.append(f"{meta.get('backend')} {meta.get('framework_version')}")
            for op, op_rows in rows_from_record(directory).items():
                rows.setdefault(op, []).extend(op_rows)
    return rows, labels


def compare(
    ours: dict[str, list[dict[str, Any]]], reference: dict[str, list[dict[str, Any]]]
) -> list[GroupResult]:
    results: list[GroupResult] = []
    for op in sorted(ours):
        if op in reference:
            results += compare_rows(op, ours[op], reference[op])
    return results


def table_rows(reference_dir: Path, version: str, ops: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for op in ops:
        path = reference_dir / TABLES[op].format(v=version)
        if path.is_file():
            out[op] = pq.read_table(path).to_pylist()
    return out


def report(sections: Sequence[tuple[str, list[GroupResult]]]) -> str:
    parts = []
    for title, results in sections:
        parts.append(f"### flashinfer vs {title}\n\n{markdown(results)}\n")
        pairs = [
            f"- {g.op}/{g.dtype}: `{pair}`: {count}"
            for g in results
            for pair, count in sorted(g.kernel_pairs.items())
        ]
        if pairs:
            parts.append("Kernel pairs (ours | reference):\n\n" + "\n".join(pairs) + "\n")
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="flashinfer run records (dir or tar).")
    parser.add_argument(
        "--against",
        type=Path,
        action="append",
        default=[],
        help="Another backend's record of the same cases (dir or tar); repeatable.",
    )
    parser.add_argument("--reference-dir", type=Path, default=reference_data.default_dir())
    parser.add_argument("--version", default="0.24.0", help="vLLM version of the tables.")
    parser.add_argument("--no-tables", action="store_true", help="Skip the field's tables.")
    parser.add_argument("--json", type=Path, help="Also write the results as JSON.")
    parser.add_argument("--markdown", type=Path, help="Also write the report as Markdown.")
    args = parser.parse_args()
    ours, labels = load_rows(args.runs)
    sections: list[tuple[str, list[GroupResult]]] = []
    for path in args.against:
        reference, ref_labels = load_rows([path])
        sections.append((f"{ref_labels[0]} ({path.name})", compare(ours, reference)))
    if not args.no_tables and args.reference_dir is None:
        print(
            f"no field tables (--reference-dir, ${reference_data.ENV}): records only",
            file=sys.stderr,
        )
    elif not args.no_tables:
        tables = table_rows(args.reference_dir, args.version, sorted(ours))
        if tables:
            title = f"aiconfigurator H200 vLLM {args.version} tables"
            sections.append((title, compare(ours, tables)))
    text = f"Records: {', '.join(labels)}\n\n" + report(sections)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:
        payload = {title: [asdict(g) for g in results] for title, results in sections}
        args.json.write_text(json.dumps(payload, indent=1))


if __name__ == "__main__":
    main()
