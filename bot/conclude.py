"""Conclude a CI collection: shards (or a campaign) → one record → comparison → bundle.

The last job of the collection workflow runs this once every shard job has ended, however
they ended. Each stage (merge, compare) is the ordinary one; what this adds is that a failing
stage never leaves a gap: its error becomes the comment (a run comment saying which stage
failed and why), and the result is always a bundle for the publisher plus, for people, the
rendered comment and the HTML report:

    OUT/run/           the merged run record (store-baseline runs)
    OUT/comparison/    comparison.json and cases.parquet, when there was something to compare
    OUT/comment.md     the comment as this job rendered it (the publisher renders its own)
    OUT/report.html    the HTML report
    OUT/merge.json     what the merge took, missed or ignored
    OUT/result/        the result bundle for the publisher (bot/result_bundle.py)
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.result_bundle import make_result
from collector import jsonfile
from collector.errors import UserError

if TYPE_CHECKING:
    from bot.ci_config import CiConfig


@dataclass
class ConcludeOptions:
    plan: Path
    out: Path
    shards: list[Path] = field(default_factory=list)
    shard_count: int | None = None
    store: str | None = None
    baseline_ref: str | None = None
    campaign: Path | None = None
    workflow_run_id: int = 1
    run_attempt: int = 1
    artifacts_url: str | None = None
    site_url: str | None = None  # the store's `collectbot site`, for the trends' links
    log: Path | None = None
    error: str | None = None  # a failure the workflow saw before this step (e.g. a shard job)
    config: Path | None = None  # thresholds (default .github/collectbot.yml when present)


@dataclass
class Concluded:
    kind: str
    level: str
    headline: str
    stage: str | None
    error: str | None
    bundle: Path
    comment: Path
    notes: list[str] = field(default_factory=list)


def full_plan_of(meta: dict[str, Any]) -> dict[str, Any] | None:
    """The unsharded plan a shard was cut from, rebuilt from its run.json (built-in or
    still-present case files only; None when it cannot be rebuilt here)."""
    from collector.caseplan import CaseSelector
    from collector.engine import CollectConfig

    source = str(meta.get("plan_source") or "")
    parts = [p for p in source.split(",") if p]
    builtin = bool(parts) and all(p.startswith("collector/cases/") for p in parts)
    case_file = None if builtin else Path(source)
    if case_file is not None and not case_file.is_file():
        return None
    text = meta.get("case_filter")
    cfg = CollectConfig(
        out=Path("."),
        backend=str(meta.get("backend") or "torch"),
        ops=tuple(meta.get("ops") or ()),
        case_file=case_file,
        case_set=str(meta.get("case_set") or "default"),
        case_filter=CaseSelector.parse(text, option="case_filter") if text else None,
        attn_backend=str(meta.get("attn_backend") or "auto"),
    )
    plan = cfg.base_plan()
    return {"plan_hash": plan.hash, "case_keys": [c.key for c in plan.cases], "shard": None}


def _first_shard_meta(paths: list[Path]) -> dict[str, Any] | None:
    for path in paths:
        try:
            data = jsonfile.read(path / "run.json")
        except UserError:
            continue
        if isinstance(data, dict):
            return data
    return None


def _merge(opts: ConcludeOptions, run_dir: Path, notes: list[str]) -> None:
    from bot.merge import merge_shards

    if not opts.shards:
        raise UserError(
            f"no shard left a record (of {opts.shard_count or '?'}); see the shard jobs' logs"
        )
    plan = None
    meta = _first_shard_meta(opts.shards)
    if meta is not None:
        try:
            plan = full_plan_of(meta)
        except UserError as exc:
            notes.append(f"the unsharded plan could not be rebuilt ({exc}); merged without it")
    report = merge_shards(opts.shards, run_dir, count=opts.shard_count, plan=plan)
    (opts.out / "merge.json").write_text(json.dumps(report.to_json(), indent=1) + "\n")
    notes.extend(report.lines())


def baseline_ref_for(plan: dict[str, Any], given: str | None) -> str:
    """The stored baseline's ref: given, else the PR's base branch, else main."""
    if given:
        return given
    base = str(plan.get("base_ref") or "") if plan.get("event") != "workflow_dispatch" else ""
    return base.removeprefix("refs/heads/") or "main"


def ci_config_for(plan: dict[str, Any], path: Path | None) -> CiConfig | None:
    """The thresholds: the copy the plan job took from the base branch, else the file named
    by `--config`, else the defaults. Never the working directory's file: this job runs in
    the pull request's checkout, whose own config could loosen the thresholds."""
    from bot.ci_config import CiConfig, load_ci_config

    carried = plan.get("ci_config")
    if isinstance(carried, dict):
        return CiConfig.from_json(carried, str(carried.get("source") or "the plan's config"))
    return load_ci_config(path) if path is not None else None


