"""`collectbot collect --image REF`: the collector inside a locked-down container.

The host plans (so bad options fail before anything starts), writes the collection as a JSON
config into a read-only input mount, and runs `python -m collector run` in the image with the
sandbox of `sandbox.py`: no network, a read-only root, the output directory and the JIT caches
as the only writable mounts (the persistent cache only for a trusted job; an untrusted one
gets a private copy, thrown away after the run: `trust.py`), GPUs through device requests,
no host environment. The collector writes the run record into the output directory.

Afterwards the host takes the output folder back as hostile (`output.py`: a fresh folder
with copies of its regular files only; links and special files are dropped, never followed),
then attaches what the container did (`container.log`, and a `container` block
in run.json: exit code, OOM kill, image id and digest, limits), both checksummed in run.json.
A container that died (killed, out of memory, crashed) leaves its checkpoint: the host
re-finalises the record from it and marks it `partial` (`recover.py`); `--resume` continues it.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console

from bot.images.engine import find_local
from bot.images.output import take_output
from bot.images.recover import attach_container, record_after_exit
from bot.images.sandbox import (
    CACHE,
    IN,
    JIT_CACHE_DIRS,
    JIT_CACHE_ENV,
    OUT,
    BindMount,
    Limits,
    Sandbox,
    gpu_request,
    passthrough_env,
)
from bot.images.trust import Trust, parse_trust, require_content_ref
from bot.render.sanitize import clean
from collector.config_io import write_config
from collector.engine import CollectConfig, signal_handler
from collector.errors import UserError
from collector.provenance import git_sha
from collector.record import CHECKPOINT

EXIT_VERSION_GATE = 3
STOP_GRACE_S = 30


@dataclass
class ContainerOptions:
    image: str
    cache_dir: Path
    limits: Limits = field(default_factory=Limits)
    env_names: list[str] = field(default_factory=list)
    timeout_s: float | None = None
    trust: Trust = "untrusted"


@dataclass
class ContainerOutcome:
    run_json: Path
    exit_code: int
    oom_killed: bool
    status: str
    stopped_by: str | None
    last_line: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.status == "complete"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "collectbot" / "jit"


def image_identity(client: Any, ref: str) -> tuple[str, str, dict[str, str]]:
    """(image id, digest to record, labels): the registry digest if it has one, else its id."""
    image = find_local(client, ref)
    if image is None:
        raise UserError(f"--image {ref}: not in the engine (run `collectbot image ensure` first)")
    repo_digests = [str(d) for d in image.attrs.get("RepoDigests") or []]
    name = ref.partition("@")[0].rpartition(":")[0] if ":" in ref.rpartition("/")[2] else ref
    digest = next(
        (d.partition("@")[2] for d in repo_digests if d.startswith(f"{name}@")),
        repo_digests[0].partition("@")[2] if repo_digests else str(image.id),
    )
    return str(image.id), digest, dict(image.labels or {})


def _prepare_out(cfg: CollectConfig) -> None:
    out = cfg.out
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a directory")
    if out.exists() and any(out.iterdir()) and not cfg.resume:
        raise UserError(f"{out}: not empty (choose a new --out, or pass --resume)")
    if cfg.resume and not (out / CHECKPOINT).exists():
        raise UserError(f"{out}: nothing to resume (no {CHECKPOINT})")
    out.mkdir(parents=True, exist_ok=True)


@contextmanager
def jit_cache(cache_dir: Path, trust: Trust) -> Iterator[tuple[Path, str]]:
    """(host folder to mount, what it is). Trusted: the persistent cache itself. Untrusted: a
    private copy of it (links copied as links, never followed), deleted after the run, so a
    replaced or added file (a Triton launcher .so) never reaches the persistent cache."""
    if trust == "trusted":
        for sub in JIT_CACHE_DIRS:
            (cache_dir / sub).mkdir(parents=True, exist_ok=True)
        yield cache_dir.resolve(), "persistent (trusted, read-write)"
        return
    private = Path(tempfile.mkdtemp(prefix="collectbot-jit-"))
    try:
        if cache_dir.is_dir():
            shutil.copytree(cache_dir, private, symlinks=True, dirs_exist_ok=True)
        for sub in JIT_CACHE_DIRS:
            (private / sub).mkdir(parents=True, exist_ok=True)
        yield private, "private copy (untrusted, discarded)"
    finally:
        shutil.rmtree(private, ignore_errors=True)


@contextmanager
def _forward_stop(stop: threading.Event, do_stop: Any) -> Iterator[None]:
    """SIGTERM/SIGINT on the host stop the container gracefully (it finalises as partial)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        if not stop.is_set():
            stop.set()
            threading.Thread(target=do_stop, args=(signal.Signals(signum).name,)).start()

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    with signal_handler(handler):
        yield


