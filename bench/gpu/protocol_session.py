"""H200 protocol session: interleaved A/A, canary and adaptive collections in one process.

Run on the GPU machine from the repo root:
    PYTHONUNBUFFERED=1 python3 -m bench.gpu.protocol_session --phase aa --out $OUT/aa
    PYTHONUNBUFFERED=1 python3 -m bench.gpu.protocol_session --phase adaptive --out $OUT/ad
    PYTHONUNBUFFERED=1 python3 -m bench.gpu.protocol_session --phase default --out $OUT/df
    PYTHONUNBUFFERED=1 python3 -m bench.gpu.protocol_session --phase fixed --out $OUT/fx
`default` runs A, B and the canary C (its 20 slowed cases) with the shipped Protocol()
(what `collectbot collect` does); `fixed` runs one collection F with adaptive stopping
off, for the cost reference.
`--placement-order between` builds each placement when sampling reaches it, in every
collection (the default now; `upfront` is the older order).
Collections are driven round by round in rotating order (A B C, B C A, ...), the schedule
that keeps drift from posing as a change. Analyse the run records offline with
`python -m bench.gpu.analyse`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

from collector.canary import Canary
from collector.caseplan import CaseSelector
from collector.engine import CollectConfig, Collection
from collector.timing import Protocol

OPS = ("gemm", "context_attention", "generation_attention")
# 20 cases of 20 us and longer: bf16 and fp8 GEMMs with m >= 1024 / 2048 on large n, k.
CANARY = (
    "gemm_dtype=bfloat16,m=1024|2048|4096,n=4096|8192,k=4096|8192;"
    "gemm_dtype=fp8,m=2048|4096,n=4096|8192,k=4096|8192"
)
CANARY_FACTOR = 1.03


def _cfg(
    out: Path,
    protocol: Protocol,
    device: str,
    case_set: str,
    canary: Canary | None = None,
    ops: tuple[str, ...] = OPS,
    case_filter: CaseSelector | None = None,
) -> CollectConfig:
    return CollectConfig(
        out=out,
        backend="torch",
        ops=ops,
        device=device,
        case_set=case_set,
        case_filter=case_filter,
        protocol=protocol,
        canary=canary,
        quiet=True,
        case_timeout_s=300.0,
        command=["python3", "-m", "bench.gpu.protocol_session"],
    )


# The fixed protocol that adaptive stopping's cost is compared with.
FIXED_RUNS = 10


def drive(collections: dict[str, Collection], runs: int, deadline: float) -> dict[str, float]:
    names = list(collections)
    seconds = {n: 0.0 for n in names}
    for r in range(runs):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            if time.monotonic() > deadline:
                print(f"deadline reached before round {r} of {name}", flush=True)
                return seconds
            t0 = time.monotonic()
            collections[name].run_round(r)
            seconds[name] += time.monotonic() - t0
            done = collections[name].done_tasks()
            print(f"round {r} {name}: {time.monotonic() - t0:.1f} s, tasks {done}", flush=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--phase", choices=("aa", "adaptive", "default", "fixed"), required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=FIXED_RUNS)
    parser.add_argument("--minutes", type=float, default=8.0)
    parser.add_argument("--device", default="cuda:0")
    # The cap of the `adaptive` phase: never more runs than the fixed protocol.
    parser.add_argument("--adaptive-cap", type=int, default=10)
    parser.add_argument("--min-runs", type=int, default=Protocol.min_runs)
    parser.add_argument("--no-canary", action="store_true")
    parser.add_argument("--case-set", default="default")
    parser.add_argument(
        "--placement-order", choices=("upfront", "between"), default=Protocol.placement_order
    )
    parser.add_argument("--placements", type=int, default=Protocol.placements)
    args = parser.parse_args()
    deadline = time.monotonic() + args.minutes * 60
    # The fixed protocol (adaptive stopping off), the reference adaptive stopping must match.
    order = args.placement_order  # one placement order for every collection
    base = Protocol(
        runs=args.runs,
        samples=8,
        target_sample_ms=1.0,
        idle_ratio=1.0,
        target_ci=0.0,
        placement_order=order,
        placements=args.placements,
    )
    if args.phase == "aa":
        canary = Canary(slow=CaseSelector.parse(CANARY), factor=CANARY_FACTOR)
        cfgs = {
            "A": _cfg(args.out / "A", base, args.device, args.case_set),
            "B": _cfg(args.out / "B", base, args.device, args.case_set),
        }
        if not args.no_canary:
            # The canary's slowed cases are all GEMMs: C times the GEMMs only.
            cfgs["C"] = _cfg(args.out / "C", base, args.device, args.case_set, canary, ("gemm",))
    elif args.phase == "default":
        shipped = Protocol(placement_order=order, placements=args.placements)
        cfgs = {name: _cfg(args.out / name, shipped, args.device, args.case_set) for name in "AB"}
        if not args.no_canary:
            canary = Canary(slow=CaseSelector.parse(CANARY), factor=CANARY_FACTOR)
            # C times the 20 slowed cases only: detection is C against A on them, and
            # false flags are the A/B comparison's to show (C on every GEMM does not fit one
            # device call now that rounds take fresh workers).
            slowed = CaseSelector.parse(CANARY)
            cfgs["C"] = _cfg(
                args.out / "C", shipped, args.device, args.case_set, canary, ("gemm",), slowed
            )
    elif args.phase == "fixed":
        # The fixed reference: 10 runs of every case, adaptive stopping off.
        fixed = Protocol(
            runs=FIXED_RUNS, target_ci=0.0, placement_order=order, placements=args.placements
        )
        cfgs = {"F": _cfg(args.out / "F", fixed, args.device, args.case_set)}
    else:
        adaptive = Protocol(
            runs=args.adaptive_cap,
            samples=8,
            target_sample_ms=1.0,
            idle_ratio=1.0,
            min_runs=args.min_runs,
            target_ci=0.01,
            min_samples=4,
            placement_order=order,
            placements=args.placements,
        )
        cfgs = {name: _cfg(args.out / name, adaptive, args.device, args.case_set) for name in "AB"}
    t0 = time.monotonic()
    collections = {name: Collection(cfg) for name, cfg in cfgs.items()}
    startup = time.monotonic() - t0
    print(f"started {len(collections)} collections in {startup:.1f} s", flush=True)
    rounds = max(c.cfg.protocol.runs for c in collections.values())
    seconds = drive(collections, rounds, deadline)
    for c in collections.values():
        c.finish("complete" if time.monotonic() < deadline else "partial")
    try:
        smi = subprocess.run(
            ["nvidia-smi", "-q", "-d", "CLOCK,POWER,PERFORMANCE"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
    except OSError:
        smi = "nvidia-smi not available"
    (args.out / "nvidia-smi.txt").write_text(smi)
    (args.out / "session.json").write_text(
        json.dumps({"phase": args.phase, "startup_s": startup, "round_seconds": seconds}, indent=1)
    )
    print(json.dumps({"startup_s": startup, "round_seconds": seconds}), flush=True)


if __name__ == "__main__":
    main()
