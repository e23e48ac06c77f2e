"""Exercise every vLLM path of the vllm backend once, on a GPU, before a full collection.

Usage (repository root, vLLM installed, e.g. from the offline bundle):
    PYTHONUNBUFFERED=1 PYTHONPATH=$(cat /tmp/site/.pythonpath):. \\
        python3 bench/gpu/vllm_smoke.py --out $OUT/smoke.jsonl

For each case of the built-in `vllm-smoke` sets (bf16, fp8 and the three block-FP8 GEMM
leaves; context and generation attention with bf16 and fp8 KV caches) it prints and writes
one JSON line: kernel_source, the time `prepare` took (includes JIT compilation on first
use), the timing mode and per-call latency (median of a short run through the collector's
own CUDA timing, CUDA graphs included), and the CUDA kernels a profiled call launched, as
evidence that kernel_source names what ran. A case whose graph capture fails is timed
again eagerly, labelled as such, to tell a capture problem from a kernel problem. It
also times one decode case at vLLM's default KV block size (16) next to the default 64.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

# The repository root on sys.path when run as a script.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from collector.backends import get_backend
from collector.caseplan import Case, build_plan
from collector.device import ClockReader, fingerprint
from collector.errors import UserError
from collector.failures import classify_exception, poisons_context
from collector.provenance import library_versions
from collector.timing import Protocol, measure_cuda

OPS = ("gemm", "context_attention", "generation_attention")
T0 = time.monotonic()


def log(message: str) -> None:
    print(f"[{time.monotonic() - T0:7.1f}s] {message}", flush=True)


def nvcc_version() -> str:
    try:
        out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[-1] if out.stdout else "nvcc: no output"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvcc: {type(exc).__name__}"


def cuda_kernels(prepared: Any) -> list[str]:
    """Names of the CUDA kernels one eager call launches, longest first (top 4)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        prepared.call(0)
        torch.cuda.synchronize()
    totals: dict[str, float] = {}
    for event in prof.key_averages():
        device_time = float(getattr(event, "device_time_total", 0.0) or 0.0)
        if device_time > 0:
            totals[event.key] = totals.get(event.key, 0.0) + device_time
    ranked = sorted(totals, key=lambda k: -totals[k])
    return [name[:120] for name in ranked[:4]]


def run_case(
    backend: Any, case: Case, device: str, l2: int, protocol: Protocol, clocks: ClockReader
) -> dict[str, Any]:
    row: dict[str, Any] = {"op": case.op, "params": case.params, "case_key": case.key}
    start = time.monotonic()
    try:
        prepared = backend.prepare(case, device, l2)
        row["prepare_s"] = round(time.monotonic() - start, 2)
        row["kernel_source"] = prepared.kernel_source
        row["copies"] = prepared.copies
        try:
            samples = measure_cuda(prepared, protocol, clocks, None)
        except Exception as exc:  # capture failed? say so, then time eagerly to diagnose
            row["graph_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            if poisons_context(classify_exception(exc)):
                raise
            samples = measure_cuda(prepared, replace(protocol, use_graphs=False), clocks, None)
        row["timing_mode"] = samples.timing_mode
        row["latency_ms"] = statistics.median(samples.ms)
        row["samples_ms"] = [round(x, 6) for x in samples.ms]
        row["sm_mhz"] = samples.sm_mhz[-1]
        row["kernels"] = cuda_kernels(prepared)
    except Exception as exc:
        row["classification"] = classify_exception(exc)
        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:500] if str(exc) else ''}"
        row["traceback"] = traceback.format_exc()[-3000:]
    row["wall_s"] = round(time.monotonic() - start, 2)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="JSON lines file to write (one per case).")
    parser.add_argument("--device", default="cuda:0", help="CUDA device (default cuda:0).")
    parser.add_argument("--case-set", default="vllm-smoke", help="Built-in case set to run.")
    parser.add_argument("--samples", type=int, default=5, help="Timed samples per case.")
    parser.add_argument(
        "--no-block-size-probe", action="store_true", help="Skip the KV block 16 vs 64 probe."
    )
    args = parser.parse_args()

    versions = library_versions()
    log(f"python {platform.python_version()} | {versions} | {nvcc_version()}")
    try:
        backend = get_backend("vllm")  # the version gate runs here
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    log(f"vllm backend: framework version {backend.framework_version()} (pin check passed)")
    info = fingerprint(args.device)
    l2 = int(info.get("l2_bytes") or 0)
    log(f"device: {info.get('name')} sm {info.get('sm')} L2 {l2 / 1e6:.0f} MB")
    clocks = ClockReader(args.device, int(args.device.partition(":")[2] or 0))
    protocol = Protocol(runs=1, samples=args.samples, warmup=2, idle_ratio=0.5, target_ci=0.0)
    plan = build_plan(OPS, case_set=args.case_set)
    cases: list[tuple[Case, str | None]] = [(c, None) for c in plan.cases]
    if not args.no_block_size_probe:
        decode = [c for c in plan.cases if c.op == "generation_attention"][:1]
        cases += [(c, "16") for c in decode]
    out = args.out.open("w") if args.out else None
    failures = 0
    for case, block in cases:
        if block is not None:
            os.environ["COLLECTBOT_VLLM_BLOCK_SIZE"] = block
        log(f"{case.key}{f' [KV block {block}]' if block else ''} ...")
        row = run_case(backend, case, args.device, l2, protocol, clocks)
        row["kv_block_size"] = int(block) if block else None
        os.environ.pop("COLLECTBOT_VLLM_BLOCK_SIZE", None)
        if "error" in row:
            failures += 1
            log(f"  FAILED [{row['classification']}] {row['error']}")
        else:
            log(
                f"  {row['kernel_source']} | {row['timing_mode']} | "
                f"{row['latency_ms'] * 1e3:.2f} us | prepare {row['prepare_s']} s | "
                f"copies {row['copies']} | kernels: {'; '.join(row['kernels'])}"
            )
            if "graph_error" in row:
                log(f"  graph capture failed first: {row['graph_error']}")
        if out is not None:
            out.write(json.dumps(row) + "\n")
            out.flush()
        if row.get("classification") == "cuda_fatal":
            log("CUDA context poisoned: stopping")
            break
    if out is not None:
        out.close()
    log(f"done: {len(cases) - failures} ok, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
