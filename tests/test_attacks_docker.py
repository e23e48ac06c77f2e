"""Attacks of issue 18 against a real Docker engine, each through the shipped CLI.

A hostile pull request job shares the engine (and the runner's host) with trusted jobs. Its
image is main's collector image plus one layer whose `.pth` file runs its code at every Python
start (tests/docker_support.py `add_startup_hook`): the code plants symbolic links and a FIFO
in the output folder, replaces files in the JIT cache, and exits.

- Image tags (2): re-tagged with main's tag (the content-hash label is inherited), it is what
  an untrusted `image ensure` reuses; `image ensure --trust trusted` builds its own image
  without the layer cache, and a trusted `collect` runs only an id or a digest.
- JIT caches (3): a cache file the PR's container replaces stays as the trusted job left it.
- Container output (4): no host file is written or read through what the container planted.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot.cli import app
from collector.record import read_record
from tests.docker_support import add_startup_hook
from tests.test_images_docker import (
    _torch_version,
    _write_manifest,
    base,
    client,
    image_ensure,
    throwaway_repository,
)

pytestmark = pytest.mark.slow
runner = CliRunner()
__all__ = ["base", "client"]  # fixtures

HOOK = """
import os, sys
out, cache = "/collectbot/out", "/collectbot/cache"
if os.access(out, os.W_OK):
    for name in ("memory.max", "memory/memory.limit_in_bytes"):
        try:
            sys.stdout.write("MEMLIMIT=" + open("/sys/fs/cgroup/" + name).read().strip() + "\\n")
            break
        except OSError:
            pass
    launcher = cache + "/triton/abc/cuda_utils.so"
    if os.path.exists(launcher):
        os.unlink(launcher)
        open(launcher, "wb").write(b"ATTACKER CODE")
        sys.stdout.write("REPLACED " + launcher + "\\n")
    os.makedirs(cache + "/triton/planted", exist_ok=True)
    open(cache + "/triton/planted/launcher.so", "wb").write(b"ATTACKER CODE")
    os.symlink(VICTIM, out + "/container.log")
    os.symlink(SECRET, out + "/run.json")
    os.symlink("/", out + "/checkpoint.jsonl")
    os.mkfifo(out + "/failures.json")
    os.mkdir(out + "/folder")
    sys.stdout.write("PLANTED\\n")
    sys.stdout.flush()
    os._exit(0)
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("attacks")


@pytest.fixture(scope="module")
def host_files(workdir: Path) -> tuple[Path, Path]:
    """A script the next step runs, and a credentials file: what the planted links aim at."""
    victim = workdir / "next-step.sh"
    victim.write_text("#!/bin/sh\necho trusted step\n")
    secret = workdir / "docker-config.json"
    secret.write_text(json.dumps({"auths": {"registry.example": {"auth": "c2VjcmV0LXRva2Vu"}}}))
    return victim, secret


@pytest.fixture(scope="module")
def repository(client: Any) -> Iterator[str]:
    yield from throwaway_repository(client, "collectbot-attack")


def _ensure(manifest: Path, base: str, repository: str, out: Path, *extra: str) -> Any:
    return image_ensure(
        manifest, base, repository, "--build-network", "none", "--out", str(out), "--quiet", *extra
    )


@pytest.fixture(scope="module")
def main_image(client: Any, base: str, repository: str, workdir: Path) -> dict[str, Any]:
    """Main's image, as an earlier (untrusted) ensure left it on the shared engine."""
    manifest = _write_manifest(workdir / "manifest.yaml", _torch_version())
    result = _ensure(manifest, base, repository, workdir / "main.json")
    assert result.exit_code == 0, result.output
    return {**json.loads((workdir / "main.json").read_text()), "manifest": manifest}


@pytest.fixture(scope="module")
def hostile(
    client: Any, main_image: dict[str, Any], repository: str, host_files: tuple[Path, Path]
) -> Any:
    victim, secret = host_files
    script = f"VICTIM, SECRET = {str(victim)!r}, {str(secret)!r}\n{HOOK}"
    return add_startup_hook(client, main_image["id"], script, f"{repository}:hostile")


def _collect(image: str, out: Path, *extra: str) -> Any:
    return runner.invoke(
        app,
        ["collect", "--image", image, "--out", str(out), "--limit", "2", "--runs", "1",
         "--samples", "2", "--quiet", *extra],
    )  # fmt: skip


