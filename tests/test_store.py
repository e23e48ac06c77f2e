"""The run store on a local directory and on S3 (a moto server on the loopback)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.keys import StoreKey, slug
from bot.store import MANIFEST, RunStore, key_of
from collector.errors import UserError
from collector.record import read_record
from tests.factories import gemm_case, simulated_runs, write_record
from tests.schema_check import assert_valid_comparison

runner = CliRunner()
CASES = [gemm_case(m) for m in (1, 2, 4)]


def _record(
    path: Path, rng: np.random.Generator, factor: float = 1.0, status: str = "complete", **meta: Any
) -> Path:
    return write_record(
        path,
        CASES,
        lambda c: simulated_runs(rng, factor * c.params["m"]),
        meta_extra=meta,
        status=status,
    )


def test_key_and_slug() -> None:
    meta = {
        "backend": "vllm",
        "framework_version": "0.24.0",
        "device": {"name": "NVIDIA H200"},
        "ops": ["gemm", "context_attention"],
    }
    key = key_of(meta)
    assert key.path == "vllm/0.24.0/nvidia-h200/context_attention+gemm"
    assert slug("../../etc") == "etc"
    assert slug("") == "unknown"


def test_put_list_latest_get_round_trip(tmp_path: Path, rng: np.random.Generator) -> None:
    store = RunStore(str(tmp_path / "store"))
    first = _record(tmp_path / "r1", rng, run_id="r1")
    second = _record(tmp_path / "r2", rng, run_id="r2")
    e1 = store.put(first, ref="main")
    e2 = store.put(second, ref="main")
    assert [e.run_id for e in store.entries()] == ["r1", "r2"]
    key = key_of(read_record(first).meta)
    assert store.latest(key).run_id == "r2"  # type: ignore[union-attr]
    assert store.latest(key, exclude_run_id="r2").run_id == "r1"  # type: ignore[union-attr]
    assert store.latest(key, ref="feature") is None
    got = read_record(store.get(e1, tmp_path / "got"))
    assert got.meta["run_id"] == "r1"
    assert got.perf["gemm"].equals(read_record(first).perf["gemm"])
    # Putting the same run again is a no-op, not a second entry.
    assert store.put(second, ref="main").name == e2.name
    assert len(store.entries()) == 2


def test_checksums_are_verified_on_read(tmp_path: Path, rng: np.random.Generator) -> None:
    store = RunStore(str(tmp_path / "store"))
    entry = store.put(_record(tmp_path / "r1", rng, run_id="r1"))
    stored = tmp_path / "store" / entry.key.path / entry.name / "gemm_perf.parquet"
    stored.write_bytes(stored.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(UserError, match=r"gemm_perf.parquet: checksum mismatch"):
        store.get(entry, tmp_path / "got")


def test_an_entry_without_manifest_is_invisible(tmp_path: Path, rng: np.random.Generator) -> None:
    """An interrupted upload (files, no manifest) is never a baseline."""
    store = RunStore(str(tmp_path / "store"))
    entry = store.put(_record(tmp_path / "r1", rng, run_id="r1"))
    (tmp_path / "store" / entry.key.path / entry.name / MANIFEST).unlink()
    assert store.entries() == []
    partial = _record(tmp_path / "r2", rng, run_id="r2", status="partial")
    store.put(partial)
    assert store.latest(key_of(read_record(partial).meta)) is None


def test_retention_keeps_the_newest(tmp_path: Path, rng: np.random.Generator) -> None:
    store = RunStore(str(tmp_path / "store"))
    for i in range(4):
        store.put(_record(tmp_path / f"r{i}", rng, run_id=f"r{i}"), keep=2)
    assert [e.run_id for e in store.entries()] == ["r2", "r3"]
    key_dir = tmp_path / "store" / StoreKey("torch", "2.11.0", "Test GPU", ("gemm",)).path
    assert len(list(key_dir.iterdir())) == 2


def test_cli_put_list_get_and_compare_from_store(tmp_path: Path, rng: np.random.Generator) -> None:
    store = str(tmp_path / "store")
    base = _record(tmp_path / "base", rng, run_id="base")
    cand = _record(tmp_path / "cand", rng, factor=1.0, run_id="cand")
    result = runner.invoke(app, ["store", "put", str(base), "--store", store, "--ref", "main"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["run_id"] == "base"
    result = runner.invoke(app, ["store", "list", "--store", store, "--like", str(cand)])
    assert [json.loads(line)["run_id"] for line in result.output.splitlines()] == ["base"]
    out = tmp_path / "cmp"
    result = runner.invoke(
        app, ["compare", str(cand), "--baseline-from-store", store, "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    data = assert_valid_comparison(out)
    assert data["baseline"]["kind"] == "previous-run"
    assert data["baseline"]["run_id"] == "base"
    assert data["baseline"]["store"]["url"] == store
    result = runner.invoke(
        app,
        [
            "store",
            "get",
            "--store",
            store,
            "--previous-for",
            str(cand),
            "--out",
            str(tmp_path / "g"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert read_record(tmp_path / "g").meta["run_id"] == "base"
    result = runner.invoke(
        app, ["compare", str(base), "--baseline-from-store", store, "--out", str(out)]
    )
    assert result.exit_code == 2
    assert "no stored run" in result.output


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.mark.slow
def test_s3_store_against_a_moto_server(
    tmp_path: Path,
    rng: np.random.Generator,
    s3_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import s3fs

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem(endpoint_url=s3_endpoint)
    fs.mkdir("runs")
    url = "s3://runs/collectbot"
    store = RunStore(url)
    for i in range(3):
        store.put(_record(tmp_path / f"r{i}", rng, run_id=f"r{i}"), ref="main", keep=2)
    assert [e.run_id for e in store.entries()] == ["r1", "r2"]
    cand = _record(tmp_path / "cand", rng, run_id="cand")
    out = tmp_path / "cmp"
    result = runner.invoke(
        app,
        [
            "compare",
            str(cand),
            "--baseline-from-store",
            url,
            "--baseline-ref",
            "main",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads((out / "comparison.json").read_text())
    assert data["baseline"]["run_id"] == "r2"
    # Tampering in the bucket is caught on read.
    entry = store.entries()[-1]
    fs.pipe(f"runs/collectbot/{entry.key.path}/{entry.name}/failures.json", b"[]\n ")
    with pytest.raises(UserError, match="checksum mismatch"):
        store.get(entry, tmp_path / "got")


def test_a_pull_requests_job_cannot_store_a_baseline(
    tmp_path: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack 1, configuration side: a PR job's store is read-only (COLLECTBOT_STORE_ACCESS
    =read, set by the setup action), so `store put --ref main` and every other write refuse
    in one line, while reading the baseline still works."""
    store = str(tmp_path / "store")
    base = _record(tmp_path / "base", rng, run_id="base")
    RunStore(store).put(base, ref="main")
    fake = _record(tmp_path / "fake", rng, factor=0.5, run_id="fake")
    monkeypatch.setenv("COLLECTBOT_STORE_ACCESS", "read")
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "store").rglob("*"))
    attempts = [
        ["store", "put", str(fake), "--store", store, "--ref", "main"],
        ["store", "prune", "--like", str(base), "--keep", "1", "--store", store],
    ]
    for args in attempts:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert result.output.startswith("error: ") and "read-only for this job" in result.output
        assert len(result.output.strip().splitlines()) == 1
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "store").rglob("*")) == before
    result = runner.invoke(
        app,
        ["store", "get", "--store", store, "--previous-for", str(fake), "--ref", "main",
         "--out", str(tmp_path / "got")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert read_record(tmp_path / "got").meta["run_id"] == "base"
    # Anything but empty or `write` is read-only: a typo never grants writes.
    monkeypatch.setenv("COLLECTBOT_STORE_ACCESS", "raed")
    assert runner.invoke(app, attempts[0]).exit_code == 2


def _as_pr_runner(*args: str) -> subprocess.CompletedProcess[str]:
    """Run as the PR runner's account: root without capabilities (so file permissions bind,
    as for any other user), with the PR's own code: no read-only setting to honour."""
    env = {k: v for k, v in os.environ.items() if k != "COLLECTBOT_STORE_ACCESS"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    return subprocess.run(
        ["setpriv", "--bounding-set=-all", "--inh-caps=-all", sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to give the store and the PR runner separate accounts",
)
def test_the_trusted_root_is_read_only_to_a_pull_requests_runner(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    """Attack 1, permission side, on a local path: the trusted root belongs to the trusted
    runners' account (here uid 1000); a PR job runs as another account. Its own code, which
    ignores any setting, can neither store a fake `main` baseline nor replace a stored file,
    and the next comparison still takes the trusted baseline."""
    root = tmp_path / "trusted"
    store = RunStore(str(root))
    base = _record(tmp_path / "base", rng, run_id="base")
    entry = store.put(base, ref="main")
    for path in [root, *root.rglob("*")]:
        os.chown(path, 1000, 1000)
    tmp_path.chmod(0o755)
    fake = _record(tmp_path / "fake", rng, factor=0.5, run_id="fake")
    for path in [fake, *fake.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    put = _as_pr_runner("-m", "bot", "store", "put", str(fake), "--store", str(root),
                        "--ref", "main")  # fmt: skip
    assert put.returncode == 2, put.stderr[-2000:]
    assert put.stderr.startswith("error: ") and "refused by the store" in put.stderr
    stored = root / entry.key.path / entry.name / "gemm_perf.parquet"
    overwrite = _as_pr_runner("-c", f"open({str(stored)!r}, 'r+b').write(b'x')")
    assert overwrite.returncode != 0 and "PermissionError" in overwrite.stderr
    new_dir = _as_pr_runner("-c", f"import os; os.mkdir({str(root / 'pulls')!r})")
    assert new_dir.returncode != 0 and "PermissionError" in new_dir.stderr
    assert [e.run_id for e in RunStore(str(root)).entries(ref="main")] == ["base"]
    got = _as_pr_runner("-m", "bot", "store", "get", "--store", str(root), "--previous-for",
                        str(fake), "--ref", "main", "--out", str(tmp_path / "got"))  # fmt: skip
    assert got.returncode == 0, got.stderr[-2000:]
    assert read_record(tmp_path / "got").meta["run_id"] == "base"
