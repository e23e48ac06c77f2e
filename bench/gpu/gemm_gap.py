"""The fp8 GEMM gap: what the field's vLLM GEMM latency holds that ours does not, on a GPU.

Usage (repository root, vLLM installed from the offline bundle):
    PYTHONUNBUFFERED=1 PYTHONPATH=$(cat /tmp/site/.pythonpath):. \\
        python3 bench/gpu/gemm_gap.py --out $OUT/gap.jsonl
    python3 bench/gpu/gemm_gap.py --analyse gemm-gap.jsonl --reference-dir $AIC_DATA

On the H200 our fp8 GEMMs ran at 0.88 of the field's table at the median of random shapes,
bf16 at 1.00, with the same kernel (CutlassFP8ScaledMMLinearKernel). The field's vLLM 0.24.0
GEMM collector (aiconfigurator's `collect_gemm.py`) differs from ours in three ways for fp8
(docs/backends.md, "The fp8 GEMM gap"), isolated by these variants on the same shapes
(`--cases`, default the drawn fleet shapes):

- `ours`: the collector's call (static per-tensor activation scale, vLLM's fused
  quantisation kernel) and timing;
- `dynamic`: a dynamic per-tensor activation scale, still vLLM's fused kernels (what
  `vllm serve --quantization fp8 --enforce-eager` runs);
- `dynamic_native`: the same built under the field collector's config (a default
  `VllmConfig()`, custom ops off): the quantisation as unfused torch ops;
- `field`: that, timed by the field's loop (six calls in one CUDA graph, six back-to-back
  replays, no idle time, no launch spin: `bench/gpu/field_timing.py`).

(The field's weights are a constant 0.01, ours random: not a variant here.)
Each row also lists the CUDA kernels one call launches (torch.profiler), which names the
quantisation kernels directly. `--analyse` prints, per (dtype, variant), the median of ours
/ table over the cases, and the variant whose ratio comes to 1.0 names the difference.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import markdown_table
from bench.gpu.field_timing import field_timing_ms
from bench.gpu.gap_cli import check_mode, gap_parser, variant_rows, write_rows
from bench.vllm_reference import TABLES, case_key
from collector.backends.base import Prepared
from collector.caseplan import Case, build_plan
from collector.device import ClockReader, fingerprint
from collector.failures import classify_exception
from collector.timing import Protocol, measure_cuda

HERE = Path(__file__).resolve().parent
VARIANTS = {  # name -> (activation scheme, the field's config, the field's timing loop)
    "ours": ("static", False, False),
    "dynamic": ("dynamic", False, False),
    "dynamic_native": ("dynamic", True, False),
    "field": ("dynamic", True, True),
}
DTYPES = ("bfloat16", "fp8")
TABLE_LAYERS = 6  # the field's GEMM collector: six layers per graph


def gemm_cases(path: Path) -> list[Case]:
    """The GEMM cases of a case file whose dtype the variants cover."""
    cases = build_plan(("gemm",), case_file=path).cases
    return [c for c in cases if c.params["gemm_dtype"] in DTYPES]


def launched_kernels(call: Callable[[int], Any]) -> list[str]:
    """The CUDA kernels one call launches, in order."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    call(0)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call(0)
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type.name == "CUDA"]


def field_config() -> Any:
    """The field collector's config: a default `VllmConfig()` (compilation defaults, so
    vLLM's custom ops off) with the stand-in model config it sets."""
    import torch
    from vllm.config import VllmConfig

    config = VllmConfig()
    if config.model_config is None:
        config.model_config = SimpleNamespace(
            dtype=torch.bfloat16,
            hf_text_config=SimpleNamespace(model_type=""),
            model="collector_dummy",
        )
    return config


def prepare(runtime: Any, case: Case, variant: str, l2_bytes: int) -> Prepared:
    """Our GEMM preparation with the variant's activation scheme and config."""
    from collector.backends.vllm_gemm import prepare_gemm

    scheme, field, _ = VARIANTS[variant]
    if not field:
        return prepare_gemm(runtime, case.params, l2_bytes, scheme)
    shim = SimpleNamespace(building=runtime.building, base_config=field_config())
    shim.device = runtime.device
    return prepare_gemm(shim, case.params, l2_bytes, scheme)  # type: ignore[arg-type]


def measure(
    runtime: Any, case: Case, variant: str, protocol: Protocol, clocks: ClockReader, l2: int
) -> dict[str, Any]:
    field_loop = VARIANTS[variant][2]
    row: dict[str, Any] = {"case_key": case.key, "params": case.params, "variant": variant}
    try:
        prepared = prepare(runtime, case, variant, l2)
        if field_loop:
            latency = field_timing_ms(prepared.call, TABLE_LAYERS)
        else:
            latency = statistics.median(measure_cuda(prepared, protocol, clocks, None).ms)
        row.update(
            kernel_source=prepared.kernel_source,
            latency_ms=latency,
            kernels=launched_kernels(prepared.call),
        )
    except Exception as exc:
        row.update(classification=classify_exception(exc), error=f"{type(exc).__name__}: {exc}")
    return row


def gap_table(rows: list[dict[str, Any]], reference: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (dtype, variant): the cases the table times, the median of ours / table and of
    (table - ours) in us."""
    ref = {case_key("gemm", r): float(r["latency"]) for r in reference}
    groups: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for row in rows:
        table_ms = ref.get(case_key("gemm", row["params"]))
        if "latency_ms" not in row or table_ms is None:
            continue
        group = (row["params"]["gemm_dtype"], row["variant"])
        groups.setdefault(group, []).append((float(row["latency_ms"]), table_ms))
    return [
        {
            "gemm_dtype": dtype,
            "variant": variant,
            "cases": len(pairs),
            "median_ratio": statistics.median(o / t for o, t in pairs),
            "median_gap_us": statistics.median((t - o) * 1e3 for o, t in pairs),
        }
        for (dtype, variant), pairs in sorted(groups.items())
    ]


def analyse(path: Path, reference_dir: Path, version: str) -> int:
    import pyarrow.parquet as pq

    table = pq.read_table(reference_dir / TABLES["gemm"].format(v=version)).to_pylist()
    header = ["dtype", "variant", "cases", "ours / table", "table - ours (us)"]
    rows = [
        (g["gemm_dtype"], g["variant"], g["cases"],
         f"{g['median_ratio']:.3f}", f"{g['median_gap_us']:+.2f}")
        for g in gap_table(variant_rows(path), table)
    ]  # fmt: skip
    print(markdown_table(header, rows))
    return 0


def main() -> int:
    parser = gap_parser(__doc__)
    parser.add_argument("--cases", type=Path, default=HERE / "fleet_cases.yaml")
    args = parser.parse_args()
    if check_mode(parser, args):
        return analyse(args.analyse, args.reference_dir, args.version)
    from collector.backends import vllm_runtime

    info = fingerprint(args.device)
    clocks = ClockReader(args.device, int(args.device.partition(":")[2] or 0))
    protocol = Protocol(runs=1, samples=args.samples, warmup=3, target_ci=0.0)
    runtime = vllm_runtime.runtime(args.device)
    l2 = int(info.get("l2_bytes") or 0)
    write_rows(
        args.out,
        {"device": info.get("name"), "uuid": info.get("uuid")},
        gemm_cases(args.cases),
        VARIANTS,
        lambda case, variant: measure(runtime, case, variant, protocol, clocks, l2),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
