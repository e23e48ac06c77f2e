"""The image stage against a real Docker engine.

A local base image stands in for the vLLM release image (tests/docker_support.py: this
machine's Python with CPU torch, and metadata-only vllm and flashinfer distributions). On it
the tests build the collector image, reuse it, rebuild it on a change, verify versions, and
collect inside it with no network. Without an engine these tests skip, unless
COLLECTBOT_REQUIRE_DOCKER=1 (set by .ci/run), which makes a missing engine a failure.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner, Result

from bot.cli import app
from bot.images.build import obtain
from bot.images.container import ContainerOptions, ContainerOutcome, collect_in_container
from bot.images.context import COLLECTOR_DIR
from bot.images.sandbox import BindMount, Limits, Sandbox
from collector.engine import CollectConfig
from collector.pins import load_manifest
from collector.record import CHECKPOINT, read_record
from collector.timing import Protocol
from tests.docker_support import engine_or_skip, ensure_base_image

pytestmark = pytest.mark.slow
runner = CliRunner()
VLLM_REF = (
    "docker.io/vllm/vllm-openai:v0.24.0@sha256:"
    "251eba5cc7c12fed0b75da22a9240e582b1c9e39f6fbc064f86781b963bd814f"
)


@pytest.fixture(scope="module")
def client() -> Any:
    return engine_or_skip()


@pytest.fixture(scope="module")
def base(client: Any) -> str:
    return ensure_base_image(client)


def _torch_version() -> str:
    import torch

    return str(torch.__version__).split("+")[0]


def _write_manifest(path: Path, torch: str) -> Path:
    path.write_text(
        "schema_version: 1\nframeworks:\n  vllm:\n"
        f'    version: "0.24.0"\n    torch: "{torch}"\n    flashinfer: "0.6.12"\n'
        f'    cuda: "cpu"\n    base_image: "{VLLM_REF}"\n'
    )
    return path


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("images")


@pytest.fixture(scope="module")
def manifest(workdir: Path) -> Path:
    return _write_manifest(workdir / "manifest.yaml", _torch_version())


def throwaway_repository(client: Any, prefix: str) -> Iterator[str]:
    """A fresh repository name (PREFIX-hex); its images are removed afterwards."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    yield name
    for image in client.images.list(name=name):
        for tag in image.tags:
            client.images.remove(tag, force=True)


def image_ensure(manifest: Path, base: str, repository: str, *options: str) -> Result:
    """`collectbot image ensure` of MANIFEST on BASE into REPOSITORY, plus OPTIONS."""
    return runner.invoke(
        app,
        ["image", "ensure", "--manifest", str(manifest), "--base-image", base,
         "--repository", repository, *options],
    )  # fmt: skip


@pytest.fixture(scope="module")
def repository(client: Any) -> Iterator[str]:
    """A fresh repository per session, so the first ensure really builds."""
    yield from throwaway_repository(client, "collectbot-test")


