"""First-use compiles of a case set's kernels, in parallel, before a collection times it.

    PYTHONUNBUFFERED=1 PYTHONPATH=$(cat /tmp/site/.pythonpath):$PWD \\
        python3 -m bench.gpu.jit_warm --cases bench/gpu/precision_cases.yaml --jobs 12 \\
        --out $OUT/jit-warm.json

vLLM's block-FP8 GEMMs (FlashInfer, DeepGEMM) compile a kernel the first time a process
meets a shape and keep it in an on-disk cache; a runner's cache holds its case sets', a bare
machine's holds none. On the bare H200 of 2026-12-02 the first collection of a fresh draw
spent about 4.4 s on each of 65 new block-FP8 shapes, one after another, inside its timed
runs. Here `--jobs` spawned processes prepare and call each case once, so the compiles run
side by side on the host's cores and the collection that follows finds them cached. The
JSON says how long it took and which cases failed (a case that fails here fails in the
collection too, where it is recorded). On 2026-12-02 (docs/benchmarks.md) the 70 block-FP8
shapes of a fresh draw took 162 s with 12 jobs, most of it one shared module build; the
collection's first worker still spent 100 s on its first FlashInfer case, so the processes
here now start with the workers' allow-listed environment, as the workers do.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

_STATE: dict[str, Any] = {}


def _start(backend: str, device: str) -> None:
    import torch

    if backend == "vllm":
        import collector.backends.vllm_runtime  # noqa: F401  (as a worker preloads it)
    from collector.backends import get_backend

    if device.startswith("cuda"):
        torch.cuda.set_device(device)
    _STATE.update(backend=get_backend(backend), device=device, torch=torch)


def _warm(params: dict[str, Any]) -> dict[str, Any]:
    """Prepare one case and call it twice; its seconds, or the error."""
    from collector.caseplan import Case

    case = Case.build("gemm", params)
    began = time.perf_counter()
    try:
        prepared = _STATE["backend"].prepare(case, _STATE["device"], 0)
        for i in range(2):
            prepared.call(i)
        if _STATE["device"].startswith("cuda"):
            _STATE["torch"].cuda.synchronize()
        error = None
    except Exception as exc:  # recorded; the collection records it properly
        error = f"{type(exc).__name__}: {str(exc)[:200]}"
    return {"case": case.key, "seconds": round(time.perf_counter() - began, 3), "error": error}


def main(argv: list[str] | None = None) -> int:
    from collector.caseplan import build_plan
    from collector.environment import environment_for_children, measured_code_environment

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=Path, required=True)
    parser.add_argument("--case-set", default="default")
    parser.add_argument("--dtypes", default="fp8_block", help="comma-separated GEMM dtypes")
    parser.add_argument("--jobs", type=int, default=12)
    parser.add_argument("--backend", default="vllm")
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    wanted = set(args.dtypes.split(","))
    plan = build_plan(("gemm",), case_file=args.cases, case_set=args.case_set)
    cases = [c.params for c in plan.cases if c.params["gemm_dtype"] in wanted]
    began = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    # The workers' own environment: a JIT cache entry is keyed by its build's environment,
    # and one compiled under another would be compiled again by the collection.
    with (
        environment_for_children(measured_code_environment()),
        ProcessPoolExecutor(
            args.jobs, mp_context=context, initializer=_start, initargs=(args.backend, args.device)
        ) as pool,
    ):
        rows = list(pool.map(_warm, cases))
    wall = time.perf_counter() - began
    summary = {
        "cases": len(rows),
        "jobs": args.jobs,
        "wall_s": round(wall, 1),
        "case_s_sum": round(sum(r["seconds"] for r in rows), 1),
        "failed": [r for r in rows if r["error"]],
        "slowest": sorted(rows, key=lambda r: -r["seconds"])[:5],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**summary, "rows": rows}, indent=1) + "\n")
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
