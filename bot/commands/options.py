"""The commands' options beyond the one-offs, each declared once (name, type, help text,
environment variable): an option that several commands take, as an `Annotated` alias
(`trust: TrustOpt = "untrusted"`), and the option groups: a dataclass of the options that
travel together, which `option_group` (bot/options.py) spreads over a command's parameters
and which turns them, checked, into what the command hands on."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bot.compare.history_verdict import HISTORY_RUNS
from bot.images.trust import TRUST_ENV
from collector.errors import UserError

if TYPE_CHECKING:
    from bot.github.publish import PublishOptions
    from collector.canary import Canary
    from collector.caseplan import CaseSelector
    from collector.record import RunRecord

# The `--trust` of `image ensure|build`, `collect` and `campaign` (bot/images/trust.py).
TrustOpt = Annotated[
    str,
    typer.Option(
        "--trust",
        envvar=TRUST_ENV,
        help="The job's trust level: untrusted (pull request jobs) or trusted (the default "
        "branch's baseline: builds its own image without cache, runs it by id, writes the "
        "persistent JIT cache).",
    ),
]
# The run store of `store`, `history` and `site` (bot/store.py).
StoreOption = Annotated[
    str,
    typer.Option(
        "--store",
        envvar="COLLECTBOT_STORE",
        help="Run store: a directory or an fsspec URL (env COLLECTBOT_STORE).",
    ),
]
DEFAULT_STORE = "collectbot-store"
PlanFile = Annotated[Path, typer.Option(help="plan.json from `collectbot plan`.")]
# The case selection of `collect` and `campaign` (collector/caseplan.py).
CaseSet = Annotated[str, typer.Option(help="Named case set inside the case files.")]
CaseFilter = Annotated[
    str | None,
    typer.Option(help="Keep cases matching field=value[,field=value][;...]; values may list a|b."),
]
CaseLimit = Annotated[
    int | None, typer.Option(min=1, help="Keep only the first N cases of the plan.")
]
CanaryFactor = Annotated[float, typer.Option(min=1.0, help="Canary: slowdown factor.")]


def selector(text: str | None, option: str) -> CaseSelector | None:
    """The case selector `text` (field=value,...) given to `option`, or None when not given."""
    from collector.caseplan import CaseSelector

    return CaseSelector.parse(text, option=option) if text else None


@dataclass(frozen=True)
class CanaryOptions:
    """`collect`'s canaries: cases slowed, failed, crashed or hung on purpose, so that a test
    or a maintainer can see the comparison catch them (collector/canary.py)."""

    canary_slow: Annotated[
        str | None,
        typer.Option(help="Canary: slow the cases this selector matches (field=value,...)."),
    ] = None
    canary_factor: CanaryFactor = 1.5
    canary_fail: Annotated[
        str | None, typer.Option(help="Canary: make the cases this selector matches raise.")
    ] = None
    canary_cuda_fatal: Annotated[
        str | None,
        typer.Option(help="Canary: make these cases raise a CUDA-fatal error (worker replaced)."),
    ] = None
    canary_hang: Annotated[
        str | None, typer.Option(help="Canary: make these cases hang (the watchdog kills them).")
    ] = None
    canary_crash: Annotated[
        str | None, typer.Option(help="Canary: make these cases segfault their worker.")
    ] = None

    def canary(self) -> Canary | None:
        """The canary these options ask for; None when they name no case."""
        from collector.canary import Canary

        failures = (self.canary_fail, self.canary_cuda_fatal, self.canary_hang, self.canary_crash)
        if not any((self.canary_slow, *failures)):
            return None
        return Canary(
            slow=selector(self.canary_slow, "--canary-slow"),
            factor=self.canary_factor,
            fail=selector(self.canary_fail, "--canary-fail"),
            cuda_fatal=selector(self.canary_cuda_fatal, "--canary-cuda-fatal"),
            hang=selector(self.canary_hang, "--canary-hang"),
            crash=selector(self.canary_crash, "--canary-crash"),
        )


# The workflow run a command reports on (Actions sets both variables).
RunId = Annotated[int | None, typer.Option(help="The workflow run id (default $GITHUB_RUN_ID).")]
RunAttempt = Annotated[
    int | None, typer.Option(help="The run attempt (default $GITHUB_RUN_ATTEMPT).")
]


@dataclass(frozen=True)
class WorkflowRun:
    """`--run-id` and `--run-attempt` (`conclude`, `result make`), else Actions' variables."""

    run_id: RunId = None
    run_attempt: RunAttempt = None

    @property
    def id(self) -> int:
        return self.run_id if self.run_id is not None else env_int("GITHUB_RUN_ID", 0)

    @property
    def attempt(self) -> int:
        return (
            self.run_attempt if self.run_attempt is not None else env_int("GITHUB_RUN_ATTEMPT", 1)
        )

    def config(self) -> dict[str, Any]:
        """The run's id and attempt as the fields that ConcludeOptions and make_result take."""
        return {"workflow_run_id": self.id, "run_attempt": self.attempt}


