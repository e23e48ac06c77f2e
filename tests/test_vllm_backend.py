"""The vllm backend where no GPU or vLLM is needed: pins, the gate, unavailability, the CLI.

Installed versions are faked through real package metadata: a `vllm-X.dist-info` folder on
PYTHONPATH is what importlib.metadata (and so the gate) sees, without a vLLM package.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from collector.backends import BACKEND_NAMES, get_backend, preflight
from collector.backends.vllm_backend import (
    BackendUnavailable,
    VllmBackend,
    check_installed_version,
    require_cuda,
)
from collector.caseplan import Case, build_plan
from collector.errors import UserError
from collector.failures import BACKEND_UNAVAILABLE, classify_exception
from collector.versions import (
    EXPECTED_VERSION_ENV,
    MANIFEST_ENV,
    Expected,
    check_pin,
    expected_version,
    require_pin,
)
from tests.factories import assert_needs_cuda, collect_unpinned, fake_dist, unavailable_run

VLLM_PRESENT = importlib.util.find_spec("vllm") is not None
MANIFEST = """schema_version: 1
frameworks:
  vllm:
    version: "0.24.0"
    torch: "2.11.0"
    flashinfer: "0.6.12"
    cuda: "cu130"
    base_image: "docker.io/vllm/vllm-openai:v0.24.0@sha256:{digest}"
