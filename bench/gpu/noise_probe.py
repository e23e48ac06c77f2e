"""Where does run-to-run noise of small kernels come from? (an H200 probe)

    PYTHONUNBUFFERED=1 python3 -m bench.gpu.noise_probe

For a few cases that were noisy between runs, take 10 runs under variants that each hold one
suspect fixed: re-preparing tensors each run (the default), reusing one set of tensors, a
rotation deep enough that every call misses L2 ("cold"), no rotation at all ("hot"), and
re-preparing after emptying the caching allocator. Prints each variant's robust CV of run
medians per case.
"""

from __future__ import annotations

import json
import math
import statistics

import torch

from collector.backends import torch_backend
from collector.caseplan import Case
from collector.device import ClockReader
from collector.timing import Protocol, measure_cuda

CASES = [
    {"op": "gemm", "gemm_dtype": "fp8", "m": 16, "n": 1024, "k": 1024},
    {"op": "gemm", "gemm_dtype": "bfloat16", "m": 128, "n": 4096, "k": 1024},
    {"op": "gemm", "gemm_dtype": "bfloat16", "m": 512, "n": 1024, "k": 8192},
    {"op": "gemm", "gemm_dtype": "bfloat16", "m": 4096, "n": 4096, "k": 4096},
]
RUNS = 10


def rcv(values: list[float]) -> float:
    med = statistics.median(values)
    mad = statistics.median([abs(v - med) for v in values])
    return 1.4826 * mad / med


def _cold(weight_bytes: int, l2_bytes: int) -> int:
    return max(1, min(512, math.ceil(3 * l2_bytes / weight_bytes)))


def _hot(weight_bytes: int, l2_bytes: int) -> int:
    return 1


def main() -> None:
    backend = torch_backend.TorchBackend()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    clocks = ClockReader("cuda:0")
    protocol = Protocol(runs=RUNS, samples=8, target_sample_ms=1.0, idle_ratio=1.0, target_ci=0.0)
    original = torch_backend.rotation_copies
    report = {}
    for spec in CASES:
        params = {k: v for k, v in spec.items() if k != "op"}
        case = Case.build("gemm", params)
        result = {}
        for variant in ("reprepare", "same_tensors", "cold", "hot", "empty_cache"):
            if variant == "cold":
                torch_backend.rotation_copies = _cold
            elif variant == "hot":
                torch_backend.rotation_copies = _hot
            else:
                torch_backend.rotation_copies = original
            medians = []
            prepared = backend.prepare(case, "cuda:0", l2)
            for _ in range(RUNS):
                if variant == "empty_cache":
                    del prepared
                    torch.cuda.empty_cache()
                if variant != "same_tensors":
                    prepared = backend.prepare(case, "cuda:0", l2)
                s = measure_cuda(prepared, protocol, clocks, None)
                medians.append(statistics.median(s.ms))
            torch_backend.rotation_copies = original
            result[variant] = {
                "copies": prepared.copies,
                "median_us": round(statistics.median(medians) * 1e3, 3),
                "run_rcv_pct": round(rcv(medians) * 100, 3),
                "range_pct": round((max(medians) / min(medians) - 1) * 100, 2),
            }
            del prepared
            torch.cuda.empty_cache()
        report[case.key] = result
        print(case.key, json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
