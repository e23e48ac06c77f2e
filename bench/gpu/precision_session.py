"""Issue 22's acceptance on the H200: A/A, a +2% canary, realism and cost on a fresh draw.

Four steps; `draw` and `analyse` run on a CPU machine, `aa` and `fixed` on the GPU machine
(vLLM 0.24.0 from the offline bundle: docs/benchmarks.md says how):

    python -m bench.gpu.precision_session draw [--seed 22 --count 210] [--exclude FILE]
        draws GEMM shapes (bf16, fp8, fp8_block: a third each) at random from the vLLM
        0.24.0 H200 reference table, outside the project's case files, the panel,
        bench/gpu/fleet_cases.yaml and any --exclude file, into
        bench/gpu/precision_cases.yaml (committed)
    PYTHONUNBUFFERED=1 python3 -m bench.gpu.precision_session aa --out $OUT
        collections A and C with the shipped protocol (--worker-start names how their
        workers start), B with its workers started the other way (OTHER_START) or, with
        --b-set FIELD=VALUE (repeatable), A's protocol with those settings, C a +2%
        canary on the cases A's first round measured at 20 us or more (C times every case),
        interleaved by rounds, backend vllm;
        $OUT/precision-aa-records.tar.gz and $OUT/precision-aa-summary.json
    PYTHONUNBUFFERED=1 python3 -m bench.gpu.precision_session fixed --out $OUT [--sample N]
        collection F: the fixed protocol (10 runs, no adaptive stopping) on the same cases,
        or a seeded N of them; $OUT/precision-fixed-records.tar.gz and
        $OUT/precision-fixed-summary.json
    python -m bench.gpu.precision_session analyse DIR [--markdown FILE]
        the acceptance figures from the returned files (JSON; the table for the docs)

The GPU steps stop starting rounds at --minutes and resume where they stopped: from their
work folder (--work; it stays while the machine is warm) or, on a fresh machine, from the
returned tarball (--resume-from). Worker starts are added up over the calls (segments.json).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench import reference_data
from bench.gpu import fleet_session as fs
from bench.vllm_reference import case_key, compare_rows, offset_fit
from bot.compare.comparison import Baseline, compare_runs
from bot.compare.stats import Settings
from collector.aggregate import trimmed_mean
from collector.canary import Canary
from collector.caseplan import CaseSelector, build_plan
from collector.engine import Collection
from collector.errors import UserError
from collector.record import CHECKPOINT, RunRecord, read_record
from collector.timing import WORKER_STARTS, Protocol

HERE = Path(__file__).resolve().parent
CASE_FILE = HERE / "precision_cases.yaml"
DTYPES = ("bfloat16", "fp8", "fp8_block")
CANARY_FACTOR, CANARY_MIN_MS = 1.02, 0.020
FIXED_RUNS = 10
FIXED_SAMPLE_SEED = 2212
# Each step's collections.
STEPS = {"aa": ("A", "B", "C"), "fixed": ("F",)}
# A, C and F take the shipped protocol; B starts its workers the other way (--worker-start
# names A's), so the A/A also tests forked workers against spawned ones.
OTHER_START = {"spawn": "forkserver", "forkserver": "spawn"}
CANARY_JSON, SEGMENTS_JSON = "canary.json", "segments.json"
# Issue 22's floors (the A/A's on 200 shapes or more).
AA_P99_PCT, AA_MAX_PCT, CANARY_SHARE, REALISM_TOL, COST_PER_CASE_S = 1.5, 3.0, 0.95, 0.03, 0.6
MIN_CASES = 200
# The CPU stand-in set (the script's tests): one kernel well under 20 us, three over it.
CPU_SET = (
    ("float32", 1, 32, 32),
    ("float32", 16, 256, 512),
    ("bfloat16", 16, 256, 256),
    ("bfloat16", 32, 256, 512),
)
# The draw's device-time estimate (s): a case under / from 1 ms, collected adaptively with the
# shipped defaults and per run of the fixed protocol; a worker start; a panel. From issue 22's
# vLLM-backend figures and the torch records of bench/results/h200-2026-12-01-fleet.
CASE_S, RUN_S, START_S, PANEL_S = (0.6, 2.8), (0.15, 0.7), 4.6, 15.0


def tar_name(step: str) -> str:
    return f"precision-{step}-records.tar.gz"


def summary_name(step: str) -> str:
    return f"precision-{step}-summary.json"


# --- draw ---------------------------------------------------------------------------------
def taken() -> set[fs.Shape]:
    """What the draw leaves out: the project's case files and panels, the fleet draw."""
    return fs.project_shapes() | fs.shapes_of(fs.CASE_FILE) | set(CPU_SET)