@pytest.fixture(scope="module")
def first(client: Any, base: str, manifest: Path, repository: str, workdir: Path) -> dict[str, Any]:
    """`image ensure` from nothing: builds, verifies, writes the image record."""
    out = workdir / "image-1.json"
    result = image_ensure(
        manifest, base, repository, "--build-network", "none", "--out", str(out),
        "--log", str(workdir / "build-1.log"),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(out.read_text())
    assert result.stdout.strip().splitlines()[-1] == data["ref"]
    return data


def _layers(client: Any, ref: str) -> list[str]:
    return list(client.images.get(ref).attrs["RootFS"]["Layers"])


def test_ensure_builds_verifies_and_then_reuses(
    client: Any, base: str, manifest: Path, repository: str, workdir: Path, first: dict[str, Any]
) -> None:
    assert first["built"] is True and first["verified_at"]
    assert first["ref"].startswith(f"{repository}:0.24.0-")
    assert first["installed"]["distributions"] == {
        "vllm": "0.24.0",
        "flashinfer-python": "0.6.12",
        "torch": __import__("torch").__version__,
    }
    image = client.images.get(first["ref"])
    assert image.id == first["id"] == first["digest"]
    assert image.labels["org.collectbot.content-hash"] == first["content_hash"]
    assert image.labels["org.collectbot.framework-version"] == "0.24.0"
    assert "Step 6/" in (workdir / "build-1.log").read_text()
    # Unchanged inputs: the same tag, reused without building.
    out = workdir / "image-2.json"
    result = image_ensure(manifest, base, repository, "--out", str(out))
    assert result.exit_code == 0, result.output
    second = json.loads(out.read_text())
    assert second["built"] is False and second["id"] == first["id"]
    assert second["ref"] == first["ref"] and second["content_hash"] == first["content_hash"]
    assert "reused:" in result.output
    result = runner.invoke(app, ["image", "verify", first["ref"], "--manifest", str(manifest)])
    assert result.exit_code == 0, result.output
    assert "vllm 0.24.0" in result.stdout and "torch CUDA none (CPU build)" in result.stdout


def test_changed_collector_rebuilds_only_its_own_layer(
    client: Any, base: str, manifest: Path, repository: str, workdir: Path, first: dict[str, Any]
) -> None:
    changed = workdir / "collector"
    shutil.copytree(COLLECTOR_DIR, changed, ignore=shutil.ignore_patterns("__pycache__"))
    with (changed / "record.py").open("a") as fh:
        fh.write("\n# a collector change\n")
    result = obtain(
        client,
        load_manifest(manifest).get("vllm"),
        repository=repository,
        base_override=base,
        network_mode="none",
        console=Console(quiet=True),
        collector_dir=changed,
    )
    assert result.built and result.ref != first["ref"]
    before, after = _layers(client, first["ref"]), _layers(client, result.ref)
    # base, COPY requirements, COPY wheels, RUN deps | COPY collector, RUN its bytecode,
    # COPY pins: the dependency layers are the same layers; only the collector's are new.
    assert len(before) == len(after) == 7
    assert before[:4] == after[:4]
    assert before[4] != after[4]
    assert result.cached_steps >= 4


def test_the_image_carries_bytecode_so_that_workers_do_not_compile_their_imports(
    client: Any, first: dict[str, Any]
) -> None:
    # Workers run with PYTHONDONTWRITEBYTECODE: what the image lacks, every worker compiles.
    probe = (
        "import importlib.util as u, os, collector.record, yaml; "
        "print(all(os.path.exists(u.cache_from_source(m.__file__)) "
        "for m in (collector.record, yaml)))"
    )
    out: bytes = client.containers.run(
        first["ref"], ["python3", "-c", probe], network_mode="none", remove=True
    )
    assert out.decode().strip() == "True"


def test_manifest_change_rebuilds_and_a_mismatch_fails_verify_naming_both_versions(
    client: Any, base: str, repository: str, workdir: Path, first: dict[str, Any]
) -> None:
    wrong = _write_manifest(workdir / "manifest-wrong.yaml", "2.11.0")
    result = image_ensure(wrong, base, repository, "--build-network", "none")
    assert result.exit_code == 2, result.output
    error = result.output.strip().splitlines()[-1]
    have = __import__("torch").__version__
    assert error.startswith("error: image sha256:")
    assert f"torch: installed {have}, {wrong} pins 2.11.0" in error
    # The changed manifest built a new image (new tag), reusing the cached dependency layers.
    tags = [t for image in client.images.list(name=repository) for t in image.tags]
    new = [t for t in tags if t not in (first["ref"],)]
    built = [t for t in new if client.images.get(t).labels.get("org.collectbot.framework")]
    wrong_image = next(t for t in built if json.loads(_pins_in(client, t))["torch"] == "2.11.0")
    assert _layers(client, wrong_image)[:4] == _layers(client, first["ref"])[:4]
    # The collector's own gate refuses to measure in that image; the host keeps a failed record.
    out = workdir / "gated-run"
    result = runner.invoke(
        app,
        ["collect", "--image", wrong_image, "--out", str(out), "--limit", "2", "--quiet"],
    )
    assert result.exit_code == 2, result.output
    assert "the version gate failed" in result.output
    assert f"torch: installed {have}" in result.output
    record = read_record(out)
    assert record.status == "failed" and record.meta["container"]["exit_code"] == 3


def _pins_in(client: Any, ref: str) -> str:
    out: bytes = client.containers.run(
        ref, ["cat", "/opt/collectbot/pins.json"], network_mode="none", remove=True
    )
    return out.decode()


def test_collect_in_container_writes_a_valid_record_on_the_host(
    monkeypatch: pytest.MonkeyPatch, workdir: Path, first: dict[str, Any]
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_must-not-leak")
    out, cache = workdir / "run", workdir / "cache"
    result = runner.invoke(
        app,
        [
            "collect",
            "--image",
            first["ref"],
            "--out",
            str(out),
            "--limit",
            "3",
            "--runs",
            "2",
            "--samples",
            "3",
            "--cache-dir",
            str(cache),
            "--memory",
            "4g",
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1] == str(out)
    record = read_record(out)
    assert record.status == "complete" and not record.anomalies
    assert record.meta["counts"]["ok"] == 3 and record.perf["gemm"].num_rows == 3
    assert record.meta["image"] == {"ref": first["ref"], "digest": first["id"]}
    assert record.meta["versions"]["vllm"] == "0.24.0"
    container = record.meta["container"]
    assert container["exit_code"] == 0 and container["network"] == "none"
    assert container["read_only_root"] is True and container["limits"]["memory"] == "4g"
    assert container["image_content_hash"] == first["content_hash"]
    assert "--image" in record.meta["command"]
    assert "container.log" in record.meta["files"]
    # An untrusted run (the default) compiled into a private copy: the cache is not written.
    assert not cache.exists() and container["jit_cache"] == "private copy (untrusted, discarded)"
    assert "ghs_must-not-leak" not in (out / "container.log").read_text()


def test_the_sandbox_holds_in_a_real_container(
    client: Any, monkeypatch: pytest.MonkeyPatch, workdir: Path, first: dict[str, Any]
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_must-not-leak")
    out = workdir / "sandbox-out"
    out.mkdir()
    out.chmod(0o777)  # the container runs as an unprivileged user here
    script = (
        "env; ls /sys/class/net; "
        "(touch /probe 2>/dev/null && echo ROOT-WRITABLE) || echo ROOT-READONLY; "
        "touch /collectbot/out/written && echo OUT-WRITABLE; id -u"
    )
    sandbox = Sandbox(
        image=first["id"],
        command=["sh", "-c", script],
        mounts=[BindMount(out, "/collectbot/out", read_only=False)],
        limits=Limits(memory="256m", shm_size="16m", tmp_size="16m"),
        user="4321:4321",
    )
    container = client.containers.run(**sandbox.kwargs())
    try:
        assert container.wait(timeout=120)["StatusCode"] == 0
        text = container.logs().decode()
        attrs = container.attrs["HostConfig"]
    finally:
        container.remove(force=True)
    assert "ghs_must-not-leak" not in text and "GITHUB_TOKEN" not in text
    assert "ROOT-READONLY" in text and "OUT-WRITABLE" in text
    assert text.strip().splitlines()[-1] == "4321"
    interfaces = [ln for ln in text.splitlines() if ln in ("lo", "eth0")]
    assert interfaces == ["lo"]
    assert (out / "written").exists()
    assert attrs["NetworkMode"] == "none" and attrs["ReadonlyRootfs"] is True
    assert attrs["Memory"] == 256 << 20 and attrs["CapDrop"] == ["ALL"]


def test_a_container_killed_mid_run_leaves_a_partial_valid_record(
    client: Any, workdir: Path, first: dict[str, Any]
) -> None:
    out = workdir / "killed-run"
    cfg = CollectConfig(
        out=out,
        limit=12,
        protocol=Protocol(runs=2, samples=6, warmup=1, target_sample_ms=10.0, idle_ratio=1.0),
        quiet=True,
    )
    opts = ContainerOptions(image=first["ref"], cache_dir=workdir / "cache")
    outcome: list[ContainerOutcome] = []
    thread = threading.Thread(
        target=lambda: outcome.append(collect_in_container(client, cfg, opts, Console(quiet=True)))
    )
    thread.start()
    deadline = time.monotonic() + 120
    checkpoint = out / CHECKPOINT
    while time.monotonic() < deadline:
        # Four case runs checkpointed (the calibration panel's runs come first and do not count).
        if checkpoint.exists() and checkpoint.read_text().count('"kind":"run"') >= 4:
            break
        time.sleep(0.2)
    [container] = client.containers.list(filters={"label": f"org.collectbot.out={out}"})
    container.kill()  # SIGKILL: no chance to finalise
    thread.join(timeout=120)
    [result] = outcome
    assert result.exit_code == 137 and result.status == "partial" and not result.ok
    record = read_record(out)
    assert record.status == "partial" and not record.anomalies
    counts = record.meta["counts"]
    assert 4 <= counts["attempted"] < counts["planned"] == 12
    assert record.perf["gemm"].num_rows == counts["attempted"]
    assert record.meta["container"]["exit_code"] == 137
    assert record.meta["ended"]["exit_code"] == 137
    # --resume through the container completes the same record.
    resumed = collect_in_container(
        client,
        CollectConfig(
            out=out,
            limit=12,
            protocol=cfg.protocol,
            quiet=True,
            resume=True,
        ),
        opts,
        Console(quiet=True),
    )
    assert resumed.ok, resumed
    final = read_record(out)
    assert final.status == "complete" and final.meta["counts"]["ok"] == 12
    assert final.meta["run_id"] == record.meta["run_id"]


def test_no_secret_reaches_the_collector_container_or_its_workers(
    client: Any, monkeypatch: pytest.MonkeyPatch, workdir: Path, first: dict[str, Any]
) -> None:
    """Secrets in the host's environment; inside the running container, every process's
    /proc/<pid>/environ (the collector, its worker, and what `docker exec` inherits from the
    container's configuration) holds none of them."""
    from collector.canary import Canary
    from collector.caseplan import CaseSelector
    from tests.test_secrets_env import SECRETS, SETTINGS

    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    for name, value in SETTINGS.items():
        monkeypatch.setenv(name, value)
    out = workdir / "secrets-run"
    cfg = CollectConfig(
        out=out,
        case_set="smoke",
        limit=2,
        protocol=Protocol(runs=1, samples=2, warmup=0, target_sample_ms=0.5, idle_ratio=0.0),
        canary=Canary(hang=CaseSelector.parse("m=8")),  # keeps a worker alive in a case
        case_timeout_s=120,
        quiet=True,
    )
    opts = ContainerOptions(
        image=first["ref"], cache_dir=workdir / "cache", env_names=["TORCH_SHOW_CPP_STACKTRACES"]
    )
    outcome: list[ContainerOutcome] = []
    thread = threading.Thread(
        target=lambda: outcome.append(collect_in_container(client, cfg, opts, Console(quiet=True)))
    )
    thread.start()
    probe = (
        "import json, pathlib\n"
        "out = {}\n"
        "for p in pathlib.Path('/proc').glob('[0-9]*'):\n"
        "    try:\n"
        "        out[p.name] = [(p / 'cmdline').read_bytes().decode(errors='replace'),\n"
        "                       (p / 'environ').read_bytes().decode(errors='replace')]\n"
        "    except OSError:\n"
        "        pass\n"
        "print(json.dumps(out))\n"
    )
    try:
        procs: dict[str, list[str]] = {}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            running = client.containers.list(filters={"label": f"org.collectbot.out={out}"})
            if running:
                code, output = running[0].exec_run(["python3", "-c", probe])
                assert code == 0, output
                procs = json.loads(output)
                if any("multiprocessing" in cmd for cmd, _ in procs.values()):
                    break
            time.sleep(0.5)
        workers = [env for cmd, env in procs.values() if "multiprocessing" in cmd]
        collectors = [env for cmd, env in procs.values() if "collector\0run" in cmd]
        assert workers and collectors, procs
        for env in procs.values():
            blob = env[1]
            names = {e.split("=", 1)[0] for e in blob.split("\0") if "=" in e}
            assert not names & set(SECRETS), names & set(SECRETS)
            for value in SECRETS.values():
                assert value not in blob
        # What was asked for through the allow-list did arrive (the check is not vacuous).
        assert "TORCH_SHOW_CPP_STACKTRACES=1" in collectors[0].split("\0")
    finally:
        for c in client.containers.list(filters={"label": f"org.collectbot.out={out}"}):
            c.stop(timeout=30)
        thread.join(timeout=120)
    assert outcome and outcome[0].run_json.is_file()


def test_an_image_build_failure_is_one_line_and_leaves_no_image(
    client: Any, manifest: Path, repository: str, workdir: Path
) -> None:
    """The base image has no shell: the dependency step cannot run. The build fails in one
    line naming the step and the full log, and no image carries the tag (a later `ensure`
    builds again instead of reusing a broken image)."""
    import io
    import tarfile

    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        info = tarfile.TarInfo("README")
        payload = b"a root filesystem without a shell\n"
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    broken = f"{repository}-noshell:1"
    client.api.import_image_from_data(data.getvalue(), repository=broken.split(":")[0], tag="1")
    log = workdir / "broken-build.log"
    try:
        for attempt in range(2):
            result = image_ensure(
                manifest, broken, repository, "--build-network", "none", "--log", str(log)
            )
            assert result.exit_code == 2, result.output
            lines = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
            assert len(lines) == 1 and "Traceback" not in result.output, result.output
            assert lines[0].startswith(f"error: image build {repository}:0.24.0-")
            assert "failed at step" in lines[0] and str(log) in lines[0]
            assert "no such file" in lines[0]  # the reason, from the engine
            assert "ERROR:" in log.read_text()
            tag = lines[0].split()[3]
            assert not client.images.list(name=tag), f"attempt {attempt}: {tag} exists"
    finally:
        client.images.remove(broken, force=True)


def test_a_container_killed_for_memory_leaves_a_failed_record_saying_so(
    client: Any, workdir: Path, first: dict[str, Any]
) -> None:
    """A memory limit the collector cannot start under: the kernel's OOM killer ends its
    workers (SIGKILL, no exception). The host says so in one line and keeps a valid record
    marked failed, so the comparison reports a red run instead of finding nothing."""
    if not client.info().get("MemoryLimit"):
        pytest.skip("this engine cannot enforce memory limits (no memory cgroup)")
    out = workdir / "oom-run"
    result = runner.invoke(
        app,
        ["collect", "--image", first["ref"], "--out", str(out), "--limit", "2", "--memory",
         "96m", "--quiet"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, result.output
    assert "it ran out of memory (OOM killed)" in lines[0]
    record = read_record(out)
    assert record.status == "failed" and record.meta["counts"]["ok"] == 0
    assert record.meta["container"]["oom_killed"] is True
    assert record.meta["container"]["exit_code"] == 137
