"""The image stage's pure parts: content hash, config hand-over, sandbox, recovery, entry."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from bot.images.context import COLLECTOR_DIR, BuildInputs, assemble, image_tag
from bot.images.recover import CONTAINER_LOG, attach_container, record_after_exit
from bot.images.sandbox import BASE_ENV, BindMount, Limits, Sandbox, gpu_request, passthrough_env
from collector.canary import Canary
from collector.caseplan import CaseSelector
from collector.config_io import config_from_json, config_to_json
from collector.engine import CollectConfig, Collection
from collector.errors import UserError
from collector.pins import FrameworkPins
from collector.record import CHECKPOINT, read_record
from collector.timing import Protocol
from tests.factories import framework_pins

ROOT = Path(__file__).resolve().parents[1]
DIGEST = "sha256:" + "cd" * 32


def _pins(**over: str) -> FrameworkPins:
    """The pins of a CPU image on this file's base image."""
    base_image = f"docker.io/vllm/vllm-openai@{DIGEST}"
    return framework_pins(**{"torch": "2.13.0", "cuda": "cpu", "base_image": base_image, **over})


def _inputs(collector_dir: Path = COLLECTOR_DIR, **over: str) -> BuildInputs:
    return BuildInputs(
        pins=_pins(**over),
        base_ref="local-base:1",
        base_identity="sha256:" + "01" * 32,
        collector_dir=collector_dir,
    )