def estimate(picked: list[tuple[fs.Shape, float]]) -> dict[str, float]:
    """Expected device seconds of the aa step (three collections) and the fixed step."""
    long = sum(1 for _, ms in picked if ms >= 1.0)
    short = len(picked) - long
    rounds = Protocol().runs
    adaptive = short * CASE_S[0] + long * CASE_S[1] + rounds * START_S + PANEL_S
    fixed = FIXED_RUNS * (short * RUN_S[0] + long * RUN_S[1] + START_S) + PANEL_S
    return {"aa": round(3 * adaptive), "fixed": round(fixed)}


def draw(
    table: Path, seed: int, count: int, out: Path, exclude: tuple[Path, ...] = ()
) -> dict[str, Any]:
    """A seeded sample, a third of each dtype, of the eligible reference shapes, none of
    the case files in `exclude` (an earlier draw whose shapes informed the protocol)."""
    left_out = taken().union(*(fs.shapes_of(path) for path in exclude))
    pool = fs.eligible(table, DTYPES, left_out)
    rng = np.random.default_rng(seed)
    picked: list[tuple[fs.Shape, float]] = []
    eligible: dict[str, int] = {}
    for i, dtype in enumerate(DTYPES):
        mine = [item for item in pool if item[0][0] == dtype]
        eligible[dtype] = len(mine)
        share = count // len(DTYPES) + (i < count % len(DTYPES))
        picked += [mine[j] for j in rng.choice(len(mine), size=share, replace=False)]
    picked.sort(key=lambda item: (item[0][0], item[1]))
    counts = ", ".join(f"{d} {n}" for d, n in eligible.items())
    header = [
        "# GEMM shapes for bench/gpu/precision_session.py (issue 22's acceptance,",
        "# docs/benchmarks.md), drawn at random by",
        f"# `python -m bench.gpu.precision_session draw --seed {seed} --count {count}"
        + "".join(f" --exclude {path}" for path in exclude)
        + "` from",
        f"# {table.name}: a third of each dtype among the eligible",
        f"# ({counts}: {fs.MIN_MS * 1000:g} us to {fs.MAX_MS:g} ms there, operands under 1 GiB,",
        "# fp8 n and k multiples of 16, fp8_block k a multiple of 128), none of",
        "# collector/cases/gemm.yaml, the panel or bench/gpu/fleet_cases.yaml. The comments",
        "# are the reference table's latencies.",
    ]
    report = fs.write_cases(out, header, picked, CPU_SET)
    return {"seed": seed, **report, "eligible": eligible, "estimate_device_s": estimate(picked)}


# --- the GPU steps --------------------------------------------------------------------------
def protocol_for(args: argparse.Namespace, name: str) -> Protocol:
    """The shipped protocol with --worker-start, B's workers started the other way; F: the
    fixed protocol. The CPU tests recycle (and prestart) workers on the CPU as 'gpu' does on
    CUDA."""
    base = fs.TEST_PROTOCOL if args.test_protocol else Protocol()
    base = replace(base, worker_start=args.worker_start)
    if args.test_protocol:
        base = replace(base, fresh_workers="always", prestart_workers="always")
    if name == "B" and getattr(args, "b_set", None):
        return replace(base, **dict(args.b_set))
    if name == "B":
        base = replace(base, worker_start=OTHER_START[base.worker_start])
    return replace(base, target_ci=0.0, runs=args.runs) if name == "F" else base


def protocol_override(text: str) -> tuple[str, Any]:
    """'capture_flush=true' -> ('capture_flush', True): a Protocol field and a value of its
    type (argparse's `type` for --b-set; a ValueError names what is wrong)."""
    name, sep, raw = text.partition("=")
    if not sep or name not in {f.name for f in dataclasses.fields(Protocol)}:
        raise ValueError(f"{text!r}: not FIELD=VALUE with FIELD a protocol setting")
    kind = type(getattr(Protocol(), name))
    if kind is bool:
        if raw.lower() not in ("true", "false"):
            raise ValueError(f"{name}: {raw!r} is not true or false")
        return name, raw.lower() == "true"
    value = kind(raw)
    replace(Protocol(), **{name: value})  # the protocol's own checks (choices)
    return name, value


def open_collection(
    work: Path, name: str, args: argparse.Namespace, canary: Canary | None = None
) -> Collection:
    """Collection `name` under work/, resumed where an earlier call left it."""
    out = work / name
    sample = fixed_sample(args) if name == "F" and args.sample else None
    cfg = fs.config(
        out,
        args,
        canary,
        protocol_for(args, name),
        case_filter=sample,
        backend=args.backend,
        resume=(out / CHECKPOINT).is_file(),
        command=["python3", "-m", "bench.gpu.precision_session", *sys.argv[1:]],
    )
    return Collection(cfg)


