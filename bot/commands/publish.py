"""`collectbot publish`: the sticky PR comment, the commit status or check run, the job
summary and the trigger label, from a rendered comment on disk."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bot.commands.github_options import GitHubOptions, api_errors
from bot.errors import one_line_errors
from bot.options import option_group
from collector import jsonfile
from collector.errors import UserError

if TYPE_CHECKING:
    from bot.github.publish import PublishOptions

CHECK_KINDS = ("status", "check-run", "none")


def _load_plan(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise UserError(f"{path}: plan not found (run `collectbot plan`)")
    data = jsonfile.read(path)
    if not isinstance(data, dict) or not isinstance(data.get("pr"), int):
        raise UserError(f"{path}: field 'pr' missing or not a number")
    return data


@one_line_errors
@option_group(GitHubOptions, "github")
def publish(
    comment: Annotated[
        Path | None,
        typer.Argument(help="Rendered comment (collectbot render --out); sidecar beside it."),
    ] = None,
    repo: Annotated[
        str | None,
        typer.Option(help="owner/name; default from --plan/--event or $GITHUB_REPOSITORY."),
    ] = None,
    pr: Annotated[int | None, typer.Option(min=1, help="Pull request number.")] = None,
    plan_file: Annotated[
        Path | None,
        typer.Option("--plan", help="plan.json from `collectbot plan`: PR, repo, trigger label."),
    ] = None,
    event: Annotated[
        Path | None,
        typer.Option(
            help="A workflow_run payload: the PR is resolved from its head SHA (fork-safe)."
        ),
    ] = None,
    result_dir: Annotated[
        Path | None,
        typer.Option(
            "--result",
            help="With --event, instead of COMMENT: a result bundle (collectbot result make), "
            "verified and rendered here with this code.",
        ),
    ] = None,
    if_present: Annotated[
        bool,
        typer.Option(help="With --result: exit 0 with a note when the run left no result."),
    ] = False,
    check: Annotated[
        str, typer.Option(help="Verdict as a commit `status`, a `check-run`, or `none`.")
    ] = "status",
    remove_label: Annotated[
        list[str] | None,
        typer.Option(help="Label to remove when the run ends (repeatable); default: the plan's."),
    ] = None,
    keep_label: Annotated[
        bool, typer.Option(help="Keep the plan's trigger label on the PR.")
    ] = False,
    details_url: Annotated[
        str | None, typer.Option(help="Link for the status/check (default: artifacts, comment).")
    ] = None,
    summary: Annotated[
        Path | None,
        typer.Option(help="Append the comment to this job summary; default $GITHUB_STEP_SUMMARY."),
    ] = None,
    report: Annotated[
        Path | None, typer.Option(help="Write what was done as JSON to this file.")
    ] = None,
    github: GitHubOptions = GitHubOptions(),
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            envvar="COLLECTBOT_STORE",
            help="With --result: the run store whose pulls/ namespace keeps each PR's runs, "
            "for the comment's 'since the previous run of this PR' (env COLLECTBOT_STORE).",
        ),
    ] = None,
    site_url: Annotated[
        str | None,
        typer.Option(
            envvar="COLLECTBOT_SITE_URL",
            help="With --result: where the store's `collectbot site` is served (https): the "
            "comment's trends link to each case's page.",
        ),
    ] = None,
) -> None:
    """Post or update the bot's sticky comment and set the verdict on the commit.

    One comment per (backend, GPU), found across all pages and updated in place; an older run
    never overwrites a newer one; concurrent publishers converge on one comment. Fails with
    one line (the rendered comment stays on disk) when GitHub refuses a write.
    """
    from bot.github.publish import (
        PublishOptions,
        raise_for_errors,
        summary_path_from_env,
    )
    from bot.github.publish import (
        publish as do_publish,
    )
    from bot.render.rendered import load_rendered

    if check not in CHECK_KINDS:
        raise UserError(f"--check: unknown value {check!r}; use one of {', '.join(CHECK_KINDS)}")
    opts = PublishOptions(
        check=check,
        remove_labels=list(remove_label or []),
        bot_login=github.login(),
        details_url=details_url,
        summary_path=summary or summary_path_from_env(),
    )
    if result_dir is not None:
        from bot.render.comment import check_site_url

        check_site_url(site_url or None)
        if comment is not None or pr is not None or plan_file is not None or event is None:
            raise UserError("--result goes with --event only (no COMMENT, --pr or --plan)")
        opts.store, opts.site_url = store or None, site_url or None
        _publish_result(
            result_dir, event, opts, if_present=if_present, report=report, github=github
        )
        return
    if comment is None:
        raise UserError("give the rendered comment (COMMENT), or --result with --event")
    if sum(x is not None for x in (pr, plan_file, event)) != 1:
        raise UserError("give exactly one of --pr, --plan and --event to name the pull request")
    rendered = load_rendered(comment)
    plan_data = _load_plan(plan_file) if plan_file else None
    run_event = None
    if event is not None:
        from bot.github.events import load_payload, parse_workflow_run_event

        run_event = parse_workflow_run_event(load_payload(event), str(event))
    repo_name = (
        repo
        or (plan_data or {}).get("repo")
        or (run_event.repo if run_event else None)
        or os.environ.get("GITHUB_REPOSITORY")
    )
    if not repo_name or "/" not in repo_name:
        raise UserError("--repo: give owner/name (or set $GITHUB_REPOSITORY)")
    labels = opts.remove_labels
    if plan_data and not keep_label and not labels and plan_data.get("label"):
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
            number = pr if pr is not None else int((plan_data or {})["pr"])
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
