"""Build, reuse and push the collector image through the docker SDK.

`ensure` is the image stage: compute the content-hash tag; reuse a local image with that tag,
or pull it from the registry the repository names; otherwise build. The engine's layer cache
then reuses every layer whose inputs did not change, so a changed collector rebuilds only the
collector's own layers.

A trusted job (`trusted=True`, docs/security.md) reuses nothing another job on the engine
could have made: no local tag, no pull, no layer cache. It builds from the pinned base, checks
that the image it got sits on that base's layers, and is run by the image id it returns.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from bot.images.context import BuildContext, BuildInputs, assemble, image_tag
from bot.images.engine import find_local
from bot.render.sanitize import clean
from collector.errors import UserError
from collector.imageref import parse_image_ref
from collector.pins import FrameworkPins

LABEL_HASH = "org.collectbot.content-hash"
_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")


@dataclass
class ImageResult:
    """What the image stage hands on: which image, exactly, and how it was obtained."""

    ref: str
    id: str
    repo_digest: str | None
    content_hash: str
    framework: str
    pins: dict[str, Any]
    base_image: str
    base_identity: str
    built: bool = False
    pulled: bool = False
    pushed: bool = False
    cached_steps: int = 0
    total_steps: int = 0
    installed: dict[str, Any] | None = None
    verified_at: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def digest(self) -> str:
        """The registry digest once pushed or pulled, else the local image id (both immutable)."""
        if self.repo_digest:
            return self.repo_digest.partition("@")[2]
        return self.id

    def to_json(self) -> dict[str, Any]:
        # Every field but the notes (printed, not recorded), and the derived digest.
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "notes"}
        return {**data, "digest": self.digest}


def resolve_base(client: Any, pins: FrameworkPins, override: str | None) -> tuple[str, str]:
    """(reference for FROM, identity for the hash). Unpinned only for a local, unpulled image."""
    text = override or pins.base_image
    where = "--base-image" if override else f"manifest frameworks.{pins.name}.base_image"
    ref = parse_image_ref(text, where=where)
    if ref.digest is not None:
        return text, ref.digest
    image = find_local(client, text)
    if image is None:
        raise UserError(f"{where}: {text!r} is not pinned by digest and is not a local image")
    if image.attrs.get("RepoDigests"):
        raise UserError(
            f"{where}: {text!r} came from a registry; pin it by digest "
            f"({image.attrs['RepoDigests'][0]})"
        )
    return text, str(image.id)


def _registry_of(repository: str) -> str | None:
    return parse_image_ref(repository, where="--repository").registry


def try_pull(client: Any, tag: str, console: Console) -> Any | None:
    """Pull `tag` from the registry its repository names; None when it is not there."""
    import docker.errors

    if _registry_of(tag.rpartition(":")[0]) is None:
        return None
    repository, _, version = tag.rpartition(":")
    try:
        for _event in client.api.pull(repository, tag=version, stream=True, decode=True):
            pass
    except docker.errors.APIError as exc:
        console.print(f"not in the registry: {clean(str(exc), 200)}", markup=False)
        return None
    return find_local(client, tag)


class BuildDisplay:
    """A progress bar over the Dockerfile's steps; plain step lines when not on a terminal."""

    def __init__(self, console: Console, log: io.TextIOBase | None) -> None:
        self.console = console
        self.log = log
        self.cached = 0
        self.total = 0
        self.progress: Progress | None = None
        self.task: Any = None
        self.tail: list[str] = []
        self.step = ""
        self.last_error = ""

    def __enter__(self) -> BuildDisplay:
        if self.console.is_terminal:
            self.progress = Progress(
                SpinnerColumn(),
                TextColumn("[bold]build[/bold] {task.description}", markup=True),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[cached]} cached"),
                TimeElapsedColumn(),
                console=self.console,
            )
            self.progress.__enter__()
            self.task = self.progress.add_task("", total=None, cached=0)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.__exit__(None, None, None)

    def line(self, text: str) -> None:
        if self.log is not None:
            self.log.write(text + "\n")
        raw = text.rstrip()
        # Parse the raw line; show only the cleaned one (clean() also breaks up "-->").
        text = clean(raw, 300)
        if not raw:
            return
        self.tail = [*self.tail[-19:], text]
        step = _STEP.match(raw)
        if text.lstrip().upper().startswith("ERROR"):
            self.last_error = text.strip()
        if step:
            current, self.total = int(step.group(1)), int(step.group(2))
            what = step.group(3)[:60]
            self.step = f"step {current}/{self.total} ({what.strip()})"
            if self.progress is not None:
                self.progress.update(
                    self.task, total=self.total, completed=current - 1, description=what
                )
            else:
                self.console.print(f"build step {current}/{self.total}: {what}", markup=False)
        elif raw.strip() == "---> Using cache":
            self.cached += 1
            if self.progress is not None:
                self.progress.update(self.task, cached=self.cached)
        elif self.progress is None and text.startswith(("Successfully", "ERROR", "error")):
            self.console.print(text, markup=False)

    def done(self) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=self.total, description="done")