def _compare(
    opts: ConcludeOptions, run_dir: Path, cmp_dir: Path, ref: str, plan: dict[str, Any]
) -> None:
    from bot.compare.comparison import compare_runs
    from bot.compare.history_verdict import HISTORY_RUNS
    from bot.compare.stats import Settings
    from bot.compare.store_baseline import baseline_from_store
    from collector.record import read_record

    ci_config = ci_config_for(plan, opts.config)

    if not opts.store:
        raise UserError(
            "no run store configured (COLLECTBOT_STORE): nothing to take the baseline from"
        )
    cand = read_record(run_dir)
    with tempfile.TemporaryDirectory(prefix="collectbot-baseline-") as tmp:
        base, baseline = baseline_from_store(
            cand, opts.store, Path(tmp) / "baseline", ref=ref, history_runs=HISTORY_RUNS
        )
        settings = ci_config.apply() if ci_config else Settings()
        source = ci_config.source if ci_config else None
        compare_runs(base, cand, settings, baseline, settings_source=source).write(cmp_dir)


def _from_campaign(opts: ConcludeOptions, run_dir: Path, cmp_dir: Path) -> None:
    from bot.compare.comparison import load_comparison
    from collector.record import read_record

    assert opts.campaign is not None
    head, comparison = opts.campaign / "main" / "head-run", opts.campaign / "comparison"
    load_comparison(comparison)
    read_record(head)
    shutil.copytree(head, run_dir)
    shutil.copytree(comparison, cmp_dir)


def conclude(opts: ConcludeOptions) -> Concluded:
    from bot.render.comment import RenderOptions, render_comment, render_run_comment
    from bot.render.rendered import comparison_meta, run_meta, write_rendered

    out = opts.out
    if out.exists() and any(out.iterdir()):
        raise UserError(f"{out}: not empty")
    out.mkdir(parents=True, exist_ok=True)
    plan = jsonfile.read(opts.plan) if opts.plan.is_file() else {}
    head = plan.get("head_sha")
    run_dir, cmp_dir = out / "run", out / "comparison"
    notes: list[str] = []
    stage: str | None = None
    error = opts.error
    compared = False
    if error is None:
        try:
            if opts.campaign is not None:
                stage = "campaign"
                _from_campaign(opts, run_dir, cmp_dir)
            else:
                stage = "merge"
                _merge(opts, run_dir, notes)
                stage = "compare"
                _compare(opts, run_dir, cmp_dir, baseline_ref_for(plan, opts.baseline_ref), plan)
            compared, stage = True, None
        except UserError as exc:
            error = str(exc)
    ropts = RenderOptions(
        head_sha=head,
        artifacts_url=opts.artifacts_url,
        site_url=opts.site_url,
        backend=plan.get("backend"),
    )
    comment = out / "comment.md"
    if compared:
        from bot.compare.comparison import load_cases, load_comparison
        from bot.render.html import render_html_report

        comparison = load_comparison(cmp_dir)
        body = render_comment(comparison, ropts)
        meta = comparison_meta(comparison, body, opts.artifacts_url)
        write_rendered(comment, body, meta)
        html = render_html_report(comparison, load_cases(cmp_dir, comparison))
    else:
        from bot.render.html import render_run_html_report
        from bot.render.run_summary import load_run_info

        info = load_run_info(run_dir, stage=stage, error=error, log=opts.log)
        body = render_run_comment(info, ropts)
        meta = run_meta(info, body, opts.artifacts_url)
        write_rendered(comment, body, meta)
        html = render_run_html_report(info)
    (out / "report.html").write_text(html)
    marker = meta.marker
    bundle = make_result(
        out / "result",
        plan_path=opts.plan,
        workflow_run_id=opts.workflow_run_id,
        run_attempt=opts.run_attempt,
        comparison=cmp_dir if compared else None,
        # A comparison carries its run record too: the publisher keeps it as the PR's
        # previous run for the next comparison (bot/github/pull_history.py).
        run=run_dir,
        stage=stage,
        error=error,
        log=None if compared else opts.log,
        marker={
            "backend": marker.backend,
            "gpu": marker.gpu,
            "run_id": marker.run_id,
            "started_at": marker.started_at,
        },
    )
    return Concluded(
        kind="comparison" if compared else "run",
        level=meta.level,
        headline=meta.headline,
        stage=stage,
        error=error,
        bundle=bundle.parent,
        comment=comment,
        notes=notes,
    )
