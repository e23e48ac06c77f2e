"""Fourth noise probe: can more placements per run average the run-to-run level away?

    PYTHONUNBUFFERED=1 python3 -m bench.gpu.noise_probe4 [--out FILE]

After the launch spin (noise probe 3), small GEMMs still move by a few % between runs whose
tensors were re-allocated, while reusing one set of tensors kept them steady (noise probe
2): the level follows where the buffers land. Variants, each re-prepared every run and timed
with the default protocol, interleaved run by run:
  current   the torch backend's own preparation (up to 6 rotated copies)
  offsets   the same copies, each tensor a view at a random 256-byte-aligned offset (within
            2 MiB) of its own allocation, so copies do not share an address pattern
  copies24  24 rotated copies, no offsets
Prints the robust CV and range of the run medians per variant.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import statistics
from collections.abc import Callable
from pathlib import Path

import torch

from bench.gpu.noise_probe import rcv
from collector.backends.base import Prepared
from collector.backends.torch_backend import TorchBackend, rotation_copies
from collector.caseplan import Case
from collector.device import ClockReader
from collector.timing import Protocol, measure_cuda

SHAPES = [
    ("bfloat16", 512, 1024, 8192),
    ("fp8", 16, 1024, 8192),
    ("bfloat16", 256, 4096, 4096),
    ("bfloat16", 1024, 1024, 1024),
    ("fp8", 64, 8192, 1024),
]
RUNS = 12
DEV = "cuda:0"


def _placed(shape: tuple[int, int], dtype: torch.dtype, rng: random.Random) -> torch.Tensor:
    numel = shape[0] * shape[1]
    nbytes = numel * dtype.itemsize
    offset = rng.randrange(0, 8192) * 256
    raw = torch.empty(nbytes + offset, dtype=torch.uint8, device=DEV)
    return raw[offset : offset + nbytes].view(dtype).view(shape)


def prep(dtype: str, m: int, n: int, k: int, copies: int, offsets: bool, seed: int) -> Prepared:
    rng = random.Random(seed)
    in_dtype = torch.float8_e4m3fn if dtype == "fp8" else torch.bfloat16

    def make(shape: tuple[int, int], dt: torch.dtype, fill: bool) -> torch.Tensor:
        t = _placed(shape, dt, rng) if offsets else torch.empty(shape, dtype=dt, device=DEV)
        if fill:
            t.copy_(torch.randn(shape, device=DEV).to(dt))
        return t

    xs = [make((m, k), in_dtype, True) for _ in range(copies)]
    ws = [make((n, k), in_dtype, True) for _ in range(copies)]
    outs = [make((m, n), torch.bfloat16, False) for _ in range(copies)]
    one = torch.ones((), device=DEV, dtype=torch.float32)
    call: Callable[[int], object]
    if dtype == "fp8":

        def call(i: int) -> object:
            j = i % copies
            return torch._scaled_mm(
                xs[j], ws[j].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, out=outs[j]
            )
    else:

        def call(i: int) -> object:
            j = i % copies
            return torch.matmul(xs[j], ws[j].t(), out=outs[j])

    return Prepared(call=call, copies=copies, kernel_source="probe")


def _current(backend: TorchBackend, case: Case, l2: int, run: int) -> Prepared:
    return backend.prepare(case, DEV, l2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    clocks = ClockReader(DEV)
    protocol = Protocol(runs=RUNS, samples=8, target_sample_ms=1.0, idle_ratio=1.0, target_ci=0.0)
    backend = TorchBackend()
    report = []
    for dtype, m, n, k in SHAPES:
        case = Case.build("gemm", {"gemm_dtype": dtype, "m": m, "n": n, "k": k})
        copies = rotation_copies(n * k * (1 if dtype == "fp8" else 2), l2)
        variants: dict[str, Callable[[int], Prepared]] = {
            "current": functools.partial(_current, backend, case, l2),
            "offsets": functools.partial(prep, dtype, m, n, k, copies, True),
            "copies24": functools.partial(prep, dtype, m, n, k, 24, False),
        }
        medians: dict[str, list[float]] = {v: [] for v in variants}
        for run in range(RUNS):
            names = list(variants)
            order = names[run % len(names) :] + names[: run % len(names)]
            for name in order:
                torch.cuda.empty_cache()
                prepared = variants[name](run)
                samples = measure_cuda(prepared, protocol, clocks, None)
                medians[name].append(statistics.median(samples.ms))
                del prepared
        line = {
            "case": case.key,
            "copies": copies,
            **{
                name: {
                    "us": round(statistics.median(v) * 1e3, 3),
                    "rcv_pct": round(rcv(v) * 100, 2),
                    "range_pct": round((max(v) / min(v) - 1) * 100, 2),
                }
                for name, v in medians.items()
            },
        }
        report.append(line)
        print(json.dumps(line), flush=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