""".replace("{digest}", "a" * 64)


@pytest.fixture
def manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "manifest.yaml"
    path.write_text(MANIFEST)
    monkeypatch.setenv(MANIFEST_ENV, str(path))
    monkeypatch.delenv(EXPECTED_VERSION_ENV, raising=False)
    return path


def _gemm() -> Case:
    return Case.build("gemm", {"gemm_dtype": "bfloat16", "m": 8, "n": 64, "k": 64})


def test_repository_manifest_pins_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MANIFEST_ENV, raising=False)
    monkeypatch.delenv(EXPECTED_VERSION_ENV, raising=False)
    found = expected_version("vllm")
    assert found is not None and found.version == "0.24.0" and found.cuda == "cu130"
    assert found.source.endswith("images/manifest.yaml frameworks.vllm.version")


def test_malformed_manifest_is_an_error_not_a_missing_pin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(MANIFEST.replace('version: "0.24.0"', "version: 0.24"))
    monkeypatch.setenv(MANIFEST_ENV, str(path))
    monkeypatch.delenv(EXPECTED_VERSION_ENV, raising=False)
    with pytest.raises(UserError, match=r"frameworks\.vllm\.version") as info:
        require_pin("vllm", "0.24.0")
    assert "\n" not in str(info.value)


def test_override_wins_over_manifest(manifest: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert expected_version("vllm") == Expected(
        "0.24.0", f"{manifest} frameworks.vllm.version", "cu130"
    )
    assert expected_version("sglang") is None
    monkeypatch.setenv(EXPECTED_VERSION_ENV, "0.25.1")
    assert expected_version("vllm") == Expected("0.25.1", f"${EXPECTED_VERSION_ENV}")


def test_no_pin_anywhere_refuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MANIFEST_ENV, str(tmp_path / "absent.yaml"))
    monkeypatch.delenv(EXPECTED_VERSION_ENV, raising=False)
    assert expected_version("vllm") is None
    with pytest.raises(UserError, match="no pinned vllm version"):
        require_pin("vllm", "0.24.0")


def test_pin_is_exact_up_to_the_pinned_cuda_label() -> None:
    pin = Expected("0.24.0", "m", "cu130")
    check_pin("vllm", "0.24.0", pin)
    check_pin("vllm", "0.24.0+cu130", pin)
    for installed in ("0.24.1", "0.24.0+cu129", "0.24", "0.24.0rc1"):
        with pytest.raises(UserError, match=re.escape(f"vllm {installed} is installed but m")):
            check_pin("vllm", installed, pin)
    with pytest.raises(UserError):  # an explicit override names no CUDA label: exact only
        check_pin("vllm", "0.24.0+cu130", Expected("0.24.0", "override"))


def test_gate_refuses_a_wrong_installed_version(manifest: Path) -> None:
    wrong = {"vllm": "0.23.0"}.get
    with pytest.raises(UserError, match=r"vllm 0\.23\.0 is installed but .* pins 0\.24\.0"):
        check_installed_version(wrong)
    with pytest.raises(UserError, match="refusing to collect"):
        VllmBackend(version_of=wrong)


def test_gate_passes_the_pinned_version_and_ignores_absence(manifest: Path) -> None:
    assert check_installed_version({"vllm": "0.24.0"}.get) == "0.24.0"
    assert check_installed_version(lambda dist: None) is None


def test_not_installed_is_backend_unavailable(manifest: Path) -> None:
    with pytest.raises(BackendUnavailable, match="vLLM not installed") as info:
        VllmBackend(version_of=lambda dist: None)
    assert classify_exception(info.value) == BACKEND_UNAVAILABLE


@pytest.mark.skipif(VLLM_PRESENT, reason="vLLM is importable here; this checks its absence")
def test_installed_but_unimportable_is_backend_unavailable(manifest: Path) -> None:
    with pytest.raises(
        BackendUnavailable, match=r"0\.24\.0 is installed but does not import"
    ) as info:
        VllmBackend(version_of={"vllm": "0.24.0"}.get)
    assert classify_exception(info.value) == BACKEND_UNAVAILABLE
    assert "vllm" in str(info.value)


def test_cpu_device_and_unknown_ops_are_unsupported(manifest: Path) -> None:
    assert_needs_cuda(require_cuda)
    # A stand-in for the imported runtime module: these checks come before any use of it.
    backend = VllmBackend(
        version_of={"vllm": "0.24.0"}.get, import_runtime=lambda: types.ModuleType("rt")
    )
    assert backend.framework_version() == "0.24.0"
    assert backend.supported_ops() == {"gemm", "context_attention", "generation_attention"}
    with pytest.raises(NotImplementedError, match="needs a CUDA device"):
        backend.prepare(_gemm(), "cpu", 0)


def test_backend_is_registered_lazily(manifest: Path) -> None:
    assert "vllm" in BACKEND_NAMES
    assert "collector.backends.vllm_runtime" not in sys.modules
    preflight("vllm")  # no vLLM distribution here, or the pinned one: nothing to refuse
    preflight("torch")
    if not VLLM_PRESENT:
        with pytest.raises(BackendUnavailable):
            get_backend("vllm")


def test_vllm_case_sets_cover_the_acceptance_floor() -> None:
    plan = build_plan(("gemm", "context_attention", "generation_attention"), case_set="vllm")
    counts = plan.count_by_op()
    assert counts["gemm"] >= 100
    assert counts["context_attention"] + counts["generation_attention"] >= 50
    gemm = [c for c in plan.cases if c.op == "gemm"]
    assert {c.params["gemm_dtype"] for c in gemm} == {"bfloat16", "fp8", "fp8_block"}
    block = [c.params for c in gemm if c.params["gemm_dtype"] == "fp8_block"]
    aligned = [p for p in block if p["n"] % 64 == 0 and p["k"] % 128 == 0]
    assert any(p["m"] < 32 for p in aligned) and any(p["m"] >= 32 for p in aligned)
    assert len(aligned) < len(block)  # unaligned shapes reach CUTLASS
    attention = [c for c in plan.cases if c.op != "gemm"]
    assert {c.params["kv_cache_dtype"] for c in attention} == {"bfloat16", "fp8"}
    smoke = build_plan(("gemm", "context_attention", "generation_attention"), case_set="vllm-smoke")
    assert smoke.count_by_op() == {"gemm": 5, "context_attention": 2, "generation_attention": 2}


def _collect(
    tmp_path: Path, out: Path, pythonpath: Path | None, *extra: str
) -> subprocess.CompletedProcess[str]:
    return collect_unpinned(
        tmp_path, pythonpath, "--backend", "vllm", "--ops", "gemm", "--case-set", "vllm-smoke",
        "--out", str(out), "--quiet", "--runs", "1", *extra,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(VLLM_PRESENT, reason="vLLM is importable here; this checks its absence")
def test_cli_not_installed_is_recorded_and_fails(tmp_path: Path) -> None:
    out = tmp_path / "run"
    failures = unavailable_run(_collect(tmp_path, out, None), out, "vLLM not installed")
    assert len(failures) == 5
    assert {f["exception_type"] for f in failures} == {"BackendUnavailable"}
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "failed" and meta["counts"]["ok"] == 0


@pytest.mark.slow
@pytest.mark.skipif(VLLM_PRESENT, reason="vLLM is importable here; this checks its absence")
def test_cli_wrong_version_stops_before_collecting(tmp_path: Path) -> None:
    site = fake_dist(tmp_path / "site", "vllm", "0.23.0")
    out = tmp_path / "run"
    proc = _collect(tmp_path, out, site)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "vllm 0.23.0 is installed but" in proc.stderr and "pins 0.24.0" in proc.stderr
    assert not out.exists()  # nothing collected, not even a partial record
    # The explicit pin overrides the manifest: the gate passes, then the (fake) install
    # does not import, and every case says so.
    proc = _collect(tmp_path, out, site, "--framework-version", "0.23.0")
    assert proc.returncode == 2
    assert "installed but does not import" in proc.stderr
    failures = json.loads((out / "failures.json").read_text())
    assert {f["classification"] for f in failures} == {BACKEND_UNAVAILABLE}
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "failed"
    assert "--framework-version" in meta["command"]
