"""What the bench scripts share: the machine line of their JSON and, for those that time a
command on a synthetic run store, their options and the store (generated once, kept in
--store for reruns)."""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from collector.caseplan import Case

# Each step case's factor at the change point, so every store bench times the same store.
STEPS = (1.08, 1.05, 0.94, 1.10, 0.95, 1.06, 0.93, 1.12, 1.04, 0.96)


def number_options(doc: str | None, **defaults: float) -> argparse.Namespace:
    """Parses one option --NAME per keyword, of its default's type (int or float)."""
    parser = argparse.ArgumentParser(description=doc)
    for name, default in defaults.items():
        parser.add_argument(f"--{name}", type=type(default), default=default)
    return parser.parse_args()


def store_options(doc: str | None, prefix: str) -> tuple[argparse.Namespace, Path]:
    """--cases, --runs, --store and --repeat, and the store's folder (a fresh one under
    /tmp named PREFIX... without --store)."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--store", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    return args, args.store or Path(tempfile.mkdtemp(prefix=prefix)) / "store"


def ensure_store(store: Path, cases: list[Case], runs: int) -> float:
    """Generates the store of `cases` x `runs` unless one is there; the seconds it took."""
    from tests.history_store import make_store  # the store benches only: it reads the bot

    if (store / "collectbot-store.json").exists():
        return 0.0
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        make_store(store, Path(work), cases, runs=runs, steps=STEPS)
    return time.perf_counter() - t0


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table: `header`, its separator, then one line per row."""
    lines = [header, ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(str(cell) for cell in line) + " |" for line in lines)


def machine() -> str:
    return f"{platform.node()} {platform.machine()} {os.cpu_count()} cores"
