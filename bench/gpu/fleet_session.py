"""H200 fleet validation (docs/fleet.md): a baseline from one GPU, candidates on another.

Four steps; `draw` and `analyse` run on a CPU machine, `base` and `cand` on the GPU machine,
`cand` on a later, separate start of it (which usually gives another physical GPU):

    python -m bench.gpu.fleet_session draw [--seed 26 --count 64]
        draws GEMM shapes (bf16, fp8) at random from the H200 reference table, outside the
        project's case files and the panel, into bench/gpu/fleet_cases.yaml (committed)
    PYTHONUNBUFFERED=1 python3 -m bench.gpu.fleet_session base --out $OUT
        one collection with the shipped defaults (and the calibration panel), stored as
        main's baseline; $OUT/fleet-base-store.tar.gz and $OUT/fleet-base-summary.json
    PYTHONUNBUFFERED=1 python3 -m bench.gpu.fleet_session cand --out $OUT \
        --baseline bench/results/<dir>/fleet-base-store.tar.gz
        unchanged candidates A and B and a +3% canary C (on the cases the baseline measured
        at 40 us or more), interleaved by rounds, with the shipped defaults and the panel;
        A-vs-base and C-vs-base through the default path's baseline selection and
        comparison, A-vs-B (one GPU); $OUT/fleet-cand-summary.json and
        $OUT/fleet-cand-records.tar.gz (records, comparisons, comments)
    python -m bench.gpu.fleet_session analyse DIR
        the acceptance figures of issue 26 from the returned files

Every step prints timestamped progress; the GPU steps stop starting rounds at --minutes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bench import reference_data
from bot.compare.comparison import Baseline, Comparison, compare_runs
from bot.compare.stats import Settings
from bot.compare.store_baseline import baseline_from_store
from bot.store import RunStore
from collector.canary import Canary
from collector.caseplan import CaseSelector, build_plan, builtin_case_text
from collector.engine import CollectConfig, Collection
from collector.ops.gemm import GEMM
from collector.panel import CPU_PANEL, GPU_PANEL
from collector.record import RunRecord, read_record
from collector.timing import Protocol

HERE = Path(__file__).resolve().parent
CASE_FILE = HERE / "fleet_cases.yaml"
REFERENCE = "h200_sxm_gemm_vllm_0.24.0_gemm_perf.parquet"
DTYPES = ("bfloat16", "fp8")
# Shapes drawn from: reference latency 5 us to 3 ms, operands under 1 GiB (a phase's budget).
MIN_MS, MAX_MS, MAX_BYTES = 0.005, 3.0, 1 << 30
CANARY_FACTOR, CANARY_MIN_MS = 1.03, 0.040
STORE_REF = "main"
BASE_TAR, BASE_SUMMARY = "fleet-base-store.tar.gz", "fleet-base-summary.json"
CAND_TAR, CAND_SUMMARY = "fleet-cand-records.tar.gz", "fleet-cand-summary.json"
# The CPU stand-in set (tests of this script): tiny shapes, same file.
CPU_SET = (
    ("float32", 8, 256, 256),
    ("float32", 16, 256, 512),
    ("float32", 32, 512, 256),
    ("bfloat16", 16, 256, 256),
    ("bfloat16", 32, 256, 512),
    ("bfloat16", 64, 512, 512),
)
# A quick protocol for the CPU tests only (`--test-protocol`); the GPU runs ship defaults.
TEST_PROTOCOL = Protocol(
    runs=3, samples=3, warmup=1, target_sample_ms=0.3, idle_ratio=0.0, target_ci=0.0
)
_T0 = time.monotonic()


def default_table() -> Path | None:
    """The field's vLLM 0.24.0 H200 GEMM table in `$COLLECTBOT_AIC_DATA`, None if unset."""
    folder = reference_data.default_dir()
    return folder / REFERENCE if folder else None


def say(text: str) -> None:
    stamp = datetime.now(UTC).strftime("%H:%M:%S")
    # Progress on stderr: stdout carries only each step's JSON result.
    print(f"[{stamp} +{time.monotonic() - _T0:6.1f}s] {text}", file=sys.stderr, flush=True)


# --- draw ---------------------------------------------------------------------------------
Shape = tuple[str, int, int, int]
# The size classes the draws and their reports use (reference latency, ms).
SIZE_BUCKETS = (
    ("<20us", 0.0, 0.02),
    ("20-100us", 0.02, 0.1),
    ("0.1-1ms", 0.1, 1.0),
    (">1ms", 1.0, 1e9),
)