def env_int(name: str, default: int) -> int:
    """A whole number from the environment variable `name`, `default` when unset or empty."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit():
        raise UserError(f"${name}: {value!r} is not a number")
    return int(value)


@dataclass(frozen=True)
class CommentLinks:
    """What the comment links to, and the head its hidden marker names (RenderOptions)."""

    head_sha: Annotated[str | None, typer.Option(help="PR head SHA for the hidden marker.")] = None
    artifacts_url: Annotated[str | None, typer.Option(help="Link to the full artifacts.")] = None
    report_url: Annotated[
        str | None,
        typer.Option(help="Link to the HTML report (https URL, or a file name beside OUT)."),
    ] = None
    site_url: Annotated[
        str | None,
        typer.Option(
            help="Where the store's `collectbot site` is served (https): the trends link to "
            "each case's page."
        ),
    ] = None


@dataclass(frozen=True)
class RunAlone:
    """`render --run`: what failed, and the marker's fields when the run left no record."""

    stage: Annotated[
        str | None, typer.Option(help="--run: the stage that failed (image, collect, compare...).")
    ] = None
    error: Annotated[
        str | None, typer.Option(help="--run: what failed, in words (shown as a code block).")
    ] = None
    log: Annotated[
        Path | None, typer.Option(help="--run: a log file whose last lines the comment shows.")
    ] = None
    backend: Annotated[
        str | None, typer.Option(help="--run: backend for the marker when the run left no record.")
    ] = None
    gpu: Annotated[
        str | None, typer.Option(help="--run: GPU name for the marker when the run left no record.")
    ] = None
    run_id: Annotated[
        str | None, typer.Option(help="--run: run id for the marker when the run left no record.")
    ] = None
    started_at: Annotated[
        str | None,
        typer.Option(help="--run: ISO start time for the marker when the run left no record."),
    ] = None

    def marker(self) -> dict[str, Any]:
        """The marker's fields (RenderOptions) these options give."""
        return {k: v for k, v in asdict(self).items() if k not in ("stage", "error", "log")}


@dataclass(frozen=True)
class ConfirmRuns:
    """`compare`'s re-measurement of the flagged cases, one run record per side."""

    confirm_base: Annotated[
        Path | None,
        typer.Option(help="Re-measurement of the flagged cases, baseline side (a run record)."),
    ] = None
    confirm_cand: Annotated[
        Path | None,
        typer.Option(help="Re-measurement of the flagged cases, candidate side (a run record)."),
    ] = None

    def records(self) -> tuple[RunRecord, RunRecord] | None:
        """Both sides' records, or None when no confirmation was given (never only one)."""
        from collector.record import read_record

        if (self.confirm_base is None) != (self.confirm_cand is None):
            raise UserError("--confirm-base and --confirm-cand go together")
        if self.confirm_base is None or self.confirm_cand is None:
            return None
        return read_record(self.confirm_base), read_record(self.confirm_cand)


@dataclass(frozen=True)
class StoreBaseline:
    """`compare --baseline-from-store`: the baseline (and its history) read from a run store."""

    baseline_from_store: Annotated[
        str | None,
        typer.Option(
            help="Take the baseline from this run store (a directory or fsspec URL): the "
            "latest complete run of the candidate's backend, version, GPU and ops."
        ),
    ] = None
    baseline_ref: Annotated[
        str | None,
        typer.Option(help="With --baseline-from-store: only runs stored under this ref label."),
    ] = None
    history_runs: Annotated[
        int,
        typer.Option(
            min=0,
            help="With --baseline-from-store: read the last N stored baselines too, for each "
            "changed case's range over them (annotates; never changes a verdict). 0: none.",
        ),
    ] = HISTORY_RUNS