def fixed_sample(args: argparse.Namespace) -> CaseSelector:
    """F's cases: `--sample` of the set at random (seeded, as even across dtypes as the set
    allows), so that the fixed protocol's cost per case is measured on the same draw in a
    third of the device time."""
    cases = build_plan(("gemm",), case_file=args.cases, case_set=args.case_set).cases
    rng = np.random.default_rng(FIXED_SAMPLE_SEED)
    by_dtype: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        row = {**case.params, "case_key": case.key}
        by_dtype.setdefault(str(case.params["gemm_dtype"]), []).append(row)
    picked: list[dict[str, Any]] = []
    for i, rows in enumerate(by_dtype.values()):
        share = args.sample // len(by_dtype) + (i < args.sample % len(by_dtype))
        take = rng.choice(len(rows), size=min(share, len(rows)), replace=False)
        picked += [rows[j] for j in sorted(take)]
    return fs.shape_selector(picked)[0]


def prepare_work(args: argparse.Namespace, step: str) -> Path:
    """The step's work folder: an earlier call's (resumed), one unpacked from --resume-from,
    or a new one."""
    work = Path(args.work or Path(tempfile.gettempdir()) / f"precision-{step}")
    used = work.is_dir() and any(work.iterdir())
    if args.resume_from is not None:
        if used:
            raise UserError(f"{work}: not empty; resume from it without --resume-from")
        fs.untar(args.resume_from, work)
    elif used and not (work / SEGMENTS_JSON).is_file():
        raise UserError(f"{work}: not empty and not a {step} work folder (no {SEGMENTS_JSON})")
    work.mkdir(parents=True, exist_ok=True)
    if not (work / SEGMENTS_JSON).is_file():
        (work / SEGMENTS_JSON).write_text("[]\n")
    segments = json.loads((work / SEGMENTS_JSON).read_text())
    if any(seg["complete"] for seg in segments):
        raise UserError(f"{work}: the {step} step is complete; name a new --work to run it again")
    failed = sorted({n for seg in segments for n in seg.get("failed", [])})
    if failed:
        names = ", ".join(failed)
        raise UserError(
            f"{work}: collection {names} failed as a whole (its run.json says why); name a new "
            "--work to run the step again"
        )
    fs.say(f"{step}: work folder {work}")
    return work


def select_canary(a: Collection) -> dict[str, Any] | None:
    """The cases A's first round measured at CANARY_MIN_MS or more (None: not yet measured)."""
    if a.pending(0):
        return None
    rows = []
    for case in a.plan.cases:
        first = [r for r in a.state.runs.get(case.key, []) if r.run == 0]
        if first:
            ms = trimmed_mean(np.asarray(first[0].ms, dtype=float))
            rows.append({**case.params, "case_key": case.key, "latency": ms})
    slow = [r for r in rows if r["latency"] >= CANARY_MIN_MS]
    if not slow:
        raise UserError(f"no case of A's first round took {CANARY_MIN_MS * 1000:g} us or more")
    selector, keys = fs.shape_selector(slow)
    return {
        "factor": CANARY_FACTOR,
        "min_ms": CANARY_MIN_MS,
        "selector": selector.text,
        "keys": keys,
        "first_round_ms": {r["case_key"]: round(r["latency"], 6) for r in rows},
    }


def add_canary(
    work: Path, cols: dict[str, Collection], args: argparse.Namespace, deadline: float
) -> None:
    """C, once A's first round has chosen its slowed cases (kept in canary.json)."""
    path = work / CANARY_JSON
    if not path.is_file():
        fs.drive(cols, deadline, rounds=1)
        chosen = select_canary(cols["A"])
        if chosen is None:
            return
        path.write_text(json.dumps(chosen, indent=1) + "\n")
        fs.say(f"canary: x{CANARY_FACTOR} on {len(chosen['keys'])} cases")
    chosen = json.loads(path.read_text())
    canary = Canary(slow=CaseSelector.parse(chosen["selector"]), factor=chosen["factor"])
    cols["C"] = open_collection(work, "C", args, canary)


