"""A paired A/B campaign: base and head collector versions alternated on one device.

Each version is a git ref of the collector's repository, checked out into a temporary
worktree; each round of each side is one `collectbot collect --runs 1` process that runs
that worktree's own code (its own PYTHONPATH and working directory). Rounds alternate
A B B A A B ... (docs/statistics.md: blocks of A then B fake differences of several
percent, alternation keeps them under 0.3%). Every round's record is kept, raw, with its
checksums; the rounds of a side are merged into one record; the device is checked after
every round (GPU UUID; host and CPU model on a CPU).

Image mode (`base_image`/`head_image`, for a repository that uses collectbot: its base and
head differ by their manifest, so each side runs in its own pinned image): each round of a
side is one `collectbot collect --image <side's image> --runs 1` of the host's (pinned)
collectbot, the container path `collect --image` always takes (sandbox limits, trust, the
allow-listed environment, the checks on the container's untrusted output); no worktree is
made, and `base_ref`/`head_ref` only name the commits the images were built from.

Confirm before comment: the cases first judged regressed, inconclusive or improved are
re-measured in extra paired rounds (restricted to those cases) and judged again; the
comparison says which verdicts were confirmed. `campaign.json` records everything,
including the `collectbot compare` command that recomputes the comparison from the stored
samples without a GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.campaign.git import repo_root, resolve, worktree
from bot.campaign.merge import merge_rounds
from bot.compare.comparison import Baseline, Comparison, compare_runs
from bot.compare.latency import CaseTable, cases_to_confirm
from bot.compare.stats import Settings
from collector.caseplan import CaseSelector
from collector.environment import measured_code_environment
from collector.errors import UserError
from collector.ops import get_op
from collector.record import RUN_JSON, RunRecord, read_record, sha256_file
from collector.settings import cli_args

SIDES = ("base", "head")
CAMPAIGN_JSON = "campaign.json"
# Linux caps one argument at 128 KiB: the confirmation selector stays well below it.
MAX_SELECTOR_CHARS = 100_000
_SELECTOR_SPECIALS = set(",;|=")


@dataclass
class CampaignConfig:
    repo: Path
    base_ref: str
    head_ref: str
    out: Path
    # Image mode: each side's rounds run in this image (both or neither).
    base_image: str | None = None
    head_image: str | None = None
    # Options for `collect --image` in image mode (--trust, --memory, --cache-dir, ...).
    container_args: list[str] = field(default_factory=list)
    runs: int = 6
    device: str = "cpu"
    # Options given to every round of both sides (backend, ops, cases, protocol).
    collect_args: list[str] = field(default_factory=list)
    # Case selection of the first pass (--case-filter, --limit); confirmation selects by key.
    selection_args: list[str] = field(default_factory=list)
    # Options for the head side only (a canary, to prove detection).
    head_args: list[str] = field(default_factory=list)
    confirm: bool = True
    confirm_runs: int | None = None
    confirm_max: int = 500
    python: str = sys.executable
    settings: Settings = field(default_factory=Settings)
    baseline_kind: str = "merge-base"
    round_timeout_s: float | None = None
    # time.monotonic() after which no round starts (a cut campaign keeps >= 2 rounds a side).
    deadline: float | None = None
    command: list[str] = field(default_factory=list)
    log: Callable[[str], None] = lambda _: None


@dataclass
class Side:
    name: str
    ref: str
    sha: str
    tree: Path | None
    image: str | None = None


@dataclass
class CampaignResult:
    out: Path
    comparison: Comparison
    comparison_dir: Path
    manifest: Path


def device_identity(meta: dict[str, Any]) -> dict[str, Any]:
    """What must not change between rounds: the GPU's UUID, or the host and CPU model."""
    dev = meta.get("device") or {}
    if dev.get("kind") == "cuda":
        if dev.get("uuid"):
            return {"kind": "cuda", "uuid": dev["uuid"]}
        return {"kind": "cuda", "name": dev.get("name"), "host": dev.get("host")}
    return {"kind": dev.get("kind") or "cpu", "host": dev.get("host"), "cpu": dev.get("cpu")}


