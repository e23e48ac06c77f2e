"""Real scale: import two aiconfigurator GEMM tables (vLLM 0.19.0 and 0.24.0 on H200), compare.

Usage: python -m bench.bench_import_aic [--data DIR] [--cli]

Reads the tables from `--data` (default `$COLLECTBOT_AIC_DATA`) at run time (they are never
copied into the repository). Prints one JSON object: seconds per stage in one process, and
with --cli also the wall time of the three commands a user types (`collectbot import-aic`
twice, then `collectbot compare`), plus matched / added / removed cases, per-dtype
geometric-mean ratios and the dispatch (kernel_source) changes.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import reference_data
from bot.compare.comparison import compare_runs
from bot.importers.aic import import_aic
from bot.render.comment import render_comment
from collector.record import read_record

OLD = "h200_sxm_gemm_vllm_0.19.0_gemm_perf.parquet"
NEW = "h200_sxm_gemm_vllm_0.24.0_gemm_perf.parquet"


def _cli(data: Path, root: Path) -> float:
    exe = [sys.executable, "-m", "bot"]
    t0 = time.perf_counter()
    for name, out in ((OLD, "old"), (NEW, "new")):
        subprocess.run([*exe, "import-aic", str(data / name), "--out", str(root / out)], check=True)
    subprocess.run(
        [*exe, "compare", str(root / "old"), str(root / "new"), "--out", str(root / "cmp")],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - t0


def run(data: Path, root: Path) -> dict[str, Any]:
    """Import both tables into `root`, compare and render; the figures as a dict."""
    t0 = time.perf_counter()
    import_aic([data / OLD], root / "old")
    import_aic([data / NEW], root / "new")
    t1 = time.perf_counter()
    old, new = read_record(root / "old"), read_record(root / "new")
    t2 = time.perf_counter()
    result = compare_runs(old, new)
    t3 = time.perf_counter()
    result.write(root / "cmp")
    t4 = time.perf_counter()
    body = render_comment(result.data)
    t5 = time.perf_counter()
    latency = result.data["latency"]
    summary = latency["summary"]
    return {
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "import_s": round(t1 - t0, 3),
        "read_s": round(t2 - t1, 3),
        "compare_s": round(t3 - t2, 3),
        "write_s": round(t4 - t3, 3),
        "render_s": round(t5 - t4, 3),
        "total_s": round(t5 - t0, 3),
        "rows": {"0.19.0": old.perf["gemm"].num_rows, "0.24.0": new.perf["gemm"].num_rows},
        "matched": summary["matched"],
        "added": summary["added"],
        "removed": summary["removed"],
        "verdicts": summary["verdicts"],
        "by_dtype": [
            {
                "dtype": g["dtype"],
                "cases": g["cases"],
                "geomean": round(g["geomean"], 4),
                "ci": [round(g["lo"], 4), round(g["hi"], 4)],
            }
            for g in latency["by_dtype"]
        ],
        "dispatch_changes": [
            {k: d[k] for k in ("from", "to", "count")} | {"geomean": round(d["geomean"], 4)}
            for d in latency["dispatch_changes"]
        ],
        "comparison_json_bytes": (root / "cmp" / "comparison.json").stat().st_size,
        "cases_parquet_bytes": (root / "cmp" / "cases.parquet").stat().st_size,
        "comment_chars": len(body),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=reference_data.default_dir())
    parser.add_argument("--cli", action="store_true", help="also time the CLI commands")
    args = parser.parse_args()
    data = reference_data.require(args.data, "--data").resolve()
    for name in (OLD, NEW):
        if not (data / name).is_file():
            sys.exit(f"error: {data / name}: not found (pass --data)")
    with tempfile.TemporaryDirectory() as tmp:
        figures = run(data, Path(tmp))
        if args.cli:
            figures["cli_total_s"] = round(_cli(data, Path(tmp) / "cli"), 3)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
