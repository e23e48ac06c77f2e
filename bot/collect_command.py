"""The canonical `collectbot collect` command line for a config: recorded for reproduction."""

from __future__ import annotations

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
    p = cfg.protocol
    for flag, value, default in (
        ("--runs", p.runs, _DEFAULT.runs),
        ("--samples", p.samples, _DEFAULT.samples),
        ("--warmup", p.warmup, _DEFAULT.warmup),
        ("--target-sample-ms", p.target_sample_ms, _DEFAULT.target_sample_ms),
        ("--idle-ratio", p.idle_ratio, _DEFAULT.idle_ratio),
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
        if cfg.canary.fail is not None:
            cmd += ["--canary-fail", cfg.canary.fail.text]
    cmd += ["--out", out or str(cfg.out)]
    return cmd
