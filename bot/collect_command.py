"""The canonical `collectbot collect` command line for a config: recorded for reproduction."""

from __future__ import annotations

from collector.attn_backends import Dispatch
from collector.canary import FAULT_KINDS
from collector.engine import CollectConfig
from collector.settings import cli_args


def collect_command(
    cfg: CollectConfig, out: str | None = None, framework_version: str | None = None
) -> list[str]:
    """Options at their defaults are left out; the protocol's come from its declaration."""
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
    cmd += cli_args(cfg.protocol)
    cmd += cli_args(Dispatch(attn_backend=cfg.attn_backend))
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
    if framework_version is not None:
        cmd += ["--framework-version", framework_version]
    cmd += ["--out", out or str(cfg.out)]
    return cmd