def selector_for_keys(table: CaseTable, keys: list[str]) -> str:
    """A --case-filter selecting exactly these cases (any collector version understands it)."""
    index = {str(k): i for i, k in enumerate(table["key"])}
    fields = dict(table.fields)
    alternatives = []
    for key in keys:
        i = index[key]
        op = str(table["op"][i])
        spec = get_op(op)
        parts = [f"op={op}"]
        values = [(name, fields[name][i]) for name in spec.field_names]
        # An optional field (e.g. attn_backend) only where some case sets it: a collector
        # that predates the field then never sees it, and a case at the default is told
        # apart from its siblings that name another value.
        for opt in spec.optional:
            column = fields.get(opt.name)
            if column is not None and any(v not in (None, opt.default) for v in column):
                values.append((opt.name, column[i] if column[i] is not None else opt.default))
        for name, raw in values:
            value = str(raw)
            if _SELECTOR_SPECIALS & set(value) or not value.strip():
                raise UserError(f"case {key!r}: field {name}={value!r} cannot be selected")
            parts.append(f"{name}={value}")
        alternatives.append(",".join(parts))
    return ";".join(alternatives)


class Campaign:
    def __init__(self, cfg: CampaignConfig) -> None:
        if cfg.device.startswith("cuda") and ":" not in cfg.device:
            raise UserError("--device: a paired campaign runs on one GPU: use cuda:N (or cpu)")
        if cfg.runs < 2:
            raise UserError("--runs: a campaign needs at least 2 runs per side")
        self.cfg = cfg
        self.images = {"base": cfg.base_image, "head": cfg.head_image}
        if (cfg.base_image is None) != (cfg.head_image is None):
            raise UserError("--base-image and --head-image: give both (image mode) or neither")
        if self.image_mode:
            # The images are the code; the refs only name the commits they were built from
            # (no repository is read).
            self.repo = cfg.repo
            self.shas = {"base": cfg.base_ref, "head": cfg.head_ref}
        else:
            self.repo = repo_root(cfg.repo)
            self.shas = {
                "base": resolve(self.repo, cfg.base_ref),
                "head": resolve(self.repo, cfg.head_ref),
            }
        if cfg.out.exists() and any(cfg.out.iterdir()):
            raise UserError(f"{cfg.out}: not empty (choose a new --out)")
        cfg.out.mkdir(parents=True, exist_ok=True)
        self.identity: dict[str, Any] | None = None
        self.rounds: list[dict[str, Any]] = []
        self.started = datetime.now(UTC).isoformat(timespec="seconds")
        self.manifest: dict[str, Any] = {}
        self.cut_short = False

    def _past_deadline(self, done_rounds: int) -> bool:
        """Stop before a round pair once the deadline passed (never before 2 rounds a side)."""
        if self.cfg.deadline is None or done_rounds < 2 or time.monotonic() < self.cfg.deadline:
            return False
        self.cut_short = True
        self.cfg.log(f"deadline: no round starts after {done_rounds} rounds a side")
        return True

    @property
    def image_mode(self) -> bool:
        return self.cfg.base_image is not None

    # -- rounds ---------------------------------------------------------------------------

    def _round_process(self, side: Side) -> tuple[list[str], dict[str, str], Path]:
        """The round's `collect` options, environment and working directory for its mode."""
        env = measured_code_environment()
        if side.image is not None:
            # The host's pinned collectbot starts the container: its own code and the engine's
            # address; the container gets only the allow-listed variables (bot/images).
            env.update({k: v for k, v in os.environ.items() if k.startswith("DOCKER_")})
            if "PYTHONPATH" in os.environ:
                env["PYTHONPATH"] = os.environ["PYTHONPATH"]
            timeout = (
                []
                if self.cfg.round_timeout_s is None
                else [
                    "--container-timeout",
                    str(int(self.cfg.round_timeout_s)),
                ]
            )
            return ["--image", side.image, *self.cfg.container_args, *timeout], env, self.cfg.out
        # The round runs the ref's own collector (a pull request's code): no secrets.
        assert side.tree is not None
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(side.tree), env.get("PYTHONPATH", "")) if p
        )
        env["COLLECTBOT_GIT_SHA"] = side.sha
        return [], env, side.tree

    def _check_round(self, side: Side, round_dir: Path, record: RunRecord) -> dict[str, Any]:
        """A round's record names its side's image (image mode) and the campaign's one
        device; returns the record's image block."""
        image: dict[str, Any] = record.meta.get("image") or {}
        if side.image is not None and image.get("ref") != side.image:
            raise UserError(
                f"{round_dir / RUN_JSON}: image {image.get('ref')!r} is not the {side.name} "
                f"side's {side.image!r}"
            )
        identity = device_identity(record.meta)
        if side.image is not None and identity.get("kind") != "cuda":
            # Each container has its own host name; it runs on this driver's host.
            identity["host"] = "(this host)"
        if self.identity is None:
            self.identity = identity
        elif identity != self.identity:
            raise UserError(
                f"{round_dir / RUN_JSON}: device {identity} differs from the campaign's "
                f"{self.identity}: a paired campaign must stay on one device"
            )
        return image

    def _collect(self, side: Side, round_dir: Path, args: list[str], phase: str) -> RunRecord:
        mode_args, env, cwd = self._round_process(side)
        cmd = [
            self.cfg.python,
            "-m",
            "bot",
            "collect",
            *mode_args,
            *self.cfg.collect_args,
            *args,
            *(self.cfg.head_args if side.name == "head" else []),
            "--device",
            self.cfg.device,
            "--runs",
            "1",
            "--quiet",
            "--out",
            str(round_dir),
        ]
        round_dir.parent.mkdir(parents=True, exist_ok=True)
        log_path = round_dir.parent / f"{round_dir.name}.log"
        t0 = time.monotonic()
        with log_path.open("w") as log:
            try:
                proc = subprocess.run(
                    cmd,
                    cwd=cwd,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    timeout=self.cfg.round_timeout_s,
                    check=False,
                )
                code: int | str = proc.returncode
            except subprocess.TimeoutExpired:
                code = "timeout"
        seconds = time.monotonic() - t0
        if not (round_dir / RUN_JSON).is_file():
            tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] or [""]
            raise UserError(
                f"{side.name} ({side.ref}) {phase} round {round_dir.name}: collect ended "
                f"({code}) without a run record: {tail[0][:300]} (log: {log_path})"
            )
        record = read_record(round_dir)
        image = self._check_round(side, round_dir, record)
        self.rounds.append(
            {
                "phase": phase,
                "side": side.name,
                "sha": side.sha,
                "path": str(round_dir.relative_to(self.cfg.out)),
                "exit": code,
                "status": record.status,
                "seconds": round(seconds, 2),
                "run_json_sha256": sha256_file(round_dir / RUN_JSON),
                **({"image": side.image, "image_id": image.get("digest")} if side.image else {}),
                "command": ["python", *cmd[1:]],
            }
        )
        self.cfg.log(
            f"{phase} round {round_dir.name}: {side.name} {side.sha[:10]} "
            f"{record.status} in {seconds:.1f} s"
        )
        self._write_manifest("running")
        return record

    def _phase(
        self, sides: dict[str, Side], rounds: int, first_round: int, root: Path, args: list[str]
    ) -> dict[str, Path]:
        """`rounds` alternating rounds (A B, B A, ...), merged per side into root/<side>-run."""
        done: dict[str, list[RunRecord]] = {name: [] for name in SIDES}
        for r in range(rounds):
            if self._past_deadline(r):
                break
            order = SIDES if (first_round + r) % 2 == 0 else tuple(reversed(SIDES))
            for name in order:
                round_dir = root / "rounds" / name / f"round-{r:02d}"
                done[name].append(self._collect(sides[name], round_dir, args, root.name))
        merged = {}
        for name in SIDES:
            merged[name] = merge_rounds(
                done[name],
                root / f"{name}-run",
                {
                    "campaign": {
                        "side": name,
                        "ref": sides[name].ref,
                        "sha": sides[name].sha,
                        "phase": root.name,
                        **({"image": sides[name].image} if sides[name].image else {}),
                    },
                    "git_sha": sides[name].sha,
                    "command": self.cfg.command,
                },
            )
        return merged

    # -- the campaign ---------------------------------------------------------------------

    def run(self) -> CampaignResult:
        cfg = self.cfg
        self._write_manifest("running")
        with ExitStack() as stack:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="collectbot-ab-")))
            sides = {}
            for name, ref in (("base", cfg.base_ref), ("head", cfg.head_ref)):
                if self.image_mode:
                    sides[name] = Side(name, ref, self.shas[name], None, self.images[name])
                    continue
                tree = stack.enter_context(worktree(self.repo, self.shas[name], tmp / name))
                sides[name] = Side(name, ref, self.shas[name], tree)
            main = self._phase(sides, cfg.runs, 0, cfg.out / "main", cfg.selection_args)
            base, head = read_record(main["base"]), read_record(main["head"])
            baseline = Baseline(kind=cfg.baseline_kind, paired=True)
            first = compare_runs(base, head, cfg.settings, baseline)
            first.write(cfg.out / "first-pass")
            confirm: tuple[RunRecord, RunRecord] | None = None
            keys = [] if self._past_deadline(cfg.runs) else self._to_confirm(first)
            if keys:
                selector = selector_for_keys(first.cases, keys)
                CaseSelector.parse(selector, option="confirmation selector")
                (cfg.out / "confirm").mkdir(parents=True, exist_ok=True)
                (cfg.out / "confirm" / "cases.txt").write_text("\n".join(keys) + "\n")
                runs = cfg.confirm_runs or cfg.runs
                merged = self._phase(
                    sides,
                    runs,
                    cfg.runs,
                    cfg.out / "confirm",
                    ["--case-filter", selector],
                )
                confirm = (read_record(merged["base"]), read_record(merged["head"]))
        result = compare_runs(base, head, cfg.settings, baseline, confirm)
        cmp_dir = cfg.out / "comparison"
        result.write(cmp_dir)
        from bot.render.comment import RenderOptions, render_comment

        (cfg.out / "comment.md").write_text(
            render_comment(result.data, RenderOptions(head_sha=self.shas["head"]))
        )
        manifest = self._write_manifest("complete", confirmed=confirm is not None)
        return CampaignResult(cfg.out, result, cmp_dir, manifest)

    def _to_confirm(self, first: Comparison) -> list[str]:
        if not self.cfg.confirm:
            return []
        keys = cases_to_confirm(first.cases)
        if len(keys) > self.cfg.confirm_max:
            # The largest changes first: they are the ones a comment leads with.
            table = first.cases
            ratio = {str(k): float(r) for k, r in zip(table["key"], table["ratio"], strict=True)}
            keys = sorted(keys, key=lambda k: -abs(ratio[k] - 1.0))[: self.cfg.confirm_max]
        while keys and len(selector_for_keys(first.cases, keys)) > MAX_SELECTOR_CHARS:
            keys = keys[: len(keys) * 3 // 4]
        return sorted(keys)

    def recompute_command(self, confirmed: bool) -> list[str]:
        """`collectbot compare` on the stored records, run inside the campaign directory."""
        cmd = ["collectbot", "compare", "main/base-run", "main/head-run"]
        cmd += ["--paired", "--baseline-kind", self.cfg.baseline_kind]
        if confirmed:
            cmd += ["--confirm-base", "confirm/base-run", "--confirm-cand", "confirm/head-run"]
        cmd += cli_args(self.cfg.settings, every=True)
        cmd += ["--out", "comparison"]
        return cmd

    def _write_manifest(self, status: str, confirmed: bool = False) -> Path:
        cfg = self.cfg
        self.manifest = {
            "status": status,
            "started_at": self.started,
            "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "repo": None if self.image_mode else str(self.repo),
            "mode": "image" if self.image_mode else "worktree",
            "base": {"ref": cfg.base_ref, "sha": self.shas["base"], "image": cfg.base_image},
            "head": {"ref": cfg.head_ref, "sha": self.shas["head"], "image": cfg.head_image},
            "device": cfg.device,
            "device_identity": self.identity,
            "runs_per_side": cfg.runs,
            "confirm": cfg.confirm,
            "confirm_runs": cfg.confirm_runs or cfg.runs,
            "schedule": "alternating rounds A B B A ...; each round one collect process per side"
            + (" (collect --image: the side's image)" if self.image_mode else ""),
            "container_args": cfg.container_args,
            "collect_args": cfg.collect_args,
            "selection_args": cfg.selection_args,
            "head_args": cfg.head_args,
            "settings": cfg.settings.to_json(),
            "command": cfg.command,
            "rounds": self.rounds,
            "cut_short": self.cut_short,
        }
        if status == "complete":
            self.manifest["recompute"] = self.recompute_command(confirmed)
        path = cfg.out / CAMPAIGN_JSON
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(self.manifest, indent=1) + "\n")
        tmp.replace(path)
        return path


def run_campaign(cfg: CampaignConfig) -> CampaignResult:
    return Campaign(cfg).run()
