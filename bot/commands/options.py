"""The options that several commands take, each declared once: its name, type, help text
and environment variable. A command names the alias (`trust: TrustOpt = "untrusted"`);
a set that travels together is an option group (`bot/options.py`, `option_group`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from bot.images.trust import TRUST_ENV
from collector.errors import UserError

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


def env_int(name: str, default: int) -> int:
    """A whole number from the environment variable `name`, `default` when unset or empty."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit():
        raise UserError(f"${name}: {value!r} is not a number")
    return int(value)
