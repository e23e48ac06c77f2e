"""Worker-start seconds of one pool, spawned or forked from a preloaded server (CPU or GPU).

    python -m bench.worker_starts --backend vllm --worker-start forkserver [--recycles 3]

Starts a pool of one worker for `--backend` on `--device`, recycles it `--recycles` times
(each a fresh process, as between a collection's rounds) and prints the seconds the pool
spent starting workers (the server's own start and import included) and whether each worker
found its backend imported when it started. No case is measured: a worker that starts is
enough (the vllm backend starts on a CPU where vLLM imports; its cases then need CUDA).
"""

from __future__ import annotations

import argparse
import json
import time

from collector.pool import WorkerPool
from collector.timing import WORKER_STARTS, Protocol
from collector.worker import WorkerSpec


def measure(backend: str, device: str, method: str, recycles: int) -> dict[str, object]:
    spec = WorkerSpec(
        backend=backend, device=device, protocol=Protocol(worker_start=method), name="w0"
    )
    t0 = time.monotonic()
    pool = WorkerPool([spec], case_timeout_s=600, start_method=method)
    try:
        pool.wait_ready()
        first = time.monotonic() - t0
        preloaded = [pool.workers[0].preloaded]
        for _ in range(recycles):
            pool.recycle()
            preloaded.append(pool.workers[0].preloaded)
        return {
            "backend": backend,
            "worker_start": method,
            "first_start_s": round(first, 2),
            "starts_s": round(pool.startup_seconds, 2),
            "recycles": pool.recycles,
            "preloaded": preloaded,
        }
    finally:
        pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="torch")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--worker-start", choices=WORKER_STARTS, default="spawn")
    parser.add_argument("--recycles", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(measure(args.backend, args.device, args.worker_start, args.recycles)))


if __name__ == "__main__":
    main()
