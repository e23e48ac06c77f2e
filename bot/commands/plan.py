"""`collectbot plan`: decide from a webhook payload whether to collect, and what."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Annotated, Any

import typer

from bot.commands.github_options import GitHubOptions, api_errors
from bot.commands.options import WebhookEvent
from bot.errors import one_line_errors
from bot.options import option_group


def write_github_output(path: Path, plan: dict[str, Any]) -> None:
    """Step outputs: scalars one per line; the whole plan as one JSON line under `plan`."""
    scalars = {
        "trigger": "true" if plan["trigger"] else "false",
        "code": plan["code"],
        "backend": plan.get("backend") or "",
        "ops": ",".join(plan.get("ops") or []),
        "case_set": plan.get("case_set") or "",
        "pr": "" if plan.get("pr") is None else str(plan["pr"]),
        "head_sha": plan.get("head_sha") or "",
        "base_sha": plan.get("base_sha") or "",
        "label": plan.get("label") or "",
        "fork": "true" if plan.get("fork") else "false",
        "baseline": plan.get("baseline") or "",
        "shard_count": str(plan.get("shards") or 1),
        # The collection matrix, always a valid list (a skipped job still parses it).
        "shards": json.dumps(list(range(1, int(plan.get("shards") or 1) + 1))),
    }
    with path.open("a", encoding="utf-8") as fh:
        for key, value in scalars.items():
            fh.write(f"{key}={_one_line(value)}\n")
        delim = f"collectbot_{secrets.token_hex(8)}"
        for key, value in (("reason", plan["reason"]), ("plan", json.dumps(plan))):
            fh.write(f"{key}<<{delim}\n{_one_line(value)}\n{delim}\n")


def _one_line(value: str) -> str:
    return value.replace("\r", " ").replace("\n", " ")


@one_line_errors
@option_group(GitHubOptions, "github")
@option_group(WebhookEvent, "webhook")
def plan(
    webhook: WebhookEvent = WebhookEvent(),
    out: Annotated[Path, typer.Option("--out", help="Where to write the decision as JSON.")] = Path(
        "plan.json"
    ),
    backends: Annotated[
        str | None,
        typer.Option(help="Comma-separated backends a label may name (default: all installed)."),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(help="Decide only: do not remove labels or post the explanation comment."),
    ] = False,
    shards: Annotated[
        int,
        typer.Option(
            min=1,
            max=256,
            help="Cut a store-baseline collection into this many shards (one runner each); "
            "a paired campaign always runs on one GPU.",
        ),
    ] = 1,
    head_sha: Annotated[
        str | None,
        typer.Option(help="workflow_dispatch: the commit to collect; default $GITHUB_SHA."),
    ] = None,
    github: GitHubOptions = GitHubOptions(),
    config: Annotated[
        Path | None,
        typer.Option(
            help="The repository's config (case set per label, thresholds); default: "
            ".github/collectbot.yml when there is one. Carried in the plan for conclude."
        ),
    ] = None,
) -> None:
    """Decide whether this event triggers a collection, and for which backend, ops and SHA.

    A trigger is a maintainer's `collect/<backend>[:<ops>][@<case-set>]` label: it approves
    the head SHA it was applied to, if the labeler has write permission or more and the head
    has not moved. New commits drop the label. Writes OUT (JSON) and, when set,
    $GITHUB_OUTPUT; prints the human reason. Exit 0 whether or not it triggers.
    """
    from bot.ci_config import load_ci_config
    from bot.github.events import PR_EVENTS, parse_pull_request_event
    from bot.github.labels import default_vocabulary
    from bot.github.plan import Plan, decide_dispatch, decide_event, decide_with_facts

    path, payload, name = webhook.load()
    known_backends, known_ops = default_vocabulary()
    if backends:
        known_backends = tuple(b.strip().lower() for b in backends.split(",") if b.strip())
    pr_event = parse_pull_request_event(payload, name, str(path)) if name in PR_EVENTS else None
    decision: Plan | Any
    if name == "workflow_dispatch":
        sha = head_sha or os.environ.get("GITHUB_SHA") or ""
        decision = decide_dispatch(payload, sha, backends=known_backends, ops=known_ops)
    else:
        decision = decide_event(name, pr_event, backends=known_backends, ops=known_ops)
    api = None
    needs_api = not isinstance(decision, Plan) or (
        bool(decision.remove_labels or decision.notice) and not dry_run
    )
    if needs_api:
        assert pr_event is not None
        api = github.repo_api(pr_event.repo)
    result: Plan
    if isinstance(decision, Plan):
        result = decision
    else:
        from bot.github.facts import gather_facts

        assert api is not None and pr_event is not None
        with api_errors("reading the PR and the labeler's permission"):
            result = decide_with_facts(pr_event, decision, gather_facts(api, pr_event))
    if result.trigger:
        result.shards = 1 if result.baseline == "paired" else shards
    ci_config = load_ci_config(config)  # the base branch's: the PR's code cannot loosen it
    if result.trigger and ci_config is not None:
        result.case_set = ci_config.case_set_for(result.label or "") or result.case_set
    data = result.to_json()
    if ci_config is not None:
        data["ci_config"] = ci_config.to_json()
    if api is not None and not dry_run and (result.remove_labels or result.notice):
        from bot.github.facts import apply_plan_actions

        with api_errors("removing the label and explaining why"):
            applied = apply_plan_actions(api, result, bot_login=github.login())
        data["applied"] = {
            "labels_removed": applied.labels_removed,
            "comments_written": applied.comments_written,
        }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    if os.environ.get("GITHUB_OUTPUT"):
        write_github_output(Path(os.environ["GITHUB_OUTPUT"]), data)
    from bot.render.sanitize import clean

    verdict = "collect" if result.trigger else "skip"
    typer.echo(f"{verdict} ({result.code}): {clean(result.reason, 600)}")