def test_content_hash_covers_exactly_what_goes_in(tmp_path: Path) -> None:
    base = assemble(_inputs())
    assert assemble(_inputs()).content_hash == base.content_hash
    assert assemble(_inputs()).tar_bytes() == base.tar_bytes()  # deterministic tar
    copy = tmp_path / "collector"
    shutil.copytree(COLLECTOR_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    # Bytecode and unrelated files do not enter; a source change does.
    (copy / "notes.txt").write_text("not shipped")
    (copy / "__pycache__").mkdir(exist_ok=True)
    (copy / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert assemble(_inputs(copy)).content_hash == base.content_hash
    with (copy / "engine.py").open("a") as fh:
        fh.write("\n# changed\n")
    changed = assemble(_inputs(copy))
    assert changed.content_hash != base.content_hash
    assert assemble(_inputs(flashinfer="0.6.13")).content_hash != base.content_hash
    other_base = replace(_inputs(), base_identity="sha256:" + "02" * 32)
    assert assemble(other_base).content_hash != base.content_hash
    names = set(base.files)
    assert {"Dockerfile", "requirements.txt", "pins.json", "collector/engine.py"} <= names
    assert "collector/cases/gemm.yaml" in names
    assert not [n for n in names if n.startswith(("bot/", "tests/")) or n.endswith(".pyc")]
    with tarfile.open(fileobj=io.BytesIO(base.tar_bytes())) as tar:
        assert {m.mtime for m in tar.getmembers()} == {0}
    pins = json.loads(base.files["pins.json"])
    assert pins["version"] == "0.24.0" and pins["name"] == "vllm"
    assert base.build_args["CONTENT_HASH"] == base.content_hash
    assert image_tag("reg:5000/c", _pins(), base.content_hash) == (
        f"reg:5000/c:0.24.0-{base.content_hash[:16]}"
    )


def test_wheel_bundle_enters_the_context(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with pytest.raises(UserError, match=r"holds no \.whl files"):
        assemble(replace(_inputs(), wheels_dir=wheels))
    (wheels / "pyarrow-26.0.1-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"wheel")
    ctx = assemble(replace(_inputs(), wheels_dir=wheels))
    assert ctx.wheels == ["pyarrow-26.0.1-cp312-cp312-manylinux_2_28_x86_64.whl"]
    assert ctx.content_hash != assemble(_inputs()).content_hash


def test_dockerfile_puts_dependencies_before_sources() -> None:
    """A changed collector must rebuild only its own layers: deps first, sources after."""
    text = (ROOT / "images" / "collector.Dockerfile").read_text()
    order = [text.index(s) for s in ("COPY requirements.txt", "RUN set -eu", "COPY collector/")]
    assert order == sorted(order)
    # Build args that change with every collector change come after the cached layers.
    assert text.index("ARG CONTENT_HASH") > text.index("COPY collector/")


def test_config_round_trips(tmp_path: Path) -> None:
    cfg = CollectConfig(
        out=tmp_path / "run",
        ops=("gemm",),
        case_file=tmp_path / "cases.yaml",
        case_filter=CaseSelector.parse("m=128|256;op=gemm,k=512"),
        limit=5,
        shard=(1, 3),
        rules_file=tmp_path / "rules.yaml",
        workers=2,
        backend_options={"x": 1},
        protocol=Protocol(runs=3, samples=4, use_graphs=False),
        canary=Canary(slow=CaseSelector.parse("m=1"), factor=1.5, hang=CaseSelector.parse("m=2")),
        command=["collectbot", "collect"],
        image_ref="img:1",
        image_digest=DIGEST,
    )
    data = json.loads(json.dumps(config_to_json(cfg)))
    back = config_from_json(data)
    assert back == cfg
    with pytest.raises(UserError, match="unknown field 'gpus'"):
        config_from_json({**data, "gpus": 2})
    with pytest.raises(UserError, match="not a collectbot collection config"):
        config_from_json({"out": "x"})
    bad_order = {**data, "protocol": {**data["protocol"], "placement_order": "sideways"}}
    with pytest.raises(UserError, match="field 'protocol': placement_order 'sideways'"):
        config_from_json(bad_order)
    bad_workers = {**data, "protocol": {**data["protocol"], "fresh_workers": "sometimes"}}
    with pytest.raises(UserError, match="field 'protocol': fresh_workers 'sometimes'"):
        config_from_json(bad_workers)
    with pytest.raises(TypeError, match=r"CollectConfig\.out: cannot encode object"):
        config_to_json(replace(cfg, out=object()))  # type: ignore[arg-type]


def test_sandbox_is_locked_down(tmp_path: Path) -> None:
    sandbox = Sandbox(
        image="sha256:" + "ef" * 32,
        command=["python3", "-m", "collector", "versions"],
        env={"TORCH_LOGS": "dynamo"},
        mounts=[BindMount(tmp_path, "/collectbot/out", read_only=False)],
        limits=Limits(memory="8g", cpus=2.5),
        user="1000:1000",
    )
    kw = sandbox.kwargs()
    assert kw["network_mode"] == "none"
    assert kw["read_only"] is True
    assert kw["cap_drop"] == ["ALL"] and kw["security_opt"] == ["no-new-privileges"]
    assert kw["mem_limit"] == "8g" and kw["nano_cpus"] == 2_500_000_000
    assert kw["pids_limit"] == 4096 and kw["user"] == "1000:1000"
    assert "device_requests" not in kw
    env = kw["environment"]
    assert env["TORCH_LOGS"] == "dynamo" and env["HF_HUB_OFFLINE"] == "1"
    # Exactly the fixed settings and what was asked for: nothing from the host.
    assert set(env) == set(BASE_ENV) | {"TORCH_LOGS"}
    [mount] = kw["mounts"]
    assert mount["Target"] == "/collectbot/out" and mount["ReadOnly"] is False
    gpu = replace(sandbox, gpus=["3"]).kwargs()
    [request] = gpu["device_requests"]
    assert request["DeviceIDs"] == ["3"] and request["Capabilities"] == [["gpu"]]
    # Locked (pinned) memory is bounded by the memory limit, never unlimited.
    [memlock] = gpu["ulimits"]
    assert memlock["Name"] == "memlock" and memlock["Soft"] == memlock["Hard"] == 8 << 30
    with pytest.raises(UserError, match="refusing to pass 'GITHUB_TOKEN'"):
        replace(sandbox, env={"GITHUB_TOKEN": "x"}).kwargs()
    with pytest.raises(UserError, match="--memory: 'lots'"):
        replace(sandbox, limits=Limits(memory="lots")).kwargs()


def test_passthrough_env_is_an_allow_list() -> None:
    host = {"TORCH_LOGS": "x", "GITHUB_SHA": "abc", "HOME": "/root"}
    assert passthrough_env(["TORCH_LOGS", "GITHUB_SHA", "VLLM_LOGGING_LEVEL"], host) == {
        "TORCH_LOGS": "x",
        "GITHUB_SHA": "abc",
    }
    with pytest.raises(UserError, match="--env GITHUB_TOKEN: looks like a secret"):
        passthrough_env(["GITHUB_TOKEN"], host)
    with pytest.raises(UserError, match="--env VLLM_API_KEY: looks like a secret"):
        passthrough_env(["VLLM_API_KEY"], host)
    with pytest.raises(UserError, match="--env HOME: not on the allow-list"):
        passthrough_env(["HOME"], host)


def test_gpu_request_maps_host_index_to_cuda0() -> None:
    assert gpu_request("cpu") == (None, "cpu")
    assert gpu_request("cuda") == (["0"], "cuda:0")
    assert gpu_request("cuda:5") == (["5"], "cuda:0")
    with pytest.raises(UserError, match="unknown device 'cuda:x'"):
        gpu_request("cuda:x")


def _cfg(out: Path) -> CollectConfig:
    return CollectConfig(
        out=out,
        limit=4,
        workers=0,
        protocol=Protocol(runs=2, samples=2, warmup=1, target_sample_ms=0.05, idle_ratio=0.0),
        quiet=True,
    )


def _block(exit_code: int) -> dict[str, object]:
    return {"exit_code": exit_code, "image_ref": "img:1", "image_digest": DIGEST}


def test_dead_container_record_is_refinalised_from_its_checkpoint(tmp_path: Path) -> None:
    """A collection killed mid-run (no finalise) becomes a valid partial record."""
    cfg = _cfg(tmp_path / "run")
    collection = Collection(cfg)
    done = []
    from collector.measure import measure_case

    for case in collection.plan.cases[:3]:
        collection.record(measure_case(collection.ctx, case, 0))
        done.append(case.key)
    collection.checkpoint.close()  # the process dies here: no finish()
    stale = json.loads((cfg.out / "run.json").read_text())
    assert stale["counts"]["attempted"] == 0  # the last partial record predates the work
    _, status = record_after_exit(cfg, _block(137), b"", {})
    assert status == "partial"
    attach_container(cfg.out, {**_block(137), "oom_killed": False}, b"killed\n")
    record = read_record(cfg.out)
    assert record.status == "partial" and not record.anomalies
    assert record.meta["counts"]["attempted"] == 3
    assert sorted(record.perf["gemm"].column("case_key").to_pylist()) == sorted(done)
    assert record.meta["ended"]["exit_code"] == 137
    assert record.meta["container"]["exit_code"] == 137
    assert CONTAINER_LOG in record.meta["files"]
    assert (cfg.out / CHECKPOINT).exists()  # --resume continues from it
    resumed = Collection(replace(cfg, resume=True))
    for run in range(2):
        resumed.run_round(run)
    resumed.finish("complete")
    final = read_record(cfg.out)
    assert final.status == "complete" and final.meta["counts"]["ok"] == 4


def test_container_that_never_collected_leaves_a_failed_record(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path / "run")
    cfg.out.mkdir()
    log = b"error: version gate for vllm: vllm: installed 0.23.1, pins 0.24.0\n"
    _, status = record_after_exit(cfg, _block(3), log, {"org.collectbot.framework": "vllm"})
    assert status == "failed"
    record = read_record(cfg.out)
    assert record.status == "failed" and record.meta["framework"] == "vllm"
    assert record.meta["counts"] == {
        "planned": 4,
        "attempted": 0,
        "ok": 0,
        "failed": 0,
        "per_op": {"gemm": {"planned": 4, "attempted": 0, "ok": 0, "failed": 0}},
    }
    assert "installed 0.23.1" in record.meta["ended"]["reason"]


def test_collector_entry_point_runs_a_config_and_gates_versions(tmp_path: Path) -> None:
    """`python -m collector run` is the container's entry: the gate runs before measuring."""
    from collector.config_io import write_config

    cfg = _cfg(tmp_path / "run")
    write_config(cfg, tmp_path / "config.json")
    pins = tmp_path / "pins.json"
    import torch

    pins.write_text(
        json.dumps({**_pins(torch=torch.__version__.split("+")[0]).to_json(), "version": "9.9.9"})
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "collector", "run", str(tmp_path / "config.json")]
    gated = subprocess.run([*cmd, "--pins", str(pins)], capture_output=True, text=True, env=env)
    assert gated.returncode == 3, gated.stderr
    assert gated.stderr.strip().splitlines()[-1].startswith("error: version gate for vllm: vllm:")
    assert "pins 9.9.9" in gated.stderr
    assert not cfg.out.exists()
    ok = subprocess.run(
        [*cmd, "--pins", str(tmp_path / "none.json")], capture_output=True, text=True, env=env
    )
    assert ok.returncode == 0, ok.stderr
    assert read_record(cfg.out).status == "complete"
    versions = subprocess.run(
        [sys.executable, "-m", "collector", "versions", "torch", "no-such-dist"],
        capture_output=True,
        text=True,
        env=env,
    )
    data = json.loads(versions.stdout)
    assert data["distributions"] == {"no-such-dist": None, "torch": torch.__version__}
    bad = subprocess.run(
        [sys.executable, "-m", "collector", "run", str(tmp_path / "missing.json")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("error: ")


def test_every_container_gets_a_memory_limit_and_a_bounded_memlock(tmp_path: Path) -> None:
    """Issue 18, attack 8: no memory limit and an unlimited memlock by default."""
    from bot.images.container import container_options
    from bot.images.sandbox import DEFAULT_MEMORY, size_bytes

    opts = container_options("img", tmp_path, Limits(), None, None)
    kw = Sandbox(image="img", command=["true"], limits=opts.limits, gpus=["0"]).kwargs()
    assert kw["mem_limit"] == kw["memswap_limit"] == DEFAULT_MEMORY
    [memlock] = kw["ulimits"]
    assert 0 < memlock["Soft"] == memlock["Hard"] == size_bytes(DEFAULT_MEMORY)
    assert size_bytes("96m") == 96 << 20 and size_bytes("1024") == 1024