def _events_text(event: dict[str, Any]) -> Iterator[str]:
    if "stream" in event:
        yield from str(event["stream"]).splitlines()
    elif "status" in event:
        status = str(event["status"])
        if event.get("id"):
            status = f"{event['id']}: {status}"
        yield status


def build_image(
    client: Any,
    ctx: BuildContext,
    tag: str,
    *,
    console: Console,
    log_path: Path | None = None,
    network_mode: str | None = None,
    nocache: bool = False,
) -> tuple[Any, int, int]:
    """Build; returns (image, cached steps, total steps). Errors end in one line."""
    import docker.errors

    log = log_path.open("w", encoding="utf-8") if log_path is not None else None
    image_id = None
    error = None
    display = BuildDisplay(console, log)
    try:
        with display:
            stream: Iterable[dict[str, Any]] = client.api.build(
                fileobj=io.BytesIO(ctx.tar_bytes()),
                custom_context=True,
                tag=tag,
                buildargs=ctx.build_args,
                rm=True,
                forcerm=True,
                pull=False,
                nocache=nocache,
                decode=True,
                network_mode=network_mode,
            )
            for event in stream:
                for text in _events_text(event):
                    display.line(text)
                if "aux" in event and isinstance(event["aux"], dict) and "ID" in event["aux"]:
                    image_id = event["aux"]["ID"]
                if "error" in event or "errorDetail" in event:
                    detail = event.get("errorDetail") or {}
                    error = str(event.get("error") or detail.get("message") or "build failed")
                    if log is not None:
                        log.write(f"ERROR: {error}\n")
                    break
            display.done()
    except docker.errors.APIError as exc:
        error = str(exc.explanation or exc)
    finally:
        if log is not None:
            log.close()
    if error is not None or image_id is None:
        where = f" (full log: {log_path})" if log_path is not None else ""
        at = f" at {display.step}" if display.step else ""
        reason = display.last_error or clean(error or "the engine returned no image id", 200)
        reason = " ".join(reason.split())[:300]
        raise UserError(f"image build {tag} failed{at}: {reason}{where}")
    return client.images.get(image_id), display.cached, display.total


def check_on_base(client: Any, image: Any, base_ref: str, base_identity: str) -> None:
    """The built image's first layers must be the base's: FROM resolved the base we hashed."""
    pinned = parse_image_ref(base_ref, where="base image").digest is not None
    # A digest reference is content-addressed; a local base is looked up by its image id.
    base = client.images.get(base_ref if pinned else base_identity)
    want = list(base.attrs["RootFS"]["Layers"])
    got = list(image.attrs["RootFS"]["Layers"])
    if got[: len(want)] != want:
        raise UserError(
            f"image {image.id}: not built on the base {base_ref} ({base_identity[:19]}); "
            "the base was replaced during the build"
        )