def run_step(args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.monotonic()
    deadline = t0 + args.minutes * 60
    work = prepare_work(args, args.step)
    cols: dict[str, Collection] = {}
    try:  # workers ignore SIGTERM: an error must close them, or the interpreter waits forever
        for name in STEPS[args.step]:
            if name != "C":  # C once A's first round has chosen its cases (add_canary)
                cols[name] = open_collection(work, name, args)
        fs.say(f"workers ready; {len(cols[next(iter(cols))].plan.cases)} cases")
        if args.step == "aa":
            add_canary(work, cols, args, deadline)
        complete = set(cols) == set(STEPS[args.step]) and fs.drive(cols, deadline)
    except BaseException:
        for c in cols.values():
            c.close()
        raise
    fs.finish(cols, complete)
    records = {name: read_record(work / name) for name in cols}
    # A collection that failed as a whole (e.g. its framework would not import) leaves the
    # step incomplete: the same work folder is then refused (`prepare_work`).
    failed = sorted(n for n, r in records.items() if r.status == "failed")
    complete = complete and not failed
    segments = add_segment(work, cols, complete, time.monotonic() - t0, failed)
    summary = {
        "step": args.step,
        "complete": complete,
        "failed": failed,
        "segments": len(segments),
        "collections": {n: collection_summary(r, segments, n) for n, r in records.items()},
        "seconds": round(time.monotonic() - t0, 1),
    }
    extra = [CANARY_JSON] if (work / CANARY_JSON).is_file() else []
    fs.pack(args.out, tar_name(args.step), work, [*cols, SEGMENTS_JSON, *extra])
    (args.out / summary_name(args.step)).write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def add_segment(
    work: Path,
    cols: dict[str, Collection],
    complete: bool,
    seconds: float,
    failed: list[str] | None = None,
) -> list[dict[str, Any]]:
    """This call in segments.json: its seconds, each collection's worker starts (a resumed
    record keeps only its last call's) and the collections that failed as a whole."""
    path = work / SEGMENTS_JSON
    segments = json.loads(path.read_text())
    segments.append(
        {
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
            "seconds": round(seconds, 1),
            "complete": complete,
            "failed": failed or [],
            "worker_starts": {name: c.meta.get("worker_starts") for name, c in cols.items()},
        }
    )
    path.write_text(json.dumps(segments, indent=1) + "\n")
    return list(segments)


def charged_starts(segments: list[dict[str, Any]], name: str) -> tuple[float, float]:
    """(Worker-start seconds charged to collection `name`, the forkserver starts in them).

    The collections of one call share its forkserver, and the first to start pays for it;
    on its own each would start one, so each is charged its calls' server start instead of
    its own share. Records made before the pools timed their server charge what they held.
    """
    total = 0.0
    for segment in segments:
        starts = segment["worker_starts"]
        if starts.get(name):
            total += float(starts[name]["seconds"]) - float(starts[name].get("server_seconds") or 0)
    shared = sum(server_starts(segments, name))
    return round(total + shared, 3), round(shared, 3)


def server_starts(segments: list[dict[str, Any]], name: str) -> list[float]:
    """The forkserver start of every call that ran collection `name` (0 where none started,
    or where `name` spawned its workers and so used none)."""
    calls = [s["worker_starts"] for s in segments if s["worker_starts"].get(name)]
    return [
        max((float(w.get("server_seconds") or 0) for w in starts.values() if w), default=0)
        if starts[name].get("method", "forkserver") == "forkserver"
        else 0.0
        for starts in calls
    ]


def all_in_cost(record: RunRecord, segments: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """fleet_session's cost with the worker starts of every call, and the all-in total:
    the cases' device seconds, the worker starts and the panel."""
    out = fs.cost(record)
    starts = [s["worker_starts"][name] for s in segments if s["worker_starts"].get(name)]
    out["worker_start_s"], out["server_start_s"] = charged_starts(segments, name)
    for key in ("recycles", "prestarted"):
        out[key] = sum(int(s.get(key) or 0) for s in starts)
    # The spares' warm-ups (collector/worker.py, `_warm`), summed over the calls.
    warms = [s["standby_warm"] for s in starts if s.get("standby_warm")]
    out["standby_warm"] = {
        key: sum(w.get(key, 0) for w in warms)
        for key in ("spares", "seconds", "cuda_before_go", "unknown_context", "errors")
    } | {"loaded": sorted({n for w in warms for n in w.get("loaded", [])})}
    # Pool starts: each call's first (no spare serves it) and every recycle.
    out["pool_starts"] = len(starts) + out["recycles"]
    total = out["case_device_s"] + out["worker_start_s"] + float(out["panel_device_s"] or 0)
    out["all_in_s"] = round(total, 2)
    out["all_in_per_case_s"] = round(total / out["cases"], 3) if out["cases"] else None
    # A collection starts one server; this one ran over calls of the device tool (10 min
    # each), each of which started its own. Charged the longest of them once:
    one = total - out["server_start_s"] + max(server_starts(segments, name), default=0.0)
    out["one_server_s"] = round(one, 2)
    out["one_server_per_case_s"] = round(one / out["cases"], 3) if out["cases"] else None
    return out


def collection_summary(
    record: RunRecord, segments: list[dict[str, Any]], name: str
) -> dict[str, Any]:
    return {
        "status": record.status,
        "backend": record.meta["backend"],
        "prestart_workers": record.meta["protocol"]["prestart_workers"],
        "worker_start": record.meta["protocol"].get("worker_start", "spawn"),
        # What its protocol changed from the shipped one (B's --b-set; F's fixed runs).
        "changed": {
            k: v for k, v in record.meta["protocol"].items() if asdict(Protocol()).get(k, v) != v
        },
        "device": record.meta["device"].get("name"),
        "gpu_uuid": record.meta["device"].get("uuid"),
        "cost": all_in_cost(record, segments, name),
    }


# --- analyse --------------------------------------------------------------------------------
def load_step(directory: Path, step: str) -> tuple[dict[str, RunRecord], list[Any], Any] | None:
    """A step's records, segments and canary choice from its tarball (None: not there)."""
    tar = directory / tar_name(step)
    if not tar.is_file():
        return None
    work = Path(tempfile.mkdtemp(prefix=f"precision-{step}-"))
    fs.untar(tar, work)
    names = [n for n in STEPS[step] if (work / n).is_dir()]
    canary = work / CANARY_JSON
    return (
        {n: read_record(work / n) for n in names},
        json.loads((work / SEGMENTS_JSON).read_text()),
        json.loads(canary.read_text()) if canary.is_file() else None,
    )


def open_cases(*records: RunRecord) -> set[str]:
    """The cases a cut-short record was still measuring: those with as many runs as its
    most-measured case (the protocol stops a case with fewer). None in a complete record."""
    out: set[str] = set()
    for record in records:
        if record.status == "complete":
            continue
        rows = [r for table in record.perf.values() for r in table.to_pylist()]
        most = max((r["runs"] for r in rows), default=0)
        out |= {r["case_key"] for r in rows if r["runs"] >= most}
    return out


def closed_figures(t: Any, still_open: set[str], slowed: set[str] | None) -> dict[str, Any]:
    """|diff| and flags over the cases both records had stopped measuring; with `slowed`,
    the canary found among them. Said beside a partial run's figures, never instead."""
    keys = np.asarray([str(k) for k in t["key"]], dtype=object)
    keep = ~np.isin(keys, sorted(still_open))
    diff = np.abs(t["ratio"][keep] - 1.0) * 100
    verdicts = t["verdict"][keep]
    flagged = np.isin(verdicts, ["regressed", "improved"])
    out: dict[str, Any] = {"cases": int(keep.sum()), "open": int((~keep).sum())}
    if diff.size:
        out["p99_pct"] = float(np.percentile(diff, 99))
        out["max_pct"] = float(diff.max())
    if slowed is None:
        out["flagged"] = int(flagged.sum())
        return out
    hit = np.isin(keys[keep], sorted(slowed))
    out["slowed"] = int(hit.sum())
    out["detected"] = int(((verdicts == "regressed") & hit).sum())
    out["others_flagged"] = int((flagged & ~hit).sum())
    return out


def aa_figures(a: RunRecord, b: RunRecord) -> dict[str, Any]:
    """A vs B on one GPU (A/A): flags and |diff|, the five widest cases."""
    cmp = compare_runs(a, b, Settings(), Baseline(kind="explicit-run"))
    out = fs.summarise(cmp)
    t = cmp.cases
    order = np.argsort(-np.abs(t["ratio"] - 1.0))[:5]
    out["widest"] = [
        {
            "key": str(t["key"][i]),
            "ratio": round(float(t["ratio"][i]), 4),
            "base_ms": float(t["base_ms"][i]),
        }
        for i in order
    ]
    out["closed"] = closed_figures(t, open_cases(a, b), None)
    pct = out["abs_diff_pct"]
    out["pass"] = (
        out["cases"] >= MIN_CASES
        and out["flagged"] == 0
        and (pct["p99"] or 0) <= AA_P99_PCT
        and (pct["max"] or 0) <= AA_MAX_PCT
    )
    return out


def canary_figures(a: RunRecord, c: RunRecord, chosen: dict[str, Any]) -> dict[str, Any]:
    """C vs A: the slowed cases found, false flags on the others."""
    cmp = compare_runs(a, c, Settings(), Baseline(kind="explicit-run"))
    out = fs.summarise(cmp, set(chosen["keys"]))
    out["closed"] = closed_figures(cmp.cases, open_cases(a, c), set(chosen["keys"]))
    out["factor"], out["min_ms"] = chosen["factor"], chosen["min_ms"]
    out["share"] = round(out["detected"] / out["slowed"], 4) if out["slowed"] else None
    out["pass"] = (out["share"] or 0) >= CANARY_SHARE and out["others_flagged"] == 0
    return out


def realism(record: RunRecord, table: Path) -> dict[str, Any]:
    """Ours / the table's latency per dtype, and per size bucket of the table's latency."""
    import pyarrow.parquet as pq

    rows = record.perf["gemm"].to_pylist()
    shapes = {case_key("gemm", r) for r in rows}
    ref = [r for r in pq.read_table(table).to_pylist() if case_key("gemm", r) in shapes]
    bucket = {case_key("gemm", r): fs.size_bucket(r["latency"]) for r in ref}
    out: dict[str, Any] = {"backend": record.meta["backend"]}
    offsets = {fit.dtype: asdict(fit) for fit in offset_fit(rows, ref)}
    for group in compare_rows("gemm", rows, ref):
        by_size = {}
        for name, _, _ in fs.SIZE_BUCKETS:
            part = [
                r
                for r in rows
                if r["gemm_dtype"] == group.dtype and bucket.get(case_key("gemm", r)) == name
            ]
            if part:
                [g] = compare_rows("gemm", part, ref)
                by_size[name] = {"matched": g.matched, "median_ratio": g.median_ratio}
        ok = group.median_ratio is not None and abs(group.median_ratio - 1) <= REALISM_TOL
        out[group.dtype] = {
            **asdict(group),
            "within_3pct": ok,
            "by_size": by_size,
            "offset": offsets.get(group.dtype),
        }
    return out


def cost_figures(costs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """All-in device seconds per case of every collection against the floor; the fixed
    protocol's beside them; the prestart effect (B's worker starts against A's)."""
    out: dict[str, Any] = {
        name: {
            **{k: c[k] for k in ("cases", "case_device_s", "worker_start_s", "panel_device_s")},
            **{k: c[k] for k in ("pool_starts", "prestarted", "runs_mean", "all_in_per_case_s")},
            **{k: c[k] for k in ("server_start_s", "one_server_per_case_s")},
            **({"standby_warm": c["standby_warm"]} if "standby_warm" in c else {}),
            # Judged as one collection pays: one server start, not one per call.
            "pass": (c["one_server_per_case_s"] or 1e9) <= COST_PER_CASE_S,
        }
        for name, c in costs.items()
    }
    f = costs.get("F", {}).get("all_in_per_case_s")
    for name in ("A", "B"):
        if f and name in costs and costs[name]["all_in_per_case_s"]:
            out[name]["of_fixed"] = round(costs[name]["all_in_per_case_s"] / f, 3)
    per = {
        n: costs[n]["worker_start_s"] / costs[n]["pool_starts"]
        for n in ("A", "B")
        if n in costs and costs[n]["pool_starts"]
    }
    if len(per) == 2:
        out["prestart"] = {
            "A_per_start_s": round(per["A"], 3),
            "B_per_start_s": round(per["B"], 3),
            "B_of_A": round(per["B"] / per["A"], 3) if per["A"] else None,
        }
    return out


def fixed_figures(
    a: RunRecord, f: RunRecord, a_cost: dict[str, Any], f_cost: dict[str, Any]
) -> dict[str, Any] | None:
    """The fixed protocol beside A on F's cases (all of the draw, or `--sample` of it): the
    cases' device seconds per case of each, and F's all-in cost per case over the whole draw,
    its cases' mean for every case plus its own worker starts (one server) and panel."""
    a_s, f_s = (
        {r["case_key"]: float(r["device_seconds"] or 0) for r in rec.perf["gemm"].to_pylist()}
        for rec in (a, f)
    )
    keys = sorted(set(a_s) & set(f_s))
    if not keys or not a_cost["cases"]:
        return None
    a_case = sum(a_s[k] for k in keys) / len(keys)
    f_case = sum(f_s[k] for k in keys) / len(keys)
    rest = float(f_cost["one_server_s"]) - float(f_cost["case_device_s"])
    f_all_in = (f_case * a_cost["cases"] + rest) / a_cost["cases"]
    a_all_in = a_cost["one_server_per_case_s"]
    return {
        "cases": len(keys),
        "of_draw": a_cost["cases"],
        "A_case_s": round(a_case, 3),
        "F_case_s": round(f_case, 3),
        "F_all_in_per_case_s": round(f_all_in, 3),
        "A_of_fixed": round(a_all_in / f_all_in, 3) if a_all_in and f_all_in else None,
    }


def first_set_figures(record: RunRecord) -> dict[str, Any] | None:
    """Runs over several buffer sets: their first sample (the first set) against the median
    of the others. Every set is prepared alike, so the ratio should sit at 1; the third run
    of 2026-12-02 had 0.91 at its 10th percentile, the first set alone warmed up."""
    sets = {r["case_key"]: r["placements"] for r in record.perf["gemm"].to_pylist()}
    runs: dict[tuple[str, int], list[tuple[int, float]]] = {}
    cols = record.samples["gemm"].select(["case_key", "run", "sample", "ms"]).to_pydict()
    for key, run, sample, ms in zip(*cols.values(), strict=True):
        if sets.get(key, 1) > 1:
            runs.setdefault((key, run), []).append((sample, ms))
    ratios = [
        ms[0] / float(np.median(ms[1:]))
        for taken in runs.values()
        if len(ms := [m for _, m in sorted(taken)]) >= 2
    ]
    if not ratios:
        return None
    r = np.asarray(ratios)
    return {
        "runs": int(r.size),
        "median": round(float(np.median(r)), 4),
        "p10": round(float(np.percentile(r, 10)), 4),
        "p90": round(float(np.percentile(r, 90)), 4),
        "share_3pct_off": round(float(np.mean(np.abs(r - 1) > 0.03)), 3),
    }


def analyse(directory: Path, table: Path) -> dict[str, Any]:
    """Issue 22's acceptance figures from the aa (and fixed) steps' returned files."""
    loaded = load_step(directory, "aa")
    if loaded is None:
        raise UserError(f"{directory / tar_name('aa')}: not found")
    records, segments, chosen = loaded
    if not {"A", "B"} <= set(records):
        raise UserError(f"{directory / tar_name('aa')}: no records A and B")
    costs = {n: all_in_cost(r, segments, n) for n, r in records.items()}
    fixed = load_step(directory, "fixed")
    beside = None
    if fixed is not None and "F" in fixed[0]:
        costs["F"] = all_in_cost(fixed[0]["F"], fixed[1], "F")
        beside = fixed_figures(records["A"], fixed[0]["F"], costs["A"], costs["F"])
    complete = {n: r.status for n, r in records.items()}
    if fixed is not None and "F" in fixed[0]:
        complete["F"] = fixed[0]["F"].status
    return {
        "status": complete,
        "device": records["A"].meta["device"].get("name"),
        "gpu_uuid": records["A"].meta["device"].get("uuid"),
        "aa": aa_figures(records["A"], records["B"]),
        "canary": canary_figures(records["A"], records["C"], chosen) if "C" in records else None,
        "realism": realism(records["A"], table),
        "cost": cost_figures(costs),
        "fixed": beside,
        "first_set": first_set_figures(records["A"]),
    }


def _yes(ok: bool) -> str:
    return "met" if ok else "**not met**"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}%"


def markdown(report: dict[str, Any]) -> str:
    """The acceptance table and the realism table, for docs/benchmarks.md."""
    aa, c, cost = report["aa"], report["canary"], report["cost"]
    pct = aa["abs_diff_pct"]
    status = ", ".join(f"{name} {value}" for name, value in report["status"].items())
    lines = [
        f"Records: {status}.",
        "",
        "| check | result | floor | |",
        "| --- | --- | --- | --- |",
        f"| A/A (A vs B, same GPU) | {aa['cases']} cases, {aa['flagged']} flagged; abs diff "
        f"median {_pct(pct['median'])}, p90 {_pct(pct['p90'])}, p99 {_pct(pct['p99'])}, "
        f"max {_pct(pct['max'])} | >= {MIN_CASES} cases, 0 flagged, p99 <= {AA_P99_PCT}%, "
        f"max <= {AA_MAX_PCT}% | {_yes(aa['pass'])} |",
    ]
    if aa["closed"]["open"]:
        k = aa["closed"]
        lines.append(
            f"| A/A, cases both had stopped measuring | {k['cases']} cases ({k['open']} still "
            f"open), {k['flagged']} flagged; abs diff p99 {_pct(k.get('p99_pct'))}, max "
            f"{_pct(k.get('max_pct'))} | context: a partial run | |"
        )
    if c is not None:
        lines.append(
            f"| +{(c['factor'] - 1) * 100:g}% canary (C vs A) | {c['detected']}/{c['slowed']} of "
            f"the cases >= {c['min_ms'] * 1000:g} us flagged, {c['others_flagged']} false of "
            f"{c['cases'] - c['slowed']} | >= {CANARY_SHARE:.0%}, 0 false | {_yes(c['pass'])} |"
        )
    if c is not None and c["closed"]["open"]:
        k = c["closed"]
        lines.append(
            f"| canary, cases both had stopped measuring | {k['detected']}/{k['slowed']} "
            f"flagged, {k['others_flagged']} false of {k['cases'] - k['slowed']} ({k['open']} "
            "still open) | context: a partial run | |"
        )
    for dtype in DTYPES:
        g = report["realism"].get(dtype)
        if g is not None and g["median_ratio"] is not None:
            floored = dtype != "fp8_block"
            backend = report["realism"]["backend"]
            lines.append(
                f"| realism {dtype} ({backend}) | median {g['median_ratio']:.3f}"
                f" of the table ({g['matched']} cases) | {'within 3%' if floored else 'reported'}"
                f" | {_yes(g['within_3pct']) if floored else ''} |"
            )
    for name in ("A", "B", "C", "F"):
        if name in cost:
            k = cost[name]
            # The floor is the shipped protocol's (A); B, C and the fixed F are its context.
            judged = (f"<= {COST_PER_CASE_S}", _yes(k["pass"])) if name == "A" else ("context", "")
            lines.append(
                f"| cost {name} | {k['one_server_per_case_s']} device-s per case all-in with one "
                f"server start; {k['all_in_per_case_s']} as run, every call starting one "
                f"({k['cases']} cases: {k['case_device_s']} s, {k['pool_starts']} worker starts "
                f"{k['worker_start_s']} s of which servers {k['server_start_s']} s "
                f"({k['prestarted']} prestarted), panel {k['panel_device_s']} s; "
                f"{k['runs_mean']:.2f} runs) | {judged[0]} | {judged[1]} |"
            )
    if "prestart" in cost:
        pre = cost["prestart"]
        lines.append(
            f"| prestart (B vs A) | {pre['B_per_start_s']} s per worker start against "
            f"{pre['A_per_start_s']} s (x{pre['B_of_A']}) | context | |"
        )
    if (fx := report.get("fixed")) is not None:
        lines.append(
            f"| fixed 10-run protocol beside A | on {fx['cases']} of the {fx['of_draw']} cases: "
            f"{fx['F_case_s']} device-s per case against A's {fx['A_case_s']}; all-in over the "
            f"draw {fx['F_all_in_per_case_s']} s per case (A: x{fx['A_of_fixed']} of it) | "
            "context | |"
        )
    if (first := report.get("first_set")) is not None:
        lines.append(
            f"| first buffer set against the others (A, {first['runs']} runs over several) | "
            f"median {first['median']}, p10 {first['p10']}, p90 {first['p90']}; "
            f"{first['share_3pct_off']:.0%} of runs more than 3% off | context: 1 | |"
        )
    lines += ["", "| dtype | " + " | ".join(n for n, _, _ in fs.SIZE_BUCKETS) + " | all |"]
    lines.append("| --- " * (len(fs.SIZE_BUCKETS) + 2) + "|")
    for dtype in DTYPES:
        g = report["realism"].get(dtype)
        if g is None:
            continue
        cells = [
            f"{b['median_ratio']:.3f} ({b['matched']})" if (b := g["by_size"].get(n)) else "-"
            for n, _, _ in fs.SIZE_BUCKETS
        ]
        lines.append(f"| {dtype} | " + " | ".join(cells) + f" | {g['median_ratio']:.3f} |")
    lines += [
        "",
        "| dtype | table - ours (us), fitted on m and m x k | r2 | cases |",
        "| --- | --- | --- | --- |",
    ]
    for dtype in DTYPES:
        g = report["realism"].get(dtype)
        if g is not None and (fit := g.get("offset")) is not None:
            lines.append(
                f"| {dtype} | {fit['per_k_tokens_us']:.2f} us per 1000 tokens "
                f"{fit['slope_us_per_m']:+.2f} us per million activation elements "
                f"{fit['intercept_us']:+.1f} us | {fit['r2']:.2f} | {fit['matched']} |"
            )
    return "\n".join(lines) + "\n"


# --- command line ---------------------------------------------------------------------------
def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="step", required=True)
    d = sub.add_parser("draw")
    d.add_argument("--table", type=Path, default=fs.default_table())
    d.add_argument("--seed", type=int, default=22)
    d.add_argument("--count", type=int, default=210)
    d.add_argument("--out", type=Path, default=CASE_FILE)
    d.add_argument(
        "--exclude",
        type=Path,
        action="append",
        default=[],
        help="a case file whose shapes the draw leaves out too (repeatable)",
    )
    for step in STEPS:
        # A call is at most 10 minutes: no round starts after 7.5 (vLLM's first round of 210
        # cases can take a minute); packing takes seconds.
        s = fs.collection_arguments(sub.add_parser(step), CASE_FILE, 7.5)
        s.add_argument("--backend", default="vllm")
        s.add_argument("--resume-from", type=Path, default=None)
        # Every collection of the step; the shipped default unless asked (collector/timing.py).
        # A's, C's and F's worker start; B's is the other (OTHER_START).
        s.add_argument("--worker-start", choices=WORKER_STARTS, default=Protocol().worker_start)
        if step == "aa":
            s.add_argument(
                "--b-set",
                type=protocol_override,
                action="append",
                default=[],
                metavar="FIELD=VALUE",
                help="B: A's protocol with this setting changed (repeatable), instead of its "
                "workers started the other way; e.g. the protocol before a change, so that the "
                "A/A is also the live check of the change",
            )
        if step == "fixed":
            s.add_argument("--runs", type=int, default=FIXED_RUNS)
            s.add_argument(
                "--sample", type=int, default=None, help="measure this many cases of the set"
            )
    a = sub.add_parser("analyse")
    a.add_argument("dir", type=Path)
    a.add_argument("--table", type=Path, default=fs.default_table())
    a.add_argument("--markdown", type=Path, default=None)
    return p


def run(args: argparse.Namespace) -> dict[str, Any]:
    """One step; bad input raises UserError."""
    if args.step in ("draw", "analyse") and args.table is None:
        raise UserError(f"no reference table: pass --table or set {reference_data.ENV}")
    if args.step in ("draw", "analyse") and not args.table.is_file():
        raise UserError(f"{args.table}: reference table not found")
    if args.step == "draw":
        for path in args.exclude:
            if not path.is_file():
                raise UserError(f"--exclude {path}: case file not found")
        return draw(args.table, args.seed, args.count, args.out, tuple(args.exclude))
    if args.step == "analyse":
        report = analyse(args.dir, args.table)
        if args.markdown is not None:
            args.markdown.write_text(markdown(report))
        return report
    if not args.cases.is_file():
        raise UserError(f"{args.cases}: case file not found (run the draw step)")
    if args.resume_from is not None and not args.resume_from.is_file():
        raise UserError(f"{args.resume_from}: tarball not found")
    args.out.mkdir(parents=True, exist_ok=True)
    return run_step(args)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        result = run(args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=1, default=str), flush=True)
    if result.get("failed"):
        print(f"error: collection {', '.join(result['failed'])} failed as a whole", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