@dataclass(frozen=True)
class WebhookEvent:
    """`plan`'s event: a webhook payload and its name, by default the ones Actions gives."""

    event: Annotated[
        Path | None,
        typer.Option(help="Webhook payload (JSON); default $GITHUB_EVENT_PATH."),
    ] = None
    event_name: Annotated[
        str | None,
        typer.Option(
            help="Event name; default $GITHUB_EVENT_NAME, else inferred from the payload."
        ),
    ] = None

    def load(self) -> tuple[Path, dict[str, Any], str]:
        """The payload's path, the payload and the event's name."""
        from bot.github.events import infer_event_name, load_payload

        path = self.event
        if path is None and os.environ.get("GITHUB_EVENT_PATH"):
            path = Path(os.environ["GITHUB_EVENT_PATH"])
        if path is None:
            raise UserError("--event: no payload given and $GITHUB_EVENT_PATH is not set")
        payload = load_payload(path)
        name = self.event_name or os.environ.get("GITHUB_EVENT_NAME") or infer_event_name(payload)
        return path, payload, name


CHECK_KINDS = ("status", "check-run", "none")


@dataclass(frozen=True)
class VerdictOptions:
    """`publish`: where the verdict goes besides the comment (a status or check run, the job
    summary) and which labels come off the pull request."""

    check: Annotated[
        str, typer.Option(help="Verdict as a commit `status`, a `check-run`, or `none`.")
    ] = "status"
    remove_label: Annotated[
        list[str] | None,
        typer.Option(help="Label to remove when the run ends (repeatable); default: the plan's."),
    ] = None
    keep_label: Annotated[
        bool,
        typer.Option(help="Keep the plan's trigger label on the PR."),
    ] = False
    details_url: Annotated[
        str | None, typer.Option(help="Link for the status/check (default: artifacts, comment).")
    ] = None
    summary: Annotated[
        Path | None,
        typer.Option(help="Append the comment to this job summary; default $GITHUB_STEP_SUMMARY."),
    ] = None

    def publish_options(self, bot_login: str | None) -> PublishOptions:
        """These options checked, as bot/github/publish.py takes them."""
        from bot.github.publish import PublishOptions, summary_path_from_env

        if self.check not in CHECK_KINDS:
            kinds = ", ".join(CHECK_KINDS)
            raise UserError(f"--check: unknown value {self.check!r}; use one of {kinds}")
        return PublishOptions(
            check=self.check,
            remove_labels=list(self.remove_label or []),
            bot_login=bot_login,
            details_url=self.details_url,
            summary_path=self.summary or summary_path_from_env(),
        )


@dataclass(frozen=True)
class PullOptions:
    """`publish COMMENT`: the pull request the comment goes to, named by exactly one of --pr,
    --plan (plan.json) and --event (a workflow_run payload)."""

    repo: Annotated[
        str | None,
        typer.Option(help="owner/name; default from --plan/--event or $GITHUB_REPOSITORY."),
    ] = None
    pr: Annotated[int | None, typer.Option(min=1, help="Pull request number.")] = None
    plan_file: Annotated[
        Path | None,
        typer.Option("--plan", help="plan.json from `collectbot plan`: PR, repo, trigger label."),
    ] = None
    event: Annotated[
        Path | None,
        typer.Option(
            help="A workflow_run payload: the PR is resolved from its head SHA (fork-safe)."
        ),
    ] = None

    def check_one(self) -> None:
        if sum(x is not None for x in (self.pr, self.plan_file, self.event)) != 1:
            raise UserError("give exactly one of --pr, --plan and --event to name the pull request")

    def repo_name(self, plan_repo: str | None, event_repo: str | None) -> str:
        """--repo, else the plan's or the event's repository, else $GITHUB_REPOSITORY."""
        name = self.repo or plan_repo or event_repo or os.environ.get("GITHUB_REPOSITORY")
        if not name or "/" not in name:
            raise UserError("--repo: give owner/name (or set $GITHUB_REPOSITORY)")
        return name