def shapes_of(case_file: Path | None) -> set[Shape]:
    """Every GEMM shape of a case file's sets (None: collector/cases/gemm.yaml)."""
    text = case_file.read_text() if case_file else builtin_case_text("gemm")[0]
    shapes = set()
    for name in yaml.safe_load(text)["sets"]:
        for case in build_plan(("gemm",), case_file=case_file, case_set=name).cases:
            p = case.params
            shapes.add((str(p["gemm_dtype"]), int(p["m"]), int(p["n"]), int(p["k"])))
    return shapes


def project_shapes() -> set[Shape]:
    """Every GEMM shape in the project's case files (every set) and the panels."""
    return shapes_of(None) | set(GPU_PANEL) | set(CPU_PANEL)


def runnable(dtype: str, m: int, n: int, k: int) -> bool:
    """Shapes the collector can run: torch._scaled_mm's alignment for fp8, vLLM's
    128-wide quantisation blocks along k for fp8_block (k=64 asserts there)."""
    if dtype == "fp8":
        return n % 16 == 0 and k % 16 == 0
    return dtype != "fp8_block" or k % 128 == 0


def eligible(
    table: Path, dtypes: tuple[str, ...], taken: set[Shape], max_ms: float = MAX_MS
) -> list[tuple[Shape, float]]:
    """The reference table's shapes of `dtypes` within the latency and operand limits, none
    of `taken`, sorted, each with its reference latency (ms)."""
    import pyarrow.parquet as pq

    data = pq.read_table(table, columns=["gemm_dtype", "m", "n", "k", "latency"]).to_pydict()
    rows = zip(data["gemm_dtype"], data["m"], data["n"], data["k"], data["latency"], strict=True)
    return sorted(
        {
            (str(d), int(m), int(n), int(k)): float(ms)
            for d, m, n, k, ms in rows
            if d in dtypes
            and MIN_MS <= ms <= max_ms
            and GEMM.bytes_moved({"gemm_dtype": d, "m": m, "n": n, "k": k}) <= MAX_BYTES
            and runnable(str(d), int(m), int(n), int(k))
            and (str(d), int(m), int(n), int(k)) not in taken
        }.items()
    )


def size_bucket(ms: float) -> str:
    return next(name for name, lo, hi in SIZE_BUCKETS if lo <= ms < hi)


def write_cases(
    out: Path, header: list[str], picked: list[tuple[Shape, float]], cpu_set: Iterable[Shape]
) -> dict[str, Any]:
    """The drawn shapes as a case file (set `default`, the reference latency as a comment)
    and the CPU stand-in set (`cpu`); returns the draw's counts by dtype and size."""
    lines = [*header, "op: gemm", "sets:", "  default:", "    - cases:"]
    for (d, m, n, k), ms in picked:
        lines.append(f"        - {{gemm_dtype: {d}, m: {m}, n: {n}, k: {k}}}  # {ms * 1000:.1f} us")
    lines += ["  # CPU stand-in shapes: the script's own tests.", "  cpu:", "    - cases:"]
    lines += [f"        - {{gemm_dtype: {d}, m: {m}, n: {n}, k: {k}}}" for d, m, n, k in cpu_set]
    out.write_text("\n".join(lines) + "\n")
    build_plan(("gemm",), case_file=out)  # the file must load as a case file
    dtypes = sorted({s[0] for s, _ in picked})
    return {
        "file": str(out),
        "drawn": len(picked),
        "by_dtype": {d: sum(1 for s, _ in picked if s[0] == d) for d in dtypes},
        "by_size": {
            name: sum(1 for _, ms in picked if size_bucket(ms) == name)
            for name, _, _ in SIZE_BUCKETS
        },
    }


