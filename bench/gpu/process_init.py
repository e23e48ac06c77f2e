"""Where a fresh vLLM worker's first cases spend their seconds, on a GPU.

    PYTHONUNBUFFERED=1 PYTHONPATH=$(cat /tmp/site/.pythonpath):$PWD \\
        python3 -m bench.gpu.process_init --out $OUT/process-init

In the records of 2026-12-02, every fresh worker paid 2.2-2.6 s on its first vLLM case and
5.7-6.8 s on its first block-FP8 case through FlashInfer (then about 1.3 s on two more),
against 0.02-0.05 s for the same cases later in the process. This process does what a
worker does (bind the device, build the backend, `prepare` and time each case with the
shipped protocol), over the cases below twice: the first pass is what a fresh process pays,
the second the marginal cost. Each first-pass case runs under cProfile; `--out` gets
`timings.json` (phases and cases, seconds) and one `<n>-<case>.txt` per profile (its top
functions by cumulative time), to tell what is per-process set-up from what is per case.
Run it where the JIT caches are warm (after a collection), or it times their compiles.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import time
from pathlib import Path
from typing import Any

from collector.caseplan import Case

# First cases of each kind in the draw of 2026-12-02, in a worker's order: the first vLLM
# case, fp8, block-FP8 through FlashInfer (the 6 s one, the two 1.3 s ones, one that is not).
CASES = (
    "bfloat16 3073x512x512",
    "fp8 10x1024x512",
    "fp8_block 10x2048x3584",
    "fp8_block 14x8192x128",
    "fp8_block 17x64x1024",
    "fp8_block 1x3584x768",
)


def gemm_case(shape: str) -> Case:
    """'fp8 769x16384x768' -> the GEMM case of that dtype and m x n x k."""
    dtype, mnk = shape.split()
    m, n, k = (int(x) for x in mnk.split("x"))
    return Case.build("gemm", {"gemm_dtype": dtype, "m": m, "n": n, "k": k})


def top_functions(profile: cProfile.Profile, count: int = 40) -> str:
    buffer = io.StringIO()
    pstats.Stats(profile, stream=buffer).sort_stats("cumulative").print_stats(count)
    return buffer.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda:0")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    phases: dict[str, float] = {}

    def timed(name: str, start: float) -> None:
        phases[name] = round(time.perf_counter() - start, 3)
        print(f"{name}: {phases[name]} s", flush=True)

    t = time.perf_counter()
    import torch

    timed("import torch", t)
    t = time.perf_counter()
    import collector.backends.vllm_runtime  # noqa: F401  (what a forkserver preloads)

    timed("import vllm runtime module", t)
    t = time.perf_counter()
    torch.cuda.set_device(args.device)
    torch.empty(1, device=args.device)
    torch.cuda.synchronize()
    timed("CUDA context", t)

    from collector.backends import get_backend
    from collector.device import ClockReader, fingerprint
    from collector.timing import Protocol, measure_cuda

    t = time.perf_counter()
    info = fingerprint(args.device, 0)
    clocks = ClockReader(args.device, 0)
    backend = get_backend("vllm")
    timed("fingerprint and backend", t)
    protocol = Protocol()
    l2 = int(info.get("l2_bytes") or 0)
    rows: list[dict[str, Any]] = []
    for sweep in ("first", "second"):
        for n, spec in enumerate(CASES):
            case = gemm_case(spec)
            profile = cProfile.Profile() if sweep == "first" else None
            row: dict[str, Any] = {"pass": sweep, "case_key": case.key}
            start = time.perf_counter()
            if profile is not None:
                profile.enable()
            try:
                prepared = backend.prepare(case, args.device, l2)
                row["prepare_s"] = round(time.perf_counter() - start, 3)
                row["kernel_source"] = prepared.kernel_source

                def more(case: Case = case) -> Any:
                    return backend.prepare(case, args.device, l2)

                samples = measure_cuda(prepared, protocol, clocks, None, more)
                row["latency_us"] = round(sorted(samples.ms)[len(samples.ms) // 2] * 1e3, 3)
                # What the pilot sized: calls per sample (1 ms of them) and buffer sets.
                row["inner"], row["placements"] = samples.inner, samples.placements
            except Exception as exc:  # a probe: record it and go on
                row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            if profile is not None:
                profile.disable()
                name = f"{n}-{spec.replace(' ', '-')}.txt"
                (args.out / name).write_text(top_functions(profile))
            row["wall_s"] = round(time.perf_counter() - start, 3)
            print(json.dumps(row), flush=True)
            rows.append(row)
    result = {"device": info, "phases": phases, "cases": rows}
    (args.out / "timings.json").write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