def collect_in_container(
    client: Any, cfg: CollectConfig, opts: ContainerOptions, console: Console
) -> ContainerOutcome:
    """Run one collection in the image; the record lands in cfg.out on the host."""
    import docker.errors

    # Validate the options here, before any container starts (device rules apply inside).
    base_plan = cfg.base_plan()
    if not base_plan.cases:
        raise UserError("the plan selects no cases (check --ops, --cases, --case-filter, --shard)")
    if opts.trust == "trusted":
        require_content_ref(opts.image)
    image_id, digest, labels = image_identity(client, opts.image)
    gpus, inside_device = gpu_request(cfg.device)
    _prepare_out(cfg)
    cfg.out = cfg.out.resolve()
    env = {**JIT_CACHE_ENV, **passthrough_env(opts.env_names, os.environ)}
    sha = git_sha()
    if sha:
        env["COLLECTBOT_GIT_SHA"] = sha
    started = time.time()
    with (
        jit_cache(opts.cache_dir, opts.trust) as (cache, cache_kind),
        tempfile.TemporaryDirectory(prefix="collectbot-in-") as tmp,
    ):
        in_dir = Path(tmp)
        inner = replace(
            cfg,
            out=Path(OUT),
            device=inside_device,
            image_ref=opts.image,
            image_digest=digest,
        )
        if cfg.case_file is not None:
            shutil.copyfile(cfg.case_file, in_dir / "cases.yaml")
            inner = replace(inner, case_file=Path(IN) / "cases.yaml")
        if cfg.rules_file is not None:
            shutil.copyfile(cfg.rules_file, in_dir / "rules.yaml")
            inner = replace(inner, rules_file=Path(IN) / "rules.yaml")
        write_config(inner, in_dir / "config.json")
        in_dir.chmod(0o755)
        for path in in_dir.iterdir():
            path.chmod(0o644)
        sandbox = Sandbox(
            image=image_id,
            command=["python3", "-m", "collector", "run", f"{IN}/config.json"],
            env=env,
            mounts=[
                BindMount(cfg.out, OUT, read_only=False),
                BindMount(in_dir, IN, read_only=True),
                BindMount(cache, CACHE, read_only=False),
            ],
            gpus=gpus,
            limits=opts.limits,
            user=f"{os.getuid()}:{os.getgid()}",
            labels={"org.collectbot.role": "collect", "org.collectbot.out": str(cfg.out)},
        )
        try:
            container = client.containers.run(**sandbox.kwargs())
        except docker.errors.APIError as exc:
            raise UserError(
                f"--image {opts.image}: cannot start the container "
                f"({clean(str(exc.explanation or exc), 300)})"
            ) from None
        stopped_by: list[str] = []
        stop = threading.Event()

        def do_stop(why: str) -> None:
            stopped_by.append(why)
            with suppress(docker.errors.APIError):
                container.stop(timeout=STOP_GRACE_S)

        timer = None
        if opts.timeout_s is not None:
            timer = threading.Timer(opts.timeout_s, do_stop, args=(f"timeout {opts.timeout_s}s",))
            timer.daemon = True
            timer.start()
        log = bytearray()
        try:
            with _forward_stop(stop, do_stop):
                for chunk in container.logs(stream=True, follow=True):
                    log += chunk
                    text = clean(chunk.decode(errors="replace"), 20000)
                    console.out(text, end="", highlight=False)
                state = container.wait()
                container.reload()
        finally:
            if timer is not None:
                timer.cancel()
        info = container.attrs.get("State", {})
        exit_code = int(state.get("StatusCode", info.get("ExitCode", -1)))
        oom = bool(info.get("OOMKilled"))
        with suppress(docker.errors.APIError):
            container.remove(force=True)
    # The container is gone: nothing it left can change now. Keep only its regular files.
    dropped = take_output(cfg.out)
    container_block = {
        "image_ref": opts.image,
        "image_id": image_id,
        "image_digest": digest,
        "image_content_hash": labels.get("org.collectbot.content-hash"),
        "exit_code": exit_code,
        "oom_killed": oom,
        "stopped_by": stopped_by[0] if stopped_by else None,
        "seconds": round(time.time() - started, 1),
        "network": "none",
        "read_only_root": True,
        "dropped": dropped,
        "trust": opts.trust,
        "jit_cache": cache_kind,
        "device_host": cfg.device,
        "device_inside": inside_device,
        "gpus": gpus,
        "limits": {
            "memory": opts.limits.memory,
            "cpus": opts.limits.cpus,
            "pids": opts.limits.pids,
            "shm_size": opts.limits.shm_size,
        },
    }
    run_json, status = record_after_exit(cfg, container_block, bytes(log), labels)
    attach_container(cfg.out, container_block, bytes(log))
    lines = [ln for ln in log.decode(errors="replace").splitlines() if ln.strip()]
    return ContainerOutcome(
        run_json=run_json,
        exit_code=exit_code,
        oom_killed=oom,
        status=status,
        stopped_by=stopped_by[0] if stopped_by else None,
        last_line=lines[-1] if lines else "",
    )


