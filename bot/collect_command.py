"""The canonical `collectbot collect` command line for a config: recorded for reproduction."""

from __future__ import annotations

from collector.canary import FAULT_KINDS
from collector.engine import CollectConfig
from collector.timing import Protocol

_DEFAULT = Protocol()


def collect_command(cfg: CollectConfig, out: str | None = None) -> list[str]:
    cmd = ["collectbot", "collect", "--backend", cfg.backend, "--ops", ",".join(cfg.ops)]
    cmd += ["--device", cfg.device]
    if cfg.case_file is not None:
        cmd += ["--cases", str(cfg.case_file)]
    if cfg.case_set != "default":
        cmd += ["--case-set", cfg.case_set]
    if cfg.case_filter is not None:
        cmd += ["--case-filter", cfg.case_filter.text]
    if cfg.limit is not None:
        cmd += ["--limit", str(cfg.limit)]
    if cfg.shard is not None:
        cmd += ["--shard", f"{cfg.shard[0]}/{cfg.shard[1]}"]
    if cfg.rules_file is not None:
        cmd += ["--rules", str(cfg.rules_file)]
    p = cfg.protocol
    for flag, value, default in (
        ("--runs", p.runs, _DEFAULT.runs),
        ("--samples", p.samples, _DEFAULT.samples),
        ("--warmup", p.warmup, _DEFAULT.warmup),
        ("--target-sample-ms", p.target_sample_ms, _DEFAULT.target_sample_ms),
        ("--idle-ratio", p.idle_ratio, _DEFAULT.idle_ratio),
        ("--target-ci", p.target_ci, _DEFAULT.target_ci),
        ("--min-runs", p.min_runs, _DEFAULT.min_runs),
        ("--max-redos", p.max_redos, _DEFAULT.max_redos),
        ("--max-retakes", p.max_retakes, _DEFAULT.max_retakes),
        ("--placements", p.placements, _DEFAULT.placements),
        ("--placement-order", p.placement_order, _DEFAULT.placement_order),
        ("--fresh-workers", p.fresh_workers, _DEFAULT.fresh_workers),
        ("--clock-floor", p.clock_floor, _DEFAULT.clock_floor),
    ):
        if value != default:
            cmd += [flag, str(value)]
    if not p.use_graphs:
        cmd.append("--no-graphs")
    if cfg.canary is not None:
        if cfg.canary.slow is not None:
            cmd += [
                "--canary-slow",
                cfg.canary.slow.text,
                "--canary-factor",
                str(cfg.canary.factor),
            ]
        for kind in FAULT_KINDS:
            selector = getattr(cfg.canary, kind)
            if selector is not None:
                cmd += [f"--canary-{kind.replace('_', '-')}", selector.text]
    if cfg.workers is not None:
        cmd += ["--workers", str(cfg.workers)]
    cmd += ["--out", out or str(cfg.out)]
    return cmd
