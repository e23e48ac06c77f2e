"""Fifth noise probe: does a short kernel's level move between processes, and what stops it?

    PYTHONUNBUFFERED=1 python3 -m bench.gpu.noise_probe5 [--processes 6] [--runs 6] [--out F]

The H200 A/A of session 3 left a process-level component: for GEMMs under 20 us the means
of three collections differed by more than their runs' spread allows (about 0.5-0.7% sd on
top of it), which more runs cannot average away. Each child process here times the same
short cases with four protocol variants, interleaved run by run, through the collector's
own run path (`collector.measure._measure_once`):
  before     one buffer set per run (the protocol until now)
  spacer     one set, allocated behind a random 0-256 MiB spacer
  p4         four buffer sets per run, samples cycling over them
  p4spacer   four sets, each behind its own random spacer
The parent runs the children one after another and reports, per case and variant, the
level, the within-process spread of run medians and the spread of the process means.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

GEMMS = [
    ("fp8", 16, 1024, 8192),
    ("bfloat16", 512, 1024, 8192),
    ("fp8", 64, 8192, 1024),
    ("bfloat16", 1024, 1024, 1024),
    ("bfloat16", 256, 4096, 4096),
    ("fp8", 16, 8192, 1024),
    ("bfloat16", 64, 1024, 8192),
    ("bfloat16", 128, 4096, 1024),
    ("fp8_block", 64, 4096, 1024),
]
ATTENTION_KEY_PREFIX = "context_attention:batch_size=1,isl=256,"
# name: (placements, spacer_max_mib). Probe 6 also ran `spacer_ws` and `p4spacer_ws`: a
# fresh cuBLAS workspace per run and a capture stream per set (commit 30f2d0f). It moved
# levels by 2-4%, so the collector does not do it (docs/benchmarks.md).
VARIANTS = {"before": (1, 0), "spacer": (1, 256), "p4": (4, 0), "p4spacer": (4, 256)}
FIRST = "before,spacer,p4,p4spacer"


def child(runs: int, names: list[str]) -> None:
    import torch

    from collector.backends.torch_backend import TorchBackend
    from collector.caseplan import Case, build_plan
    from collector.device import ClockReader
    from collector.measure import MeasureContext, _measure_once
    from collector.timing import Protocol

    dev = "cuda:0"
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    cases = [Case.build("gemm", {"gemm_dtype": d, "m": m, "n": n, "k": k}) for d, m, n, k in GEMMS]
    attention = build_plan(("context_attention",), case_set="default").cases
    cases += [c for c in attention if c.key.startswith(ATTENTION_KEY_PREFIX)][:1]
    backend = TorchBackend()
    base = Protocol(target_ci=0.0)  # every run takes all its samples
    contexts = {
        name: MeasureContext(
            backend,
            dev,
            replace(base, placements=p, spacer_max_mib=mib),
            l2,
            ClockReader(dev),
        )
        for name, (p, mib) in VARIANTS.items()
        if name in names
    }
    for case in cases:
        medians: dict[str, list[float]] = {n: [] for n in names}
        placements: dict[str, int] = {}
        for run in range(runs):
            order = names[run % len(names) :] + names[: run % len(names)]
            for name in order:
                samples, _, _ = _measure_once(contexts[name], case)
                medians[name].append(statistics.median(samples.ms))
                placements[name] = samples.placements
        print(json.dumps({"case": case.key, "medians": medians, "placements": placements}))


def _summary(lines: list[dict[str, Any]], names: list[str]) -> list[dict[str, Any]]:
    by_case: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        by_case.setdefault(line["case"], []).append(line)
    report = []
    for case, procs in by_case.items():
        row: dict[str, Any] = {"case": case}
        for name in names:
            logs = [[math.log(v) for v in p["medians"][name]] for p in procs]
            means = [statistics.fmean(x) for x in logs]
            within = math.sqrt(statistics.fmean([statistics.variance(x) for x in logs]))
            between = statistics.stdev(means) if len(means) > 1 else 0.0
            expected = within / math.sqrt(len(logs[0]))
            row[name] = {
                "us": round(math.exp(statistics.median([v for x in logs for v in x])) * 1e3, 3),
                "within_sd_pct": round(within * 100, 2),
                "process_means_sd_pct": round(between * 100, 2),
                "process_component_pct": round(
                    math.sqrt(max(0.0, between**2 - expected**2)) * 100, 2
                ),
                "placements": procs[0]["placements"][name],
            }
        report.append(row)
    return report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--variants", default=FIRST)
    args = parser.parse_args()
    names = args.variants.split(",")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise SystemExit(f"--variants: unknown {unknown[0]!r} (known: {', '.join(VARIANTS)})")
    if args.child:
        child(args.runs, names)
        return
    lines: list[dict[str, Any]] = []
    for i in range(args.processes):
        cmd = [sys.executable, "-m", "bench.gpu.noise_probe5", "--child", "--runs", str(args.runs)]
        cmd += ["--variants", args.variants]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"child {i} failed")
        got = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
        lines += got
        print(f"process {i}: {len(got)} cases", flush=True)
    report = _summary(lines, names)
    for row in report:
        print(json.dumps(row), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"report": report, "raw": lines}, indent=1))


if __name__ == "__main__":
    main()