def describe_failure(outcome: ContainerOutcome) -> str:
    """One line for a container that did not finish cleanly."""
    code = outcome.exit_code
    if code == 0 and outcome.stopped_by:
        why = f"it was stopped ({outcome.stopped_by})"
    elif code == EXIT_VERSION_GATE:
        why = "the version gate failed"
    elif outcome.oom_killed:
        why = "it ran out of memory (OOM killed)"
    elif code > 128:
        try:
            why = f"it was killed by {signal.Signals(code - 128).name}"
        except ValueError:
            why = f"it exited with {code}"
    else:
        why = f"it exited with {code}"
    if outcome.stopped_by and code != 0:
        why += f" after being stopped ({outcome.stopped_by})"
    tail = f" ({clean(outcome.last_line, 300)})" if outcome.last_line and code != 0 else ""
    return (
        f"the collector container ended badly: {why}{tail}; the record at "
        f"{outcome.run_json.parent} is marked {outcome.status}"
    )


def run_collect_command(cfg: CollectConfig, opts: ContainerOptions) -> Path:
    """The `collect --image` branch of the CLI: run, report, fail in one line if it went bad."""
    from bot.images.engine import connect

    console = Console(stderr=True, quiet=cfg.quiet, soft_wrap=True)
    cfg.command = [*cfg.command, "--image", opts.image]
    outcome = collect_in_container(connect(), cfg, opts, console)
    if not outcome.ok:
        raise UserError(describe_failure(outcome))
    return outcome.run_json


def container_options(
    image: str,
    cache_dir: Path | None,
    limits: Limits,
    pass_env: list[str] | None,
    timeout_s: float | None,
    trust: str = "untrusted",
) -> ContainerOptions:
    opts = ContainerOptions(
        image=image,
        cache_dir=cache_dir or default_cache_dir(),
        limits=limits,
        env_names=list(pass_env or []),
        timeout_s=timeout_s,
        trust=parse_trust(trust),
    )
    opts.limits.check()
    return opts