def draw(table: Path, seed: int, count: int, out: Path) -> dict[str, Any]:
    """A seeded random sample of eligible reference shapes, written as a case file."""
    pool = eligible(table, DTYPES, project_shapes())
    rng = np.random.default_rng(seed)
    picked = sorted(
        (pool[i] for i in rng.choice(len(pool), size=count, replace=False)),
        key=lambda item: (item[0][0], item[1]),
    )
    header = [
        "# GEMM shapes for bench/gpu/fleet_session.py (docs/fleet.md), drawn at random by",
        f"# `python -m bench.gpu.fleet_session draw --seed {seed} --count {count}` from",
        f"# {table.name} ({len(pool)} eligible: bf16/fp8, {MIN_MS * 1000:g} us to",
        f"# {MAX_MS:g} ms there, operands under 1 GiB, none of collector/cases/gemm.yaml or the",
        "# panel). The comments are the reference table's latencies.",
    ]
    report = write_cases(out, header, picked, CPU_SET)
    return {"file": report.pop("file"), "eligible": len(pool), **report}


# --- collections ----------------------------------------------------------------------------
def config(
    out: Path,
    args: argparse.Namespace,
    canary: Canary | None = None,
    protocol: Protocol | None = None,
    **overrides: Any,
) -> CollectConfig:
    """The shipped defaults (or the CPU tests' protocol); `protocol` and `overrides` (any
    CollectConfig field) serve other scripts."""
    if protocol is None:
        protocol = TEST_PROTOCOL if args.test_protocol else Protocol()
    cfg = CollectConfig(
        out=out,
        backend="torch",
        ops=("gemm",),
        device=args.device,
        case_file=args.cases,
        case_set=args.case_set,
        protocol=replace(protocol),
        canary=canary,
        quiet=True,
        workers=args.workers,
        case_timeout_s=300.0,
        command=["python3", "-m", "bench.gpu.fleet_session", *sys.argv[1:]],
    )
    return replace(cfg, **overrides)


def drive(collections: dict[str, Collection], deadline: float, rounds: int | None = None) -> bool:
    """Rounds in rotating order (A B C, B C A, ...), all or the first `rounds`; False when
    the deadline cut them short."""
    names = list(collections)
    last = max(c.cfg.protocol.runs for c in collections.values())
    for r in range(last if rounds is None else min(rounds, last)):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            if time.monotonic() > deadline:
                say(f"deadline reached before round {r} of {name}")
                return False
            t0 = time.monotonic()
            c = collections[name]
            c.run_round(r)
            say(f"round {r} {name}: {time.monotonic() - t0:.1f} s, tasks {c.done_tasks()}")
    return True


def cost(record: RunRecord) -> dict[str, Any]:
    """Device seconds of the cases, the panel and worker starts; runs per case."""
    perf = record.perf["gemm"]
    case_s = float(np.sum(perf.column("device_seconds").to_numpy(zero_copy_only=False)))
    panel = record.meta.get("panel") or {}
    devices = panel.get("devices") or {}
    runs = [len(k["run_ms"]) for d in devices.values() for k in d["kernels"]]
    starts = record.meta.get("worker_starts") or {}
    return {
        "cases": perf.num_rows,
        "case_device_s": round(case_s, 2),
        "runs_mean": float(np.mean(perf.column("runs").to_numpy())) if perf.num_rows else 0.0,
        "panel_device_s": panel.get("device_seconds"),
        "panel_kernels": max((len(d["kernels"]) for d in devices.values()), default=0),
        "panel_runs_per_kernel": min(runs, default=0),
        "panel_share_of_cases": round(float(panel.get("device_seconds") or 0) / case_s, 4)
        if case_s
        else None,
        "worker_start_s": starts.get("seconds"),
        "gpus": sorted(devices),
    }


def finish(collections: dict[str, Collection], complete: bool) -> None:
    for c in collections.values():
        c.finish("complete" if complete else "partial")


def pack(out: Path, name: str, root: Path, members: Iterable[str]) -> Path:
    target = out / name
    with tarfile.open(target, "w:gz") as tar:
        for member in members:
            tar.add(root / member, arcname=member)
    say(f"packed {target.name}: {target.stat().st_size / 1e6:.1f} MB")
    return target


def workdir(args: argparse.Namespace, prefix: str) -> Path:
    """Where the records are written before packing (--work, else a fresh temp dir)."""
    if args.work is None:
        return Path(tempfile.mkdtemp(prefix=prefix))
    args.work.mkdir(parents=True, exist_ok=False)
    return Path(args.work)


