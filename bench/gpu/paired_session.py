"""H200 validation of the paired default (docs/fleet.md): base and head on one GPU.

The shipped campaign code path (`bot.campaign.runner`, worktree mode: the device machine has
no container runtime) on the 64 random GEMMs of bench/gpu/fleet_cases.yaml, backend torch,
the shipped protocol and campaign defaults. The sent tree has no .git, so the script first
commits a copy of the collector (bot/, collector/, pyproject.toml) into a throwaway git
repository and uses that one commit as both base and head:

    PYTHONUNBUFFERED=1 python3 -m bench.gpu.paired_session aa --out $OUT \
        --baseline bench/results/h200-2026-12-01-fleet/fleet-base-store.tar.gz
        an A/A campaign: what an unchanged PR gets by default
    PYTHONUNBUFFERED=1 python3 -m bench.gpu.paired_session canary --out $OUT --baseline ...
        the head side slowed x1.03 on the cases the stored baseline measured at 40 us or more

Each leaves $OUT/paired-<step>-summary.json (flags, |diff| quantiles, UUID, cost per case)
and $OUT/paired-<step>-records.tar.gz (campaign.json, rounds, merged records, comparisons).
The head side is also compared with the stored baseline from another GPU, as context only.
No round starts after --minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.gpu.fleet_session import (
    CANARY_FACTOR,
    CANARY_MIN_MS,
    CASE_FILE,
    STORE_REF,
    cost,
    pack,
    say,
    summarise,
    untar,
)

ROOT = Path(__file__).resolve().parents[2]
# What a round needs to run `python -m bot collect` from the throwaway repository.
TREE = ("bot", "collector", "pyproject.toml")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "paired-session",
    "GIT_AUTHOR_EMAIL": "paired-session@example.invalid",
    "GIT_COMMITTER_NAME": "paired-session",
    "GIT_COMMITTER_EMAIL": "paired-session@example.invalid",
    "GIT_AUTHOR_DATE": "2026-12-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-12-01T00:00:00Z",
}
# The CPU tests' quick protocol and campaign size (`--test-protocol`); the GPU ships defaults.
TEST_ROUND_ARGS = ["--samples", "3", "--warmup", "1", "--target-sample-ms", "0.3"]
TEST_ROUND_ARGS += ["--idle-ratio", "0"]
TEST_RUNS = 3


def throwaway_repo(dest: Path) -> str:
    """A git repository holding one commit of this tree's collector; returns its SHA."""
    dest.mkdir(parents=True)
    for name in TREE:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dest / name)
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "paired session"]):
        subprocess.run(["git", "-C", str(dest), *args], env=env, check=True, timeout=120)
    out = subprocess.run(
        ["git", "-C", str(dest), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return out.stdout.strip()


def slow_cases(base_perf: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """The cases the stored baseline measured at CANARY_MIN_MS or more, as a selector."""
    slow = [r for r in base_perf if r["latency"] >= CANARY_MIN_MS]
    text = ";".join(f"gemm_dtype={r['gemm_dtype']},m={r['m']},n={r['n']},k={r['k']}" for r in slow)
    return text, [str(r["case_key"]) for r in slow]


def campaign_cost(manifest: dict[str, Any], cases: int) -> dict[str, Any]:
    """Wall seconds of the rounds (process start, panel and cases), per phase and per case."""
    by_phase: dict[str, float] = {}
    for r in manifest["rounds"]:
        by_phase[r["phase"]] = by_phase.get(r["phase"], 0.0) + float(r["seconds"])
    total = sum(by_phase.values())
    rounds = manifest["rounds"]
    return {
        "rounds": len(rounds),
        "round_seconds": {k: round(v, 1) for k, v in by_phase.items()},
        "round_seconds_total": round(total, 1),
        "round_seconds_mean": round(total / len(rounds), 2) if rounds else None,
        "seconds_per_case": round(total / cases, 3) if cases else None,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    from bot.campaign.runner import CampaignConfig, run_campaign
    from bot.compare.comparison import compare_runs
    from bot.compare.stats import Settings
    from bot.compare.store_baseline import baseline_from_store
    from bot.store import RunStore
    from collector.record import read_record

    deadline = time.monotonic() + args.minutes * 60
    work = Path(tempfile.mkdtemp(prefix=f"paired-{args.step}-"))
    untar(args.baseline, work)
    store = RunStore(str(work / "store"))
    [entry] = store.entries()[-1:]
    stored = read_record(store.get(entry, work / "stored-base"))
    sha = throwaway_repo(work / "repo")
    say(f"{args.step}: repo {sha[:10]}; stored baseline {entry.name} on {entry.gpu_uuids}")
    head_args: list[str] = []
    slowed: list[str] = []
    if args.step == "canary":
        selector, slowed = slow_cases(stored.perf["gemm"].to_pylist())
        if not slowed:
            raise SystemExit(f"error: {args.baseline}: no case of {CANARY_MIN_MS} ms or more")
        head_args = ["--canary-slow", selector, "--canary-factor", str(CANARY_FACTOR)]
        say(f"canary x{CANARY_FACTOR} on {len(slowed)} cases")
    collect_args = ["--backend", "torch", "--ops", "gemm", "--cases", str(args.cases.resolve())]
    collect_args += ["--case-set", args.case_set]
    if args.test_protocol:
        collect_args += TEST_ROUND_ARGS
    cfg = CampaignConfig(
        repo=work / "repo",
        base_ref=sha,
        head_ref=sha,
        out=work / "campaign",
        device=args.device,
        collect_args=collect_args,
        head_args=head_args,
        python=sys.executable,
        deadline=deadline,
        command=["python3", "-m", "bench.gpu.paired_session", *sys.argv[1:]],
        log=say,
    )
    if args.test_protocol:
        cfg.runs, cfg.confirm_runs = TEST_RUNS, 2
    t0 = time.monotonic()
    result = run_campaign(cfg)
    wall = time.monotonic() - t0
    manifest = json.loads((result.manifest).read_text())
    head = read_record(work / "campaign" / "main" / "head-run")
    first = json.loads((work / "campaign" / "first-pass" / "comparison.json").read_text())
    summary: dict[str, Any] = {
        "step": args.step,
        "device_identity": manifest["device_identity"],
        "cut_short": manifest["cut_short"],
        "runs_per_side": manifest["runs_per_side"],
        "paired": summarise(result.comparison, set(slowed) if slowed else None),
        "first_pass_verdicts": first["latency"].get("counts") or first["verdict"],
        "confirmation": {
            k: result.comparison.data["confirmation"].get(k)
            for k in ("performed", "confirmed", "overturned", "cases")
        },
        "canary": {"factor": CANARY_FACTOR, "min_ms": CANARY_MIN_MS, "keys": slowed},
        "cost": {
            "campaign_wall_s": round(wall, 1),
            **campaign_cost(manifest, head.perf["gemm"].num_rows),
            "head_side": cost(head),
        },
        "single_collection": {"entry": entry.name, "cost": cost(stored)},
    }
    # Context only: the head side against the stored baseline from another GPU.
    try:
        base, baseline = baseline_from_store(head, store.url, work / "ctx-base", ref=STORE_REF)
        ctx = compare_runs(base, head, Settings(), baseline)
        ctx.write(work / "campaign" / "context-vs-store")
        summary["context_vs_store"] = {
            "baseline_gpus": entry.gpu_uuids,
            **summarise(ctx, set(slowed) if slowed else None),
        }
    except Exception as exc:  # context only: the campaign's figures still come back
        summary["context_vs_store"] = {"error": f"{type(exc).__name__}: {exc}"}
    summary["seconds"] = round(time.monotonic() - t0, 1)
    pack(args.out, f"paired-{args.step}-records.tar.gz", work, ["campaign"])
    (args.out / f"paired-{args.step}-summary.json").write_text(json.dumps(summary, indent=1))
    say(f"{args.step}: {summary['paired']['headline']}")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    for name in ("aa", "canary"):
        p = sub.add_parser(name)
        p.add_argument("--out", type=Path, required=True)
        p.add_argument("--baseline", type=Path, required=True)
        p.add_argument("--cases", type=Path, default=CASE_FILE)
        p.add_argument("--case-set", default="default")
        p.add_argument("--device", default="cuda:0")
        p.add_argument("--minutes", type=float, default=5.0)
        p.add_argument("--test-protocol", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for path, what in ((args.cases, "case file"), (args.baseline, "baseline tarball")):
        if not path.is_file():
            print(f"error: {path}: {what} not found", file=sys.stderr)
            return 2
    args.out.mkdir(parents=True, exist_ok=True)
    print(json.dumps(run(args), indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
