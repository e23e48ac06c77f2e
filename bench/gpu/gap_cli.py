"""The command line the gap scripts share (decode_gap.py, gemm_gap.py): measure variants on a
GPU into JSON lines, or analyse those lines against the field's tables on any machine."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


def gap_parser(doc: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", type=Path, help="JSON lines file to write.")
    parser.add_argument("--analyse", type=Path, help="Read these JSON lines, print the table.")
    parser.add_argument("--reference-dir", type=Path, help="The field's perf tables ($AIC_DATA).")
    parser.add_argument("--version", default="0.24.0", help="vLLM version of the tables.")
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--samples", type=int, default=8)
    return parser


def check_mode(parser: argparse.ArgumentParser, args: argparse.Namespace) -> bool:
    """True to analyse, False to measure; a missing path is the parser's one-line error."""
    if args.analyse:
        if args.reference_dir is None:
            parser.error("--analyse needs --reference-dir")
        return True
    if args.out is None:
        parser.error("--out is required to measure")
    return False


def variant_rows(path: Path) -> list[dict[str, Any]]:
    """The measured rows of a JSON lines file (its header line left out)."""
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return [x for x in lines if "variant" in x]


def write_rows(
    path: Path,
    header: dict[str, Any],
    cases: Iterable[Any],
    variants: Iterable[str],
    measure: Callable[[Any, str], dict[str, Any]],
) -> None:
    """Measure every (case, variant) into a JSON lines file after a header line, printing a
    progress line per row; each row is flushed as it comes (a cut-short call keeps them)."""
    start = time.monotonic()
    names = list(variants)
    with path.open("w") as out:
        out.write(json.dumps(header) + "\n")
        for case in cases:
            for variant in names:
                row = measure(case, variant)
                out.write(json.dumps(row) + "\n")
                out.flush()
                ms = row.get("latency_ms")
                shown = f"{ms * 1e3:.2f} us" if ms else str(row.get("error", ""))[:120]
                print(f"[{time.monotonic() - start:6.1f}s] {variant:17s} {case.key}: {shown}")