def run_base(args: argparse.Namespace) -> dict[str, Any]:
    deadline = time.monotonic() + args.minutes * 60
    work = workdir(args, "fleet-base-")
    say(f"base: {args.cases} set {args.case_set} on {args.device}")
    collections = {"base": Collection(config(work / "base-run", args))}
    say(f"workers ready; {len(collections['base'].plan.cases)} cases")
    complete = drive(collections, deadline)
    finish(collections, complete)
    record = read_record(work / "base-run")
    entry = RunStore(str(work / "store")).put(work / "base-run", ref=STORE_REF)
    summary = {
        "phase": "base",
        "status": record.status,
        "run_id": record.meta["run_id"],
        "device": record.meta["device"],
        "gpu_uuids": entry.gpu_uuids,
        "store_entry": entry.name,
        "cost": cost(record),
        "seconds": round(time.monotonic() - _T0, 1),
    }
    pack(args.out, BASE_TAR, work, ["store"])
    (args.out / BASE_SUMMARY).write_text(json.dumps(summary, indent=1) + "\n")
    say(f"base done: {json.dumps(summary['cost'])}")
    return summary


def shape_selector(rows: list[dict[str, Any]]) -> tuple[CaseSelector, list[str]]:
    """A selector matching exactly these GEMM rows (case fields and case_key), and the keys."""
    text = ";".join(f"gemm_dtype={r['gemm_dtype']},m={r['m']},n={r['n']},k={r['k']}" for r in rows)
    return CaseSelector.parse(text), [str(r["case_key"]) for r in rows]


def canary_selector(base: RunRecord) -> tuple[CaseSelector, list[str]]:
    """The cases the baseline measured at CANARY_MIN_MS or more, as a selector."""
    return shape_selector(
        [r for r in base.perf["gemm"].to_pylist() if r["latency"] >= CANARY_MIN_MS]
    )


def summarise(cmp: Comparison, slowed: set[str] | None = None) -> dict[str, Any]:
    """Flags, ratios and spread of one comparison; detection when `slowed` is given."""
    t = cmp.cases
    verdicts = t["verdict"]
    flagged = np.isin(verdicts, ["regressed", "improved"])
    diff = np.abs(t["ratio"][np.isfinite(t["ratio"])] - 1.0) * 100
    gpu = cmp.data["latency"].get("gpu") or {}
    out: dict[str, Any] = {
        "level": cmp.data["verdict"]["level"],
        "headline": cmp.data["verdict"]["headline"],
        "mode": gpu.get("mode"),
        "gpu_cases": gpu.get("cases"),
        "offset_range": gpu.get("offset_range"),
        "fits": [
            {
                "base": p["base"]["uuid"],
                "cand": p["cand"]["uuid"],
                "calibrated": p["calibrated"],
                **{k: p.get("fit", {}).get(k) for k in ("degree", "scatter", "curve")},
            }
            for p in gpu.get("pairs") or []
        ],
        "cases": len(t),
        "verdicts": {str(v): int((verdicts == v).sum()) for v in sorted(set(verdicts))},
        "flagged": int(flagged.sum()),
        "median_ratio": float(np.median(t["ratio"])) if len(t) else None,
        "median_raw_ratio": float(np.median(t["raw_ratio"])) if len(t) else None,
        "abs_diff_pct": {
            q: float(np.percentile(diff, p)) if diff.size else None
            for q, p in (("median", 50), ("p90", 90), ("p99", 99), ("max", 100))
        },
        "baseline_selection": (cmp.data["baseline"].get("store") or {}).get("selection"),
    }
    if slowed is not None:
        keys = np.asarray([str(k) for k in t["key"]], dtype=object)
        hit = np.isin(keys, sorted(slowed))
        out["slowed"] = int(hit.sum())
        out["detected"] = int(((verdicts == "regressed") & hit).sum())
        out["others_flagged"] = int((flagged & ~hit).sum())
    return out


