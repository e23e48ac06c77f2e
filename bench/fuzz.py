"""Fuzz the comment sanitiser and the run-record reader with many inputs; report any crash.

    python -m bench.fuzz sanitizer --n 100000 [--seed 1] [--jobs 2]
    python -m bench.fuzz reader --n 100000 [--seed 1] [--jobs 2] [--crashes DIR]

`sanitizer`: random hostile text (tests/hostile.py: mentions, comment delimiters, fences,
pipes, controls, bidi, ANSI and workflow commands mixed with arbitrary Unicode) through
`clean`, `md_text`, `md_code` and `md_block`, each output checked against the invariants of
tests/test_props_sanitize.py.

`reader`: a valid run record copied and damaged by `tests.hostile.Mutator` (run.json fields
replaced or dropped, odd file names, random failures.json, parquet columns retyped, dropped
or duplicated, bytes flipped or truncated; 70% re-checksummed so the reader gets past the
checksums into the tables). Each input must either read, with the reader's promises kept,
or raise `RunRecordError` with a one-line message. Any other exception is a crash; with
`--crashes DIR` the damaged record is kept there with its traceback.

Inputs are derived from `--seed` and the input's index, so a crash reproduces with
`--start INDEX --n 1`. Prints one JSON line per target: inputs, crashes, seconds, rate.
The numbers in docs/benchmarks.md come from this script.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import re
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any


def _hostile_text(rng: random.Random) -> str:
    from tests.hostile import random_text

    return random_text(rng, pieces=rng.choice([2, 6, 20]))


def check_sanitizer(text: str, limit: int) -> None:
    from bot.render.sanitize import clean, md_block, md_code, md_text
    from tests.hostile import INVISIBLE, ISSUE, MENTION, unescaped_pipes

    for out in (str(md_text(text, limit)), str(md_code(text, limit)), str(md_block(text))):
        assert not MENTION.search(out), ("mention", out)
        assert not ISSUE.search(out), ("issue", out)
        assert "<!--" not in out and "-->" not in out, ("comment", out)
        assert not INVISIBLE.search(out.replace("\n", "")), ("control", out)
    inline = str(md_text(text, limit))
    assert "\n" not in inline and "<" not in inline and unescaped_pipes(inline) == 0
    span = str(md_code(text, limit))
    fence = re.match(r"`+", span)
    assert fence and span.endswith(fence.group()) and "\n" not in span
    assert fence.group() not in span[len(fence.group()) : -len(fence.group())]
    block = str(md_block(text))
    first, _, rest = block.partition("\n")
    inner, _, last = rest.rpartition("\n")
    assert last == first and first not in inner
    assert "\x1b" not in clean(text)


def _sanitizer_chunk(args: tuple[int, int, int]) -> dict[str, Any]:
    seed, start, count = args
    crashes = []
    for i in range(start, start + count):
        rng = random.Random(f"{seed}:{i}")
        text = _hostile_text(rng)
        try:
            check_sanitizer(text, rng.choice([1, 20, 200, 2000]))
        except Exception as exc:  # a crash or a broken invariant
            crashes.append({"index": i, "input": text, "error": repr(exc)[:500]})
    return {"count": count, "crashes": crashes}


def _pipeline(template: Path, run: Path) -> None:
    """A damaged record that reads must also compare (both ways) and render safely."""
    from bot.compare.comparison import compare_records
    from bot.render.comment import RenderOptions, render_comment
    from collector.errors import UserError
    from collector.record import read_record
    from tests.hostile import assert_safe_comment

    base, cand = read_record(template), read_record(run)
    for a, b in ((base, cand), (cand, base)):
        try:
            comparison = compare_records(a, b)
        except UserError:
            continue
        assert_safe_comment(render_comment(comparison, RenderOptions(head_sha="a" * 40)))


def _reader_chunk(args: tuple[int, int, int, str, str | None, bool]) -> dict[str, Any]:
    seed, start, count, template, keep, pipeline = args
    from collector.errors import RunRecordError
    from collector.record import read_record
    from tests.hostile import Mutator
    from tests.test_props_record import check_promises

    crashes = []
    outcomes = {"read": 0, "refused": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(start, start + count):
            run = Path(tmp) / f"run-{i}"
            shutil.copytree(template, run)
            rng = random.Random(f"{seed}:{i}")
            mutations = Mutator(rng).mutate(run)
            try:
                try:
                    record = read_record(run)
                except RunRecordError as exc:
                    assert "\n" not in str(exc).strip(), "multi-line error"
                    outcomes["refused"] += 1
                else:
                    check_promises(record)
                    outcomes["read"] += 1
                    if pipeline:
                        _pipeline(Path(template), run)
            except Exception as exc:
                crash = {
                    "index": i,
                    "mutations": mutations,
                    "error": f"{type(exc).__name__}: {exc}"[:500],
                    "where": traceback.format_exc().strip().splitlines()[-3][:300],
                }
                crashes.append(crash)
                if keep:
                    dest = Path(keep) / f"crash-{i}"
                    shutil.copytree(run, dest, dirs_exist_ok=True)
                    (dest / "CRASH.txt").write_text(traceback.format_exc())
            shutil.rmtree(run)
    return {"count": count, "crashes": crashes, **outcomes}


def _template(where: Path) -> Path:
    import numpy as np

    from tests.factories import failure, gemm_case, simulated_runs, write_record

    rng = np.random.default_rng(5)
    cases = [gemm_case(m) for m in (1, 2, 4, 8)]
    return write_record(
        where / "template",
        cases,
        lambda c: None if c.params["m"] == 8 else simulated_runs(rng, 0.1 * c.params["m"]),
        failures=[failure(cases[3], "CUDA error: illegal memory access", cls="cuda_fatal")],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "target",
        choices=("sanitizer", "reader", "pipeline"),
        help="what to fuzz (pipeline: the reader, then compare and render what reads)",
    )
    parser.add_argument("--n", type=int, default=10000, help="number of inputs")
    parser.add_argument("--start", type=int, default=0, help="index of the first input")
    parser.add_argument("--seed", type=int, default=1, help="seed of the input stream")
    parser.add_argument("--jobs", type=int, default=max(1, mp.cpu_count()), help="processes")
    parser.add_argument("--crashes", type=Path, default=None, help="keep crashing inputs here")
    args = parser.parse_args(argv)
    chunk = 5000 if args.target == "sanitizer" else 500
    starts = range(args.start, args.start + args.n, chunk)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        if args.target in ("reader", "pipeline"):
            template = str(_template(Path(tmp)))
            keep = str(args.crashes) if args.crashes else None
            pipeline = args.target == "pipeline"
            work: list[Any] = [
                (args.seed, s, min(chunk, args.start + args.n - s), template, keep, pipeline)
                for s in starts
            ]
            fn: Any = _reader_chunk
        else:
            work = [(args.seed, s, min(chunk, args.start + args.n - s)) for s in starts]
            fn = _sanitizer_chunk
        with mp.get_context("spawn").Pool(args.jobs) as pool:
            results = pool.map(fn, work, chunksize=1)
    seconds = time.perf_counter() - t0
    crashes = [c for r in results for c in r["crashes"]]
    summary: dict[str, Any] = {
        "target": args.target,
        "inputs": sum(r["count"] for r in results),
        "crashes": len(crashes),
        "seconds": round(seconds, 1),
        "per_second": round(sum(r["count"] for r in results) / seconds, 1),
        "seed": args.seed,
    }
    if args.target != "sanitizer":
        summary["read"] = sum(r["read"] for r in results)
        summary["refused"] = sum(r["refused"] for r in results)
    kinds: dict[str, list[int]] = {}
    for crash in crashes:
        kind = f"{crash['error'].split(':')[0]} at {crash.get('where', '').strip()}"
        kinds.setdefault(kind, []).append(crash["index"])
    if kinds:
        summary["crash_kinds"] = {k: {"count": len(v), "first": min(v)} for k, v in kinds.items()}
    print(json.dumps(summary))
    for crash in crashes[:20]:
        print(json.dumps(crash), file=sys.stderr)
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