def test_a_retagged_image_is_never_run_by_a_trusted_job(
    client: Any, base: str, repository: str, workdir: Path, main_image: dict[str, Any], hostile: Any
) -> None:
    # The attack: main's tag now names the hostile image, whose labels match main's.
    main_ref = main_image["ref"]
    hostile.tag(*main_ref.rsplit(":", 1))
    assert client.images.get(main_ref).id == hostile.id != main_image["id"]
    assert hostile.labels["org.collectbot.content-hash"] == main_image["content_hash"]
    attack_layer = hostile.attrs["RootFS"]["Layers"][-1]
    # An untrusted ensure takes the tag at its word (it runs the PR's own code anyway).
    result = _ensure(main_image["manifest"], base, repository, workdir / "untrusted.json")
    assert result.exit_code == 0, result.output
    untrusted = json.loads((workdir / "untrusted.json").read_text())
    assert untrusted["built"] is False and untrusted["id"] == hostile.id
    # A trusted ensure builds its own image, from the base, without the layer cache.
    out = workdir / "trusted.json"
    result = _ensure(main_image["manifest"], base, repository, out, "--trust", "trusted")
    assert result.exit_code == 0, result.output
    trusted = json.loads(out.read_text())
    assert trusted["built"] is True and trusted["verified_at"]
    assert trusted["id"] not in (hostile.id, main_image["id"])
    assert result.stdout.strip().splitlines()[-1] == trusted["id"]  # run by id, not by tag
    layers = client.images.get(trusted["id"]).attrs["RootFS"]["Layers"]
    assert attack_layer not in layers
    assert layers[: len(base_layers := client.images.get(base).attrs["RootFS"]["Layers"])] == (
        base_layers
    )
    # A trusted collection refuses a tag (it can be moved after ensure), and runs the id.
    result = _collect(main_ref, workdir / "by-tag", "--trust", "trusted")
    assert result.exit_code == 2, result.output
    assert "a trusted collection runs an image by id or digest" in result.output
    run = workdir / "trusted-run"
    result = _collect(trusted["id"], run, "--trust", "trusted", "--cache-dir", str(workdir / "c"))
    assert result.exit_code == 0, result.output
    record = read_record(run)
    assert record.status == "complete" and record.meta["container"]["image_id"] == trusted["id"]
    assert "PLANTED" not in (run / "container.log").read_text()


def test_a_pr_container_cannot_replace_a_file_in_the_trusted_jit_cache(
    client: Any, workdir: Path, main_image: dict[str, Any], hostile: Any
) -> None:
    cache = workdir / "jit"
    launcher = cache / "triton" / "abc" / "cuda_utils.so"
    launcher.parent.mkdir(parents=True)
    launcher.write_bytes(b"TRUSTED LAUNCHER")
    before = set(Path(tempfile.gettempdir()).glob("collectbot-jit-*"))
    out = workdir / "pr-run"
    result = _collect(hostile.id, out, "--cache-dir", str(cache))  # a PR job: untrusted
    assert result.exit_code == 2, result.output
    log = (out / "container.log").read_text()
    # The attack ran against the container's copy of the cache...
    assert "REPLACED /collectbot/cache/triton/abc/cuda_utils.so" in log
    # ...and the trusted cache is as the trusted job left it; the copy is gone.
    assert launcher.read_bytes() == b"TRUSTED LAUNCHER"
    assert not (cache / "triton" / "planted").exists()
    assert set(Path(tempfile.gettempdir()).glob("collectbot-jit-*")) == before
    record = read_record(out)
    assert record.meta["container"]["jit_cache"] == "private copy (untrusted, discarded)"
    # The next trusted collection mounts that cache read-write, still holding trusted bytes.
    run = workdir / "trusted-after-pr"
    result = _collect(main_image["id"], run, "--trust", "trusted", "--cache-dir", str(cache))
    assert result.exit_code == 0, result.output
    assert read_record(run).meta["container"]["jit_cache"] == "persistent (trusted, read-write)"
    assert launcher.read_bytes() == b"TRUSTED LAUNCHER"


def test_links_and_special_files_the_container_plants_are_never_followed(
    client: Any, workdir: Path, hostile: Any, host_files: tuple[Path, Path]
) -> None:
    victim, secret = host_files
    victim_before, secret_text = victim.read_bytes(), secret.read_text()
    out = workdir / "planted"
    result = _collect(hostile.id, out, "--memory", "2g")
    # The container exited 0 without a record: a failed record, one error line.
    assert result.exit_code == 2, result.output
    errors = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "ended badly" in errors[0], result.output
    assert victim.read_bytes() == victim_before  # container.log was not written through
    for path in out.iterdir():  # only regular files, none holding the credentials
        assert path.is_file() and not path.is_symlink(), path
        assert "c2VjcmV0LXRva2Vu" not in path.read_bytes().decode(errors="replace"), path
    assert not list(workdir.glob(".planted.container-*"))
    record = read_record(out)
    assert record.status == "failed" and record.meta["counts"]["ok"] == 0
    assert record.meta["container"]["dropped"] == [
        "checkpoint.jsonl (symbolic link)",
        "container.log (symbolic link)",
        "failures.json (FIFO)",
        "folder (folder)",
        "run.json (symbolic link)",
    ]
    assert "PLANTED" in (out / "container.log").read_text()
    assert secret.read_text() == secret_text


def test_the_default_memory_limit_holds_in_the_container(workdir: Path, hostile: Any) -> None:
    """Issue 18, attack 8: a container started without --memory is still limited."""
    from bot.images.engine import connect
    from bot.images.sandbox import DEFAULT_MEMORY, size_bytes

    if not connect().info().get("MemoryLimit"):
        pytest.skip("this engine cannot enforce memory limits (no memory cgroup)")
    out = workdir / "default-limit"
    _collect(hostile.id, out)
    log = (out / "container.log").read_text()
    assert f"MEMLIMIT={size_bytes(DEFAULT_MEMORY)}" in log, log
    assert os.path.getsize(out / "container.log") < 10_000
