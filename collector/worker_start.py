"""How worker processes start (`Protocol.worker_start`): spawned, each importing its backend,
or forked from one server process that imported it once.

A spawned worker execs a new interpreter and imports its backend: vLLM takes about 20 s a
worker on the H200, and every round's fresh workers pay it while the GPU waits. A forkserver
imports the backend once, without a CUDA context (torch and vLLM make none at import; vLLM
forks its own workers the same way), and forks each worker from that state: a fresh process
that only has to make its CUDA context. The server starts with the measured code's
environment (no secret), which every worker it forks inherits. There is one server per
process, so a pool that would need another backend or environment while the server serves
a live pool is refused, never handed the other's. A server whose imports made a CUDA
context anyway (FlashInfer's GEMM module does on a GPU machine) would fork workers that
cannot use CUDA at all; its first child finds that out, and workers are spawned instead.
"""

from __future__ import annotations

import multiprocessing as mp
import sys
from collections.abc import Mapping
from multiprocessing import forkserver
from multiprocessing.context import ForkServerContext, SpawnContext
from typing import ClassVar

from collector.backends import preload_module
from collector.environment import environment_for_children
from collector.timing import WORKER_STARTS


class _Server:
    """The process's forkserver: what it preloaded, with which environment, for how many
    live pools."""

    key: tuple[str, tuple[tuple[str, str], ...]] | None = None
    users = 0
    # Preloads found to make a CUDA context: their pools spawn without trying again.
    spoilt: ClassVar[set[str]] = set()


def acquire(method: str, backend: str, env: Mapping[str, str]) -> SpawnContext | ForkServerContext:
    """The multiprocessing context a pool starts its workers with; for "forkserver", a server
    that has imported `backend` under exactly `env` (started, or restarted when idle)."""
    if method == "spawn":
        return mp.get_context("spawn")
    if method != "forkserver":
        raise ValueError(f"worker_start {method!r} is not one of {WORKER_STARTS}")
    key = (preload_module(backend), tuple(sorted(env.items())))
    if key[0] in _Server.spoilt:
        return mp.get_context("spawn")
    if _Server.key != key:
        if _Server.users:
            raise RuntimeError(
                "the forkserver serves a live worker pool of another backend or environment; "
                "one at a time per process"
            )
        # A server started for another key (or by someone else) goes: its workers would
        # inherit what it imported and the environment it was started with.
        forkserver._forkserver._stop()  # type: ignore[attr-defined]
        context = mp.get_context("forkserver")
        context.set_forkserver_preload(["collector.worker", key[0]])
        with environment_for_children(env):
            forkserver.ensure_running()
        # The server preloads after it starts: one child waits for that, so that the
        # import is timed here (the server's start), not in some worker's start.
        ready = context.Process(target=_check_fork, name="collector-forkserver-ready")
        ready.start()
        ready.join()
        if ready.exitcode == CUDA_BEFORE_FORK:
            forkserver._forkserver._stop()  # type: ignore[attr-defined]
            _Server.key = None
            _Server.spoilt.add(key[0])
            print(
                f"warning: importing {key[0]} made a CUDA context, which forked workers "
                "cannot use; workers are spawned instead",
                file=sys.stderr,
                flush=True,
            )
            return mp.get_context("spawn")
        _Server.key = key
    _Server.users += 1
    return mp.get_context("forkserver")


# The exit status of a forked child whose torch had made a CUDA context before the fork.
CUDA_BEFORE_FORK = 86


def _check_fork() -> None:
    """A child's whole work: being forked at all proves the server has preloaded; torch
    marks a child forked after CUDA was initialised, where every CUDA call would fail."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda._is_in_bad_fork():
        sys.exit(CUDA_BEFORE_FORK)


def release(method: str) -> None:
    """A pool that acquired `method` has closed."""
    if method == "forkserver":
        _Server.users = max(0, _Server.users - 1)
