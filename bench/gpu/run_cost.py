"""Where a warm worker's run of a short case spends its seconds, under protocol variants.

    PYTHONUNBUFFERED=1 PYTHONPATH=$(cat /tmp/site/.pythonpath):$PWD \\
        python3 -m bench.gpu.run_cost --out $OUT/run-cost

A short case's run over 8 buffer sets costs 0.10-0.19 s on the H200 where its timed samples
take 0.005 s (bench/gpu/process_init.py). This process warms each case below once, then
times `RUNS` runs of it under each variant of the shipped protocol: the run's wall time,
its median sample and the calls per sample. The shipped variant's runs are profiled
(cProfile, by own time) to name what the rest is. Variants change one thing each:
samples half as long, one warm-up call instead of three, no allocator cache flush (torch's
`graph` context flushes before each of a run's 8 captures, and the run once at its start),
and no NVML reads per sample.
`--out` gets `run-cost.json` and `profile.txt`. Run it where the JIT caches are warm.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import io
import json
import pstats
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.gpu.process_init import gemm_case

# Short cases of the draw of 2026-12-02 (bf16 through cuBLAS, fp8 through CUTLASS, block
# FP8 through FlashInfer and DeepGEMM), one of 50-100 us and one over 1.2 ms (one set).
CASES = (
    "bfloat16 13x32x6144",
    "bfloat16 3073x512x512",
    "fp8 81x7168x768",
    "fp8 10x1024x512",
    "fp8_block 81x256x256",
    "fp8_block 14x8192x128",
    "bfloat16 1025x8192x4096",
    "fp8 2049x16384x7168",
)
RUNS = 4


@contextlib.contextmanager
def no_cache_flush(torch: Any) -> Iterator[None]:
    """No allocator cache flush while it holds: neither the run's own at its start nor the
    one torch.cuda.graph makes before each capture."""
    saved = torch.cuda.empty_cache, getattr(torch._C, "_host_emptyCache", None)
    torch.cuda.empty_cache = lambda: None
    torch._C._host_emptyCache = lambda: None
    try:
        yield
    finally:
        torch.cuda.empty_cache = saved[0]
        if saved[1] is not None:
            torch._C._host_emptyCache = saved[1]


class NoClock:
    """A clock source that reads nothing: what the NVML reads per sample cost."""

    def read(self) -> Any:
        from collector.device import ClockReading

        return ClockReading(None, None, 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--backend", default="vllm", help="torch: a CPU check of this script")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    import torch

    from collector.aggregate import RunResult
    from collector.backends import get_backend
    from collector.device import ClockReader, fingerprint
    from collector.measure import MeasureContext, measure_case
    from collector.timing import Protocol

    if args.device.startswith("cuda"):
        import collector.backends.vllm_runtime  # noqa: F401  (what a forkserver preloads)

        torch.cuda.set_device(args.device)
    info = fingerprint(args.device, 0)
    clocks = ClockReader(args.device, 0)
    backend = get_backend(args.backend)
    l2 = int(info.get("l2_bytes") or 0)
    shipped = Protocol()
    variants: dict[str, tuple[Protocol, Any, Callable[[], Any]]] = {
        "shipped": (shipped, clocks, contextlib.nullcontext),
        "half_samples": (
            dataclasses.replace(shipped, placement_sample_ms=shipped.placement_sample_ms / 2),
            clocks,
            contextlib.nullcontext,
        ),
        "warmup_1": (dataclasses.replace(shipped, warmup=1), clocks, contextlib.nullcontext),
        "no_cache_flush": (shipped, clocks, lambda: no_cache_flush(torch)),
        "no_nvml": (shipped, NoClock(), contextlib.nullcontext),
    }
    profile = cProfile.Profile()
    rows: list[dict[str, Any]] = []
    for spec in CASES:
        case = gemm_case(spec)

        def one_run(protocol: Protocol, source: Any, case: Any = case) -> Any:
            # What a worker does for one run (collector/measure.py): spacers, moved sets.
            ctx = MeasureContext(backend, args.device, protocol, l2, source)
            result = measure_case(ctx, case, 0)
            if not isinstance(result, RunResult):
                raise RuntimeError(result.message)
            return result

        try:
            one_run(shipped, clocks)  # warm: first-use compiles, cuBLAS handles
            for name, (protocol, source, context) in variants.items():
                walls, medians = [], []
                for _ in range(RUNS):
                    with context():
                        if name == "shipped":
                            profile.enable()
                        result = one_run(protocol, source)
                        if name == "shipped":
                            profile.disable()
                    walls.append(result.wall_s)
                    medians.append(statistics.median(result.ms) * 1e3)
                row = {
                    "case": spec,
                    "variant": name,
                    "wall_s": [round(w, 4) for w in walls],
                    "median_us": [round(m, 3) for m in medians],
                    "inner": result.inner,
                    "placements": result.placements,
                    "retakes": result.retakes,
                    "redos": result.redos,
                }
                print(json.dumps(row), flush=True)
                rows.append(row)
        except Exception as exc:  # a probe: record it and go on
            rows.append({"case": spec, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
            print(json.dumps(rows[-1]), flush=True)
    buffer = io.StringIO()
    pstats.Stats(profile, stream=buffer).sort_stats("tottime").print_stats(45)
    (args.out / "profile.txt").write_text(buffer.getvalue())
    (args.out / "run-cost.json").write_text(
        json.dumps({"device": info, "runs": RUNS, "rows": rows}, indent=1, default=str)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
