"""The demo's comment, golden: `run_demo` as `collectbot demo` runs it (plan, alternating
rounds, canary, record writer, compare, render), with one stand-in: the timing of a case.

A CPU shared with other jobs times the same case tens of percent apart from run to run, so
the verdicts themselves would move; the stand-in gives each case a latency from its size,
spread by a seeded generator, and applies the canary's factor. What is left to differ from
one machine or commit to another (ids, timestamps, SHAs, hashes, the CPU's name, versions, the
traceback's paths and lines) is replaced by a placeholder before the comparison.
"""

from __future__ import annotations

import dataclasses
import platform
import re
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bot.demo
import collector.device
import collector.measure
from bot.demo import run_demo
from collector.caseplan import Case
from collector.engine import Collection
from collector.measure import MeasureContext
from collector.record import read_record
from collector.timing import RunSamples
from tests.golden import check_golden

REPO = Path(__file__).resolve().parent.parent


def _standin_timing(ctx: MeasureContext, case: Case) -> tuple[RunSamples, str, int]:
    """A run of `case`: ~50 GFLOP/s on the CPU with 1% run-to-run and 2% sample spread,
    the same on every machine; the canary's factor applied as the real timer applies it."""
    params = case.params
    flops = 2.0 * float(np.prod([params.get(k, 1) for k in ("m", "n", "k")]))
    base = max(flops / 50e9 * 1e3, 0.001)
    slowdown = ctx.canary.slowdown_for(case) if ctx.canary else None
    factor = slowdown.factor if slowdown else 1.0
    side = "cand" if ctx.canary else "base"
    count = _CALLS.setdefault((side, case.key), [0])
    count[0] += 1
    rng = np.random.default_rng(zlib.crc32(f"{side}|{case.key}|{count[0]}".encode()))
    run_ms = base * factor * float(np.exp(rng.normal(0.0, 0.01)))
    ms = run_ms * np.exp(rng.normal(0.0, 0.02, ctx.protocol.samples))
    n = ctx.protocol.samples
    samples = RunSamples(
        ms=[float(x) for x in ms],
        sm_mhz=[None] * n,
        power_w=[None] * n,
        throttled=[False] * n,
        inner=1,
        timing_mode=f"cpu-{ctx.protocol.cpu_clock}",
    )
    return samples, "torch.nn.functional.linear" if case.op == "gemm" else case.op, 1


_CALLS: dict[tuple[str, str], list[int]] = {}


def _volatile(out: Path) -> dict[str, str]:
    """Each value of the two records that differs from one run, machine or commit to the
    next, with the placeholder it becomes."""
    values: dict[str, str] = {}
    for side in ("base", "cand"):
        meta: dict[str, Any] = read_record(out / f"{side}-run").meta
        values[str(meta["run_id"])] = f"<{side}-run-id>"
        sha = str(meta.get("git_sha") or "")
        if sha:
            values[sha] = "<git-sha>"
            values[sha[:7]] = "<git-sha7>"
        for name in ("collector_hash", "framework_version"):
            if meta.get(name):
                values[str(meta[name])] = f"<{name}>"
        versions = meta.get("versions") or {}
        for name in ("torch", "vllm", "flashinfer"):
            if versions.get(name):
                values[str(versions[name])] = f"<{name}-version>"
    return values


def normalised(text: str, out: Path) -> str:
    for value, placeholder in sorted(_volatile(out).items(), key=lambda kv: -len(kv[0])):
        text = text.replace(value, placeholder)
    text = text.replace(str(REPO), "<repo>")
    text = re.sub(r'File "[^"]*?/(collector|bot)/', r'File "<repo>/\1/', text)
    text = re.sub(r"line \d+, in ", "line <n>, in ", text)
    # The carets under a traceback's line come and go with the Python version.
    text = re.sub(r"(?m)^ *[\^~]+ *\n", "", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?", "<time>", text)
    # The panel's device time is the wall time of the stand-in's runs.
    return re.sub(r"\d+(\.\d+)? device s\b", "<s> device s", text)


@pytest.mark.slow
def test_the_demo_comment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, update_golden: bool
) -> None:
    _CALLS.clear()
    monkeypatch.setattr(collector.measure, "_measure_once", _standin_timing)
    monkeypatch.setattr(collector.device, "cpu_model", lambda: "Example CPU")
    monkeypatch.setattr(platform, "node", lambda: "host")
    # Measured in process (the comment's reproduce commands already written), where the
    # stand-in is in place: spawned workers would not see it.
    monkeypatch.setattr(
        bot.demo, "Collection", lambda cfg: Collection(dataclasses.replace(cfg, workers=0))
    )
    result = run_demo(tmp_path / "demo", quiet=True)
    body = result.comment.read_text()
    assert "regressed" in result.headline  # the canary's slowdown is found, deterministically
    check_golden("demo-comment.md", normalised(body, result.out), update_golden)
