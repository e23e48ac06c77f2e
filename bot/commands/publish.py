"""`collectbot publish`: the sticky PR comment, the commit status or check run, the job
summary and the trigger label, from a rendered comment on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bot.commands.github_options import GitHubOptions, api_errors
from bot.commands.options import PullOptions, ResultLinks, VerdictOptions
from bot.errors import one_line_errors
from bot.options import option_group
from collector import jsonfile
from collector.errors import UserError

if TYPE_CHECKING:
    from bot.github.publish import PublishOptions


def _load_plan(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise UserError(f"{path}: plan not found (run `collectbot plan`)")
    data = jsonfile.read(path)
    if not isinstance(data, dict) or not isinstance(data.get("pr"), int):
        raise UserError(f"{path}: field 'pr' missing or not a number")
    return data


@one_line_errors
@option_group(GitHubOptions, "github")
@option_group(VerdictOptions, "verdict")
@option_group(PullOptions, "pull")
@option_group(ResultLinks, "result_links")
def publish(
    comment: Annotated[
        Path | None,
        typer.Argument(help="Rendered comment (collectbot render --out); sidecar beside it."),
    ] = None,
    pull: PullOptions = PullOptions(),
    result_dir: Annotated[
        Path | None,
        typer.Option(
            "--result",
            help="With --event, instead of COMMENT: a result bundle (collectbot result make), "
            "verified and rendered here with this code.",
        ),
    ] = None,
    if_present: Annotated[
        bool, typer.Option(help="With --result: exit 0 with a note when the run left no result.")
    ] = False,
    verdict: VerdictOptions = VerdictOptions(),
    report: Annotated[
        Path | None, typer.Option(help="Write what was done as JSON to this file.")
    ] = None,
    github: GitHubOptions = GitHubOptions(),
    result_links: ResultLinks = ResultLinks(),
) -> None:
    """Post or update the bot's sticky comment and set the verdict on the commit.

    One comment per (backend, GPU), found across all pages and updated in place; an older run
    never overwrites a newer one; concurrent publishers converge on one comment. Fails with
    one line (the rendered comment stays on disk) when GitHub refuses a write.
    """
    from bot.github.publish import (
        publish as do_publish,
    )
    from bot.github.publish import (
        raise_for_errors,
    )
    from bot.render.rendered import load_rendered

    opts = verdict.publish_options(github.login())
    if result_dir is not None:
        given = (comment, pull.pr, pull.plan_file)
        if any(x is not None for x in given) or pull.event is None:
            raise UserError("--result goes with --event only (no COMMENT, --pr or --plan)")
        opts.store, opts.site_url = result_links.checked()
        _publish_result(
            result_dir, pull.event, opts, if_present=if_present, report=report, github=github
        )
        return
    if comment is None:
        raise UserError("give the rendered comment (COMMENT), or --result with --event")
    pull.check_one()
    rendered = load_rendered(comment)
    plan_data = _load_plan(pull.plan_file) if pull.plan_file else None
    run_event = None
    if pull.event is not None:
        from bot.github.events import load_payload, parse_workflow_run_event

        run_event = parse_workflow_run_event(load_payload(pull.event), str(pull.event))
    plan_repo = (plan_data or {}).get("repo")
    repo_name = pull.repo_name(plan_repo, run_event.repo if run_event else None)
    labels = opts.remove_labels
    if plan_data and not verdict.keep_label and not labels and plan_data.get("label"):
        labels = opts.remove_labels = [str(plan_data["label"])]
    api = github.repo_api(repo_name)
    reading = f"reading the pull request on {repo_name}"
    with api_errors(reading, then=f"; the rendered comment is at {comment}"):
        if run_event is not None:
            from bot.github.approval import check_approval
            from bot.github.deliver import the_pull_of_run

            target = the_pull_of_run(api, run_event)
            # A workflow run's comment: approved by a maintainer's label, GitHub says so.
            check_approval(api, target, run_event, labels[0] if labels else None)
        else:
            number = pull.pr if pull.pr is not None else int((plan_data or {})["pr"])
            target = api.pull(number)
    from bot.github.publish import check_marker_head

    expected = (run_event.head_sha if run_event else None) or (plan_data or {}).get("head_sha")
    check_marker_head(rendered, expected, comment)
    result = do_publish(api, target, rendered, opts)
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps(_report_json(result), indent=1) + "\n")
    if result.comment:
        c = result.comment
        typer.echo(f"comment: {c.action} {c.comment_id} {c.url or ''}".rstrip())
        if c.reason:
            typer.echo(c.reason)
        if c.deleted:
            typer.echo(f"duplicates deleted: {', '.join(map(str, c.deleted))}")
    if result.check:
        state = result.check.get("state") or result.check.get("conclusion")
        typer.echo(f"{result.check['kind']}: {state} on {result.check['sha'][:12]}")
    if result.labels_removed:
        typer.echo(f"labels removed: {', '.join(result.labels_removed)}")
    raise_for_errors(result, rendered)


def _publish_result(
    path: Path,
    event_path: Path,
    opts: PublishOptions,
    *,
    if_present: bool,
    report: Path | None,
    github: GitHubOptions,
) -> None:
    """The trusted side of the fork-safe split: verify, bind, render, publish."""
    import tempfile

    from bot.github.deliver import deliver
    from bot.github.events import load_payload, parse_workflow_run_event
    from bot.github.publish import raise_for_errors
    from bot.result_bundle import BUNDLE_JSON, load_result

    run_event = parse_workflow_run_event(load_payload(event_path), str(event_path))
    if not (path / BUNDLE_JSON).is_file() and if_present:
        typer.echo(
            f"no result at {path}: run {run_event.run_id} ({run_event.conclusion}) left nothing "
            "to publish"
        )
        return
    loaded = load_result(path)
    api = github.repo_api(run_event.repo)
    url = run_event.html_url if run_event.html_url.startswith("https://") else None
    # The rendered comment stays on disk (its path is in any error), as with COMMENT.
    workdir = Path(tempfile.mkdtemp(prefix="collectbot-publish-"))
    with api_errors(f"publishing {path}"):
        done = deliver(api, run_event, loaded, opts, workdir, url)
    if report is not None:
        from dataclasses import asdict

        report.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "action": done.action,
            "detail": done.detail,
            "pr": done.pr,
            "publish": asdict(done.report) if done.report else None,
            "applied": asdict(done.applied) if done.applied else None,
        }
        report.write_text(json.dumps(data, indent=1) + "\n")
    from bot.render.sanitize import clean

    where = f" (#{done.pr})" if done.pr else ""
    typer.echo(clean(f"{done.action}: {done.detail}", 600) + where)
    for warning in done.warnings:
        typer.echo(f"warning: {clean(warning, 600)}".replace("\n", " "), err=True)
    if done.report is not None and done.rendered is not None:
        if done.report.comment:
            c = done.report.comment
            typer.echo(f"comment: {c.action} {c.comment_id} {c.url or ''}".rstrip())
        if done.report.labels_removed:
            typer.echo(f"labels removed: {', '.join(done.report.labels_removed)}")
        raise_for_errors(done.report, done.rendered)


def _report_json(result: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(result)
