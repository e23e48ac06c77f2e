"""Where a fresh vLLM worker's first cases spend their seconds, on a GPU.

    PYTHONUNBUFFERED=1 PYTHONPATH=$(cat /tmp/site/.pythonpath):$PWD \\
        python3 -m bench.gpu.process_init --out $OUT/process-init

In the records of 2026-12-02, every fresh worker paid 2.2-2.6 s on its first vLLM case and
5.7-6.8 s on its first block-FP8 case through FlashInfer (then about 1.3 s on two more),
against 0.02-0.05 s for the same cases later in the process. This process does what a
worker does (bind the device, build the backend, `prepare` and time each case with the
shipped protocol), over the cases below twice: the first pass is what a fresh process pays,
the second the marginal cost, and a third pass times the three short cases with every buffer
set prepared afresh instead of moved (collector/backends/relocate.py). Each first-pass case
runs under cProfile; `--out` gets `timings.json` (phases and cases, seconds) and
`profiles.txt` (each profile's top functions by cumulative time, one section a case: the
device tool returns 8 files at most), to tell what is per-process set-up from what is per
case.
The second pass splits a run's seconds: its first `prepare`, the other buffer sets'
`prepare`s, the timed samples with their idle time, and the rest (each set's graph
capture and warm-up, the pilot): in the third run of 2026-12-02 a short case's run over 8
sets took 0.2-0.5 s against 0.03-0.05 s for one set.
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
    # Short cases of the draw, timed over 8 buffer sets: where such a run's seconds go.
    "bfloat16 13x32x6144",
    "fp8 81x7168x768",
    "fp8_block 81x256x256",
)
SHORT_CASES = CASES[-3:]


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
    from collector.measure import relocated
    from collector.timing import Protocol, measure_cuda

    t = time.perf_counter()
    info = fingerprint(args.device, 0)
    clocks = ClockReader(args.device, 0)
    backend = get_backend("vllm")
    timed("fingerprint and backend", t)
    l2 = int(info.get("l2_bytes") or 0)
    # The third pass times the short cases again with every buffer set prepared afresh,
    # not moved: what moving saves, and whether the latency moves with it.
    sweeps = ("first", "second", "prepared_sets")
    protocol = Protocol()
    rows: list[dict[str, Any]] = []
    profiles: list[str] = []
    for sweep in sweeps:
        for n, spec in enumerate(CASES if sweep != "prepared_sets" else SHORT_CASES):
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

                sets_s, moves, latest = [0.0], [0], [prepared]

                def more(
                    case: Case = case,
                    sets_s: list[float] = sets_s,
                    moves: list[int] = moves,
                    latest: list[Any] = latest,
                    move: bool = sweep != "prepared_sets",
                ) -> Any:
                    # As collector/measure.py builds a set: moved if the op can, else prepared.
                    began = time.perf_counter()
                    another = relocated(latest[0]) if move else None
                    moves[0] += another is not None
                    latest[0] = another or backend.prepare(case, args.device, l2)
                    sets_s[0] += time.perf_counter() - began
                    return latest[0]

                measured = time.perf_counter()
                samples = measure_cuda(prepared, protocol, clocks, None, more)
                run_s = time.perf_counter() - measured
                median_ms = sorted(samples.ms)[len(samples.ms) // 2]
                row["latency_us"] = round(median_ms * 1e3, 3)
                # What the pilot sized: calls per sample (1 ms of them) and buffer sets.
                row["inner"], row["placements"] = samples.inner, samples.placements
                sampled = (len(samples.ms) + samples.retakes) * samples.inner * median_ms / 1e3
                sampled *= 1 + protocol.idle_ratio
                row["sets_prepare_s"] = round(sets_s[0], 3)
                row["sets_moved"] = moves[0]
                row["samples_s"] = round(sampled, 3)
                row["capture_warmup_pilot_s"] = round(run_s - sets_s[0] - sampled, 3)
            except Exception as exc:  # a probe: record it and go on
                row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            if profile is not None:
                profile.disable()
                profiles.append(f"=== {n} {spec}\n{top_functions(profile)}")
            row["wall_s"] = round(time.perf_counter() - start, 3)
            print(json.dumps(row), flush=True)
            rows.append(row)
    result = {"device": info, "phases": phases, "cases": rows}
    (args.out / "timings.json").write_text(json.dumps(result, indent=1, default=str))
    (args.out / "profiles.txt").write_text("\n".join(profiles))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