def run_cand(args: argparse.Namespace) -> dict[str, Any]:
    deadline = time.monotonic() + args.minutes * 60
    work = workdir(args, "fleet-cand-")
    untar(args.baseline, work)
    store = RunStore(str(work / "store"))
    [entry] = store.entries()[-1:]
    base_local = read_record(store.get(entry, work / "stored-base"))
    if not any(r["latency"] >= CANARY_MIN_MS for r in base_local.perf["gemm"].to_pylist()):
        raise SystemExit(f"error: {args.baseline}: no baseline case of {CANARY_MIN_MS} ms or more")
    selector, slowed = canary_selector(base_local)
    say(f"cand: baseline {entry.name} on {entry.gpu_uuids}; canary on {len(slowed)} cases")
    canary = Canary(slow=selector, factor=CANARY_FACTOR)
    cfgs = {
        "A": config(work / "A", args),
        "B": config(work / "B", args),
        # C times the slowed cases only (their detection is C's job; false flags are A's).
        "C": replace(config(work / "C", args, canary), case_filter=selector),
    }
    collections = {name: Collection(cfg) for name, cfg in cfgs.items()}
    say("workers ready")
    complete = drive(collections, deadline)
    finish(collections, complete)
    records = {name: read_record(work / name) for name in cfgs}
    summary: dict[str, Any] = {
        "phase": "cand",
        "complete": complete,
        "baseline": {"entry": entry.name, "gpu_uuids": entry.gpu_uuids, "cost": cost(base_local)},
        "candidates": {
            name: {
                "status": r.status,
                "device": r.meta["device"],
                "gpu_uuids": sorted(
                    (r.meta.get("panel") or {}).get("devices") or [r.meta["device"].get("uuid")]
                ),
                "cost": cost(r),
            }
            for name, r in records.items()
        },
        "canary": {
            "factor": CANARY_FACTOR,
            "min_ms": CANARY_MIN_MS,
            "cases": len(slowed),
            "keys": slowed,
        },
    }
    try:
        summary["comparisons"] = compare_all(store, records, slowed, work)
    except Exception as exc:  # the records still come back: `analyse --recompute` redoes it
        summary["comparisons_error"] = f"{type(exc).__name__}: {exc}"
        say(f"comparisons failed ({summary['comparisons_error']}); records kept")
    summary["seconds"] = round(time.monotonic() - _T0, 1)
    members = ["A", "B", "C", "store"] + (
        ["comparisons"] if (work / "comparisons").is_dir() else []
    )
    pack(args.out, CAND_TAR, work, members)
    (args.out / CAND_SUMMARY).write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def compare_all(
    store: RunStore, records: dict[str, RunRecord], slowed: list[str], work: Path
) -> dict[str, Any]:
    """A-vs-base and C-vs-base as the default path compares them (the stored baseline
    chosen for each candidate's GPUs), and A-vs-B on one GPU; written under work/comparisons."""
    cmp_root = work / "comparisons"
    results: dict[str, Any] = {}
    for name, cand_name in (("A-vs-base", "A"), ("C-vs-base", "C")):
        fetched = work / f"base-for-{cand_name}"
        shutil.rmtree(fetched, ignore_errors=True)
        base, baseline = baseline_from_store(records[cand_name], store.url, fetched, ref=STORE_REF)
        cmp = compare_runs(base, records[cand_name], Settings(), baseline)
        results[name] = summarise(cmp, set(slowed) if cand_name == "C" else None)
        write(cmp, cmp_root / name)
        say(f"{name}: {results[name]['headline']}")
    aa = compare_runs(records["A"], records["B"], Settings(), Baseline(kind="explicit-run"))
    results["A-vs-B"] = summarise(aa)
    write(aa, cmp_root / "A-vs-B")
    say(f"A-vs-B: {results['A-vs-B']['headline']}")
    return results


def untar(path: Path, dest: Path) -> None:
    with tarfile.open(path) as tar:
        try:
            tar.extractall(dest, filter="data")
        except TypeError:  # Python before 3.11.4: no filter argument; our own tarball
            tar.extractall(dest)


def write(cmp: Comparison, out: Path) -> None:
    cmp.write(out)
    from bot.render.comment import render_comment

    (out / "comment.md").write_text(render_comment(cmp.data))


# --- analyse --------------------------------------------------------------------------------
def recompute(directory: Path) -> dict[str, Any]:
    """The comparisons again, here, from the records and store the cand step packed."""
    work = Path(tempfile.mkdtemp(prefix="fleet-analyse-"))
    untar(directory / CAND_TAR, work)
    records = {name: read_record(work / name) for name in ("A", "B", "C")}
    cand = json.loads((directory / CAND_SUMMARY).read_text())
    return compare_all(RunStore(str(work / "store")), records, cand["canary"]["keys"], work)