def push_image(client: Any, tag: str, console: Console) -> str:
    """Push `tag`; returns its `repository@sha256:...` digest."""
    import docker.errors

    repository, _, version = tag.rpartition(":")
    if _registry_of(repository) is None:
        raise UserError(
            f"--push: {repository!r} names no registry host (e.g. registry.example:5000/"
            "collectbot-vllm); refusing to push to Docker Hub implicitly"
        )
    digest = None
    try:
        for event in client.api.push(repository, tag=version, stream=True, decode=True):
            if "error" in event:
                raise UserError(
                    f"push {tag} failed: {clean(str(event['error']), 300).replace(chr(10), ' ')}"
                )
            aux = event.get("aux")
            if isinstance(aux, dict) and aux.get("Digest"):
                digest = str(aux["Digest"])
    except docker.errors.APIError as exc:
        raise UserError(f"push {tag} failed: {clean(str(exc.explanation or exc), 300)}") from None
    if digest is None:
        raise UserError(f"push {tag}: the registry returned no digest")
    console.print(f"pushed {tag} -> {repository}@{digest}", markup=False)
    return f"{repository}@{digest}"


def _repo_digest(image: Any, repository: str) -> str | None:
    for entry in image.attrs.get("RepoDigests") or []:
        if str(entry).startswith(f"{repository}@"):
            return str(entry)
    return None


def obtain(
    client: Any,
    pins: FrameworkPins,
    *,
    repository: str,
    base_override: str | None = None,
    wheels_dir: Path | None = None,
    force_build: bool = False,
    reuse: bool = True,
    push: bool = False,
    network_mode: str | None = None,
    log_path: Path | None = None,
    console: Console,
    collector_dir: Path | None = None,
    trusted: bool = False,
) -> ImageResult:
    """Reuse or build the image for `pins`; push on request. Does not verify.

    `trusted`: never reuse (tag, registry or layer cache); build from the base and check it.
    """
    parse_image_ref(repository, where="--repository")
    if ":" in repository.rpartition("/")[2] or "@" in repository:
        raise UserError(f"--repository {repository!r}: give a repository without tag or digest")
    base_ref, base_identity = resolve_base(client, pins, base_override)
    inputs = BuildInputs(
        pins=pins, base_ref=base_ref, base_identity=base_identity, wheels_dir=wheels_dir
    )
    if collector_dir is not None:
        inputs = replace(inputs, collector_dir=collector_dir)
    ctx = assemble(inputs)
    tag = image_tag(repository, pins, ctx.content_hash)
    result = ImageResult(
        ref=tag,
        id="",
        repo_digest=None,
        content_hash=ctx.content_hash,
        framework=pins.name,
        pins=pins.to_json(),
        base_image=base_ref,
        base_identity=base_identity,
    )
    image = None
    if reuse and not force_build and not trusted:
        image = find_local(client, tag)
        if image is None:
            image = try_pull(client, tag, console)
            result.pulled = image is not None
        if image is not None and image.labels.get(LABEL_HASH) != ctx.content_hash:
            console.print(f"{tag}: label does not match its content hash; rebuilding")
            image = None
            result.pulled = False
    if image is None:
        image, result.cached_steps, result.total_steps = build_image(
            client,
            ctx,
            tag,
            console=console,
            log_path=log_path,
            network_mode=network_mode,
            nocache=trusted,
        )
        result.built = True
        if trusted:
            check_on_base(client, image, base_ref, base_identity)
    result.id = str(image.id)
    if push:
        result.repo_digest = push_image(client, tag, console)
        result.pushed = True
    else:
        image.reload()
        result.repo_digest = _repo_digest(image, repository)
    return result


def write_result(result: ImageResult, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result.to_json(), indent=2, sort_keys=True) + "\n")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
