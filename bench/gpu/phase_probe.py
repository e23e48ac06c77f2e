"""Does a large-operand bf16 GEMM's level follow the GPU's load? (GPU; CPU for the tests)

    PYTHONUNBUFFERED=1 python3 -m bench.gpu.phase_probe --out $OUT/phase-probe.jsonl

On the H200 a collection's cases still measured after its third round ran faster from the
fourth on (large-operand bf16 GEMMs by 1.4-5.7%), once most cases had stopped, at the same
SM clock measured on the GPU, with NVML's power lower (docs/statistics.md, "Drift within a
collection"). This times three such GEMMs (CUDA graphs, about 1 ms a replay, the median of
`--replays`) while the GPU idles, every `--every-s` seconds of a heavy GEMM load, and while
it cools, with the GPU's and the memory's temperature, power and clocks (`nvidia-smi`) at
each probe. A level that follows the memory's temperature through the load and back names
the cause; one that stays put clears it. Writes one JSON line per probe; `--analyse FILE`
prints each phase's median against the idle phase's.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# bf16 (m, n, k): three of the cases that moved with the collection's phase, and the load.
PROBES = ((160, 51200, 6144), (32768, 8192, 32), (4096, 256, 51200))
LOAD = (8192, 8192, 8192)
QUERY = "temperature.gpu,temperature.memory,power.draw,clocks.sm,clocks.mem"
PHASES = ("idle", "load", "cool")


def read_gpu() -> dict[str, float | None]:
    """The GPU's readings now (`nvidia-smi`), None where it says nothing or is missing."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "-i", "0", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return dict.fromkeys(QUERY.split(","))
    values = [v.strip() for v in out.splitlines()[0].split(",")] if out.strip() else []
    return {key: _number(v) for key, v in zip(QUERY.split(","), values, strict=False)}


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def timer(shape: tuple[int, int, int], device: str, scale: int) -> Callable[[int], float]:
    """A function timing `replays` replays of ~1 ms of calls of one GEMM; ms per call."""
    import importlib

    torch: Any = importlib.import_module("torch")  # untyped here, like the collector's uses

    m, n, k = (max(1, d // scale) for d in shape)
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    x = torch.randn(m, k, device=device, dtype=dtype)
    w = torch.randn(n, k, device=device, dtype=dtype)
    if not device.startswith("cuda"):

        def cpu(replays: int) -> float:
            times = []
            for _ in range(replays):
                start = time.perf_counter()
                torch.nn.functional.linear(x, w)
                times.append((time.perf_counter() - start) * 1e3)
            return statistics.median(times)

        return cpu
    # Warm up on a side stream, as torch.cuda.graph asks: cuBLAS sets up its handle there.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            torch.nn.functional.linear(x, w)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.nn.functional.linear(x, w)
    end.record()
    end.synchronize()
    calls = max(1, int(1.0 / max(start.elapsed_time(end), 1e-3)))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            torch.nn.functional.linear(x, w)
    graph.replay()

    # A graph holds no reference to the tensors it reads: the partial keeps x and w alive,
    # or they are freed once this returns and the replays read freed memory (an illegal
    # access on the H200).
    return functools.partial(_replay_ms, graph, (x, w), (start, end), calls)


def _replay_ms(
    graph: Any, tensors: tuple[Any, ...], events: tuple[Any, Any], calls: int, replays: int
) -> float:
    """Milliseconds per call of `graph`'s `calls` calls, the median of `replays` replays
    (`tensors`, the graph's inputs, are only held: the partial keeps them alive)."""
    start, end = events
    times = []
    for _ in range(replays):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(float(start.elapsed_time(end)) / calls)
    return statistics.median(times)


def probe_run(args: argparse.Namespace) -> None:
    probes = [timer(shape, args.device, args.scale) for shape in PROBES]
    load = timer(LOAD, args.device, args.scale)
    t0 = time.monotonic()
    with open(args.out, "w") as out:

        def probe(phase: str) -> None:
            row: dict[str, Any] = {"phase": phase, "t": round(time.monotonic() - t0, 3)}
            row["ms"] = [round(p(args.replays), 6) for p in probes]
            row["gpu"] = read_gpu()
            out.write(json.dumps(row) + "\n")
            out.flush()

        for phase, seconds in zip(PHASES, (args.idle_s, args.load_s, args.cool_s), strict=True):
            end = time.monotonic() + seconds
            while True:
                probe(phase)
                if time.monotonic() >= end:
                    break
                until = min(end, time.monotonic() + args.every_s)
                while time.monotonic() < until:
                    if phase == "load":
                        load(4)
                    else:
                        time.sleep(0.05)


def analyse(path: Path) -> dict[str, Any]:
    """Each phase's median per probe against the idle phase's, and its readings' ranges."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    idle = [statistics.median(r["ms"][i] for r in rows if r["phase"] == "idle") for i in range(3)]
    report: dict[str, Any] = {"probes": [list(p) for p in PROBES], "idle_ms": idle}
    for phase in PHASES:
        part = [r for r in rows if r["phase"] == phase]
        if not part:
            continue
        report[phase] = {
            "probes": len(part),
            "vs_idle": [
                round(statistics.median(r["ms"][i] for r in part) / idle[i], 4) for i in range(3)
            ],
            "readings": {
                key: [min(vals), max(vals)]
                for key in QUERY.split(",")
                if (vals := [r["gpu"][key] for r in part if r["gpu"].get(key) is not None])
            },
        }
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("phase-probe.jsonl"))
    parser.add_argument("--analyse", type=Path, help="print the phases of a written file")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--scale", type=int, default=1, help="divide every dimension (tests)")
    parser.add_argument("--replays", type=int, default=15)
    parser.add_argument("--idle-s", type=float, default=15.0)
    parser.add_argument("--load-s", type=float, default=45.0)
    parser.add_argument("--cool-s", type=float, default=45.0)
    parser.add_argument("--every-s", type=float, default=5.0)
    args = parser.parse_args(argv)
    if args.analyse is not None:
        if not args.analyse.is_file():
            print(f"error: {args.analyse}: no such file", file=sys.stderr)
            return 2
        print(json.dumps(analyse(args.analyse), indent=1))
        return 0
    probe_run(args)
    print(json.dumps(analyse(args.out), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