def analyse(directory: Path, again: bool = False) -> dict[str, Any]:
    """Issue 26's acceptance figures from a cand summary (and the base summary, if there);
    `again` (or a summary without comparisons) recomputes them from the packed records."""
    cand = json.loads((directory / CAND_SUMMARY).read_text())
    base_file = directory / BASE_SUMMARY
    base = json.loads(base_file.read_text()) if base_file.is_file() else None
    if again or "comparisons" not in cand:
        cand["comparisons"] = recompute(directory)
    cmps = cand["comparisons"]
    a, c, aa = cmps["A-vs-base"], cmps["C-vs-base"], cmps["A-vs-B"]
    a_cost = cand["candidates"]["A"]["cost"]
    out = {
        "baseline_gpus": cand["baseline"]["gpu_uuids"],
        "candidate_gpus": cand["candidates"]["A"]["gpu_uuids"],
        "cross_gpu": cand["baseline"]["gpu_uuids"] != cand["candidates"]["A"]["gpu_uuids"],
        "unchanged_vs_base": {
            "mode": a["mode"],
            "flagged": a["flagged"],
            "of": a["cases"],
            "pass": a["flagged"] <= 1 and a["cases"] >= 64,
            "offset_range": a["offset_range"],
            "median_raw_ratio": a["median_raw_ratio"],
        },
        "canary_vs_base": {
            "detected": c.get("detected"),
            "of": c.get("slowed"),
            "pass": bool(c.get("slowed")) and c["detected"] >= 0.9 * c["slowed"],
        },
        "same_gpu_aa": {
            "flagged": aa["flagged"],
            "p99_pct": aa["abs_diff_pct"]["p99"],
            "pass": aa["flagged"] == 0 and (aa["abs_diff_pct"]["p99"] or 0) <= 1.5,
        },
        "cost": {
            "case_device_s": a_cost["case_device_s"],
            "panel_device_s": a_cost["panel_device_s"],
            "panel_share_of_cases": a_cost["panel_share_of_cases"],
            "panel_runs_per_kernel": a_cost["panel_runs_per_kernel"],
            "panel_kernels": a_cost["panel_kernels"],
            "worker_start_s": a_cost["worker_start_s"],
        },
        "phase_seconds": {"base": base["seconds"] if base else None, "cand": cand["seconds"]},
    }
    return out


# --- command line ---------------------------------------------------------------------------
def collection_arguments(
    p: argparse.ArgumentParser, cases: Path, minutes: float
) -> argparse.ArgumentParser:
    """The options of a step that collects on the GPU machine."""
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--cases", type=Path, default=cases)
    p.add_argument("--case-set", default="default")
    p.add_argument("--device", default="cuda")
    p.add_argument("--workers", type=int, default=None)
    p.add_argument("--minutes", type=float, default=minutes)
    p.add_argument("--work", type=Path, default=None)
    p.add_argument("--test-protocol", action="store_true", help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    d = sub.add_parser("draw")
    d.add_argument("--table", type=Path, default=default_table())
    d.add_argument("--seed", type=int, default=26)
    d.add_argument("--count", type=int, default=64)
    d.add_argument("--out", type=Path, default=CASE_FILE)
    for name in ("base", "cand"):
        # Rounds stop starting after --minutes; packing and comparing take under a minute.
        p = collection_arguments(sub.add_parser(name), CASE_FILE, 7.5)
        if name == "cand":
            p.add_argument("--baseline", type=Path, required=True)
    a = sub.add_parser("analyse")
    a.add_argument("dir", type=Path)
    a.add_argument("--recompute", action="store_true")
    args = parser.parse_args(argv)
    if args.step == "draw":
        args.table = reference_data.require(args.table, "--table")
        if not args.table.is_file():
            print(f"error: {args.table}: reference table not found", file=sys.stderr)
            return 2
        print(json.dumps(draw(args.table, args.seed, args.count, args.out), indent=1))
        return 0
    if args.step == "analyse":
        if not (args.dir / CAND_SUMMARY).is_file():
            print(f"error: {args.dir / CAND_SUMMARY}: not found", file=sys.stderr)
            return 2
        print(json.dumps(analyse(args.dir, args.recompute), indent=1))
        return 0
    if not args.cases.is_file():
        print(f"error: {args.cases}: case file not found (run the draw step)", file=sys.stderr)
        return 2
    if args.step == "cand" and not args.baseline.is_file():
        print(f"error: {args.baseline}: baseline tarball not found", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    summary = run_base(args) if args.step == "base" else run_cand(args)
    print(json.dumps(summary, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