@dataclass(frozen=True)
class ResultLinks:
    """`publish --result`: the run store that keeps each pull request's runs, and where the
    store's site is served, for the comment it renders."""

    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            envvar="COLLECTBOT_STORE",
            help="With --result: the run store whose pulls/ namespace keeps each PR's runs, "
            "for the comment's 'since the previous run of this PR' (env COLLECTBOT_STORE).",
        ),
    ] = None
    site_url: Annotated[
        str | None,
        typer.Option(
            envvar="COLLECTBOT_SITE_URL",
            help="With --result: where the store's `collectbot site` is served (https): the "
            "comment's trends link to each case's page.",
        ),
    ] = None

    def checked(self) -> tuple[str | None, str | None]:
        """The store and the site's address (checked), None where not given."""
        from bot.render.comment import check_site_url

        check_site_url(self.site_url or None)
        return self.store or None, self.site_url or None


@dataclass(frozen=True)
class CasePlan:
    """`collect`'s cases: the case file and set, a filter, a limit, a shard and the rules."""

    cases: Annotated[
        Path | None, typer.Option("--cases", help="Case file (YAML); default: the built-in cases.")
    ] = None
    case_set: CaseSet = "default"
    smoke: Annotated[
        bool,
        typer.Option(help="Shortcut for --case-set smoke: a quick check."),
    ] = False
    case_filter: CaseFilter = None
    limit: CaseLimit = None
    shard: Annotated[
        str | None,
        typer.Option(help="Take shard i of n (i/n, 1-based), deterministic by case key."),
    ] = None
    rules: Annotated[
        Path | None,
        typer.Option(help="Rules file (floors, unverified, denylist); default: built-in."),
    ] = None

    def check_file(self) -> None:
        if self.cases is not None and not self.cases.is_file():
            raise UserError(f"{self.cases}: case file not found")

    def config(self) -> dict[str, Any]:
        """The plan's fields of collector/engine.py's CollectConfig, parsed."""
        from collector.caseplan import parse_shard

        return {
            "case_file": self.cases,
            "case_set": "smoke" if self.smoke else self.case_set,
            "case_filter": selector(self.case_filter, "--case-filter"),
            "limit": self.limit,
            "shard": parse_shard(self.shard) if self.shard else None,
            "rules_file": self.rules,
        }


@dataclass(frozen=True)
class ConcludeBaseline:
    """`conclude`: what the merged shards are compared with (a stored baseline), or the
    campaign that takes their place."""

    store: Annotated[
        str | None,
        typer.Option(
            envvar="COLLECTBOT_STORE",
            help="Run store holding the baseline (env COLLECTBOT_STORE).",
        ),
    ] = None
    baseline_ref: Annotated[
        str | None,
        typer.Option(
            help="Compare with the latest stored run under this ref (default: the PR's base "
            "branch; main for a dispatched run)."
        ),
    ] = None
    campaign: Annotated[
        Path | None,
        typer.Option(help="A paired campaign directory (collectbot campaign --out) instead."),
    ] = None

    def config(self) -> dict[str, Any]:
        """These options as bot/conclude.py's ConcludeOptions fields."""
        return {
            "store": self.store or None,
            "baseline_ref": self.baseline_ref or None,
            "campaign": self.campaign,
        }


@dataclass(frozen=True)
class ConcludeReport:
    """`conclude`: what the comment shows besides the comparison: its links, and a failure
    seen before this step."""

    artifacts_url: Annotated[
        str | None, typer.Option(help="Link to the run's artifacts, for the comment.")
    ] = None
    site_url: Annotated[
        str | None,
        typer.Option(
            envvar="COLLECTBOT_SITE_URL",
            help="Where the store's `collectbot site` is served (https): the comment's trends "
            "link to each case's page.",
        ),
    ] = None
    log: Annotated[
        Path | None, typer.Option(help="A log to quote when the run cannot be compared.")
    ] = None
    error: Annotated[
        str | None,
        typer.Option(help="A failure seen before this step: skip the stages, report it."),
    ] = None

    def config(self) -> dict[str, Any]:
        """These options, the site's address checked, as ConcludeOptions fields."""
        from bot.render.comment import check_site_url

        check_site_url(self.site_url or None)
        return {
            "artifacts_url": self.artifacts_url,
            "site_url": self.site_url or None,
            "log": self.log,
            "error": self.error,
        }
