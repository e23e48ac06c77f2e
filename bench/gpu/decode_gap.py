"""The decode gap: what the field's decode latency holds that ours does not, measured on a GPU.

Usage (repository root, vLLM installed from the offline bundle):
    PYTHONUNBUFFERED=1 PYTHONPATH=$(cat /tmp/site/.pythonpath):. \\
        python3 bench/gpu/decode_gap.py --out $OUT/gap.jsonl

For every generation-attention case of the built-in `vllm` set (and the same shapes through
each `--attn-backend`), it times five variants of the same prepared case, and writes one
JSON line per (case, variant):

- `ours`: the collector's timed call (KV-cache update + attention kernel; with an FP8 KV
  cache the query is quantised once, before timing), in a CUDA graph;
- `quant`: the same plus the layer's query quantisation in every call, as
  `Attention.forward` runs it each decode step;
- `ours_eager`, `quant_eager`: both without CUDA graphs (one launch per kernel, host
  launch cost included), as a collector that times eager calls sees them;
- `field`: the collector's call timed as the field's attention collector times
  `impl.forward`: one call per CUDA graph, six replays back to back, no launch spin
  (`bench/gpu/field_timing.py`), so that each replay's launch can show in the time.

`--analyse gap.jsonl --reference-dir $AIC_DATA` joins the rows with the field's H200 vLLM
table and prints, per (backend, KV dtype, variant), the median ratio and the median
difference in us over the cases the table times under 20 us (docs/backends.md, "The decode
gap"): the variant whose ratio comes to 1.0 names what the table's latency holds.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import markdown_table
from bench.gpu.field_timing import field_timing_ms
from bench.gpu.gap_cli import check_mode, gap_parser, variant_rows, write_rows
from bench.vllm_reference import TABLES, case_key
from collector.attn_backends import AUTO
from collector.backends import get_backend
from collector.caseplan import Case, build_plan
from collector.device import ClockReader, fingerprint
from collector.errors import UserError
from collector.failures import classify_exception
from collector.timing import Protocol, measure_cuda

VARIANTS = {  # name -> (query quantisation timed, CUDA graphs, the field's timing loop)
    "ours": (False, True, False),
    "quant": (True, True, False),
    "ours_eager": (False, False, False),
    "quant_eager": (True, False, False),
    "field": (False, True, True),
}


def decode_cases(backends: list[str]) -> list[Case]:
    plan = build_plan(["generation_attention"], case_set="vllm")
    return [
        c if b == AUTO else c.with_values({"attn_backend": b}) for b in backends for c in plan.cases
    ]


def measure(
    runtime: Any, case: Case, variant: str, protocol: Protocol, clocks: ClockReader
) -> dict[str, Any]:
    from collector.backends.vllm_attention import prepare_attention

    timed_quant, graphs, field_loop = VARIANTS[variant]
    row: dict[str, Any] = {"case_key": case.key, "params": case.params, "variant": variant}
    try:
        prepared = prepare_attention(runtime, case.op, case.params, timed_query_quant=timed_quant)
        if field_loop:
            latency, mode = field_timing_ms(prepared.call, calls=1), "field-graph"
        else:
            samples = measure_cuda(prepared, replace(protocol, use_graphs=graphs), clocks, None)
            latency, mode = statistics.median(samples.ms), samples.timing_mode
        row.update(kernel_source=prepared.kernel_source, timing_mode=mode, latency_ms=latency)
    except Exception as exc:
        row.update(classification=classify_exception(exc), error=f"{type(exc).__name__}: {exc}")
    return row


def gap_table(
    rows: list[dict[str, Any]], reference: list[dict[str, Any]], under_ms: float = 0.020
) -> list[dict[str, Any]]:
    """Per (backend, KV dtype, variant): cases the table times under `under_ms`, the median
    of ours / table and of (table - ours) in us."""
    op = "generation_attention"
    ref = {case_key(op, r): float(r["latency"]) for r in reference}
    groups: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    for row in rows:
        if "latency_ms" not in row:
            continue
        table_ms = ref.get(case_key(op, row["params"]))
        if table_ms is None or table_ms >= under_ms:
            continue
        params = row["params"]
        group = (params.get("attn_backend", AUTO), params["kv_cache_dtype"], row["variant"])
        groups.setdefault(group, []).append((float(row["latency_ms"]), table_ms))
    return [
        {
            "attn_backend": b,
            "kv_cache_dtype": kv,
            "variant": v,
            "cases": len(pairs),
            "median_ratio": statistics.median(o / t for o, t in pairs),
            "median_gap_us": statistics.median((t - o) * 1e3 for o, t in pairs),
        }
        for (b, kv, v), pairs in sorted(groups.items())
    ]


def analyse(path: Path, reference_dir: Path, version: str) -> int:
    import pyarrow.parquet as pq

    table = reference_dir / TABLES["generation_attention"].format(v=version)
    header = ["backend", "KV", "variant", "cases < 20 us", "ours / table", "table - ours (us)"]
    gaps = gap_table(variant_rows(path), pq.read_table(table).to_pylist())
    rows = [
        (g["attn_backend"], g["kv_cache_dtype"], g["variant"], g["cases"],
         f"{g['median_ratio']:.3f}", f"{g['median_gap_us']:+.2f}")
        for g in gaps
    ]  # fmt: skip
    print(markdown_table(header, rows))
    return 0


def main() -> int:
    parser = gap_parser(__doc__)
    parser.add_argument(
        "--attn-backend", action="append", default=None, help="auto (default), FLASHINFER, ..."
    )
    args = parser.parse_args()
    if check_mode(parser, args):
        return analyse(args.analyse, args.reference_dir, args.version)
    try:
        backend = get_backend("vllm")  # the version gate
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from collector.backends import vllm_runtime

    info = fingerprint(args.device)
    clocks = ClockReader(args.device, int(args.device.partition(":")[2] or 0))
    protocol = Protocol(runs=1, samples=args.samples, warmup=3, idle_ratio=0.5, target_ci=0.0)
    runtime = vllm_runtime.runtime(args.device)
    write_rows(
        args.out,
        {"device": info.get("name"), "vllm": backend.framework_version()},
        decode_cases(args.attn_backend or [AUTO]),
        VARIANTS,
        lambda case, variant: measure(runtime, case, variant, protocol, clocks),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
