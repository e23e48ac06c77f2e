"""The flashinfer backend where no GPU or FlashInfer is needed: the pin, the gate,
unavailability, the CPU path of the CLI, and the dispatch observer.

Installed versions are faked through real package metadata: a `flashinfer_python-X.dist-info`
folder on PYTHONPATH is what importlib.metadata (and so the gate) sees. Where a test needs
`import flashinfer` to succeed, a stand-in package provides exactly the names the backend's
runtime module imports (`__version__`, `autotuner.AutoTuner`, `utils.BackendSupportedError`),
with FlashInfer 0.6.12's contract for them; nothing else of FlashInfer is imitated, and any
kernel use on it would fail.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.backends import BACKEND_NAMES, get_backend, preflight
from collector.backends.flashinfer_backend import (
    BackendUnavailable,
    FlashinferBackend,
    check_installed_version,
    require_cuda,
)
from collector.backends.flashinfer_support import PAGE_SIZE_ENV, SM90_SWAP_AB_M_THRESHOLD
from collector.caseplan import Case, build_plan
from collector.errors import UserError
from collector.failures import BACKEND_UNAVAILABLE, UNSUPPORTED, classify_exception
from collector.record import read_record
from collector.versions import (
    EXPECTED_VERSION_ENV,
    MANIFEST_ENV,
    Expected,
    expected_flashinfer_version,
)
from tests.factories import assert_needs_cuda, collect_unpinned, fake_dist, unavailable_run

FLASHINFER_PRESENT = importlib.util.find_spec("flashinfer") is not None
DIGEST = "a" * 64
ENTRY = """  {name}:
    version: "{version}"
    torch: "2.11.0"
    flashinfer: "{fi}"
    cuda: "cu130"
    base_image: "docker.io/vllm/vllm-openai:v0.24.0@sha256:{digest}"
"""

# FlashInfer 0.6.12's AutoTuner contract, as far as the observer relies on it: a singleton
# from `AutoTuner.get()`, whose `choose_one(op, runners, config, inputs)` returns
# `(runner, tactic)`; outside tuning mode, the first runner with tactic -1.
STAND_IN = {
    "__init__.py": '__version__ = "{version}"\n',
    "autotuner.py": (
        "class AutoTuner:\n"
        "    _instance = None\n\n"
        "    @classmethod\n"
        "    def get(cls):\n"
        "        if cls._instance is None:\n"
        "            cls._instance = cls()\n"
        "        return cls._instance\n\n"
        "    def choose_one(self, custom_op, runners, tuning_config, inputs, **kwargs):\n"
        "        return runners[0], -1\n"
    ),
    "utils.py": "class BackendSupportedError(Exception):\n    pass\n",
}


def _manifest(tmp_path: Path, entries: list[tuple[str, str, str]]) -> Path:
    path = tmp_path / "manifest.yaml"
    body = "".join(ENTRY.format(name=n, version=v, fi=fi, digest=DIGEST) for n, v, fi in entries)
    path.write_text(f"schema_version: 1\nframeworks:\n{body}")
    return path


@pytest.fixture
def manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = _manifest(tmp_path, [("vllm", "0.24.0", "0.6.12")])
    monkeypatch.setenv(MANIFEST_ENV, str(path))
    monkeypatch.delenv(EXPECTED_VERSION_ENV, raising=False)
    return path


def _stand_in(root: Path, version: str = "0.6.12") -> Path:
    package = root / "flashinfer"
    package.mkdir(parents=True)
    for name, text in STAND_IN.items():
        (package / name).write_text(text.format(version=version))
    return fake_dist(root, "flashinfer-python", version)


# --- the pin ------------------------------------------------------------------------------


def test_repository_manifest_pins_flashinfer_beside_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MANIFEST_ENV, raising=False)
    monkeypatch.delenv(EXPECTED_VERSION_ENV, raising=False)
    found = expected_flashinfer_version()
    assert found is not None and found.version == "0.6.12" and found.cuda is None
    assert found.source.endswith("images/manifest.yaml frameworks.vllm.flashinfer")


def test_pin_sources_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EXPECTED_VERSION_ENV, raising=False)
    # Entries that agree are one pin; a frameworks.flashinfer entry is its own pin.
    agree = _manifest(tmp_path, [("sglang", "0.5.0", "0.6.12"), ("vllm", "0.24.0", "0.6.12")])
    monkeypatch.setenv(MANIFEST_ENV, str(agree))
    assert expected_flashinfer_version() == Expected(
        "0.6.12", f"{agree} frameworks.sglang.flashinfer"
    )
    own = _manifest(tmp_path, [("flashinfer", "0.6.13", "0.6.13"), ("vllm", "0.24.0", "0.6.12")])
    monkeypatch.setenv(MANIFEST_ENV, str(own))
    assert expected_flashinfer_version() == Expected(
        "0.6.13", f"{own} frameworks.flashinfer.version"
    )
    monkeypatch.setenv(EXPECTED_VERSION_ENV, "0.7.0")
    assert expected_flashinfer_version() == Expected("0.7.0", f"${EXPECTED_VERSION_ENV}")
    monkeypatch.delenv(EXPECTED_VERSION_ENV)
    monkeypatch.setenv(MANIFEST_ENV, str(tmp_path / "absent.yaml"))
    assert expected_flashinfer_version() is None


def test_disagreeing_pins_are_ambiguous(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _manifest(tmp_path, [("sglang", "0.5.0", "0.6.9"), ("vllm", "0.24.0", "0.6.12")])
    monkeypatch.setenv(MANIFEST_ENV, str(path))
    monkeypatch.delenv(EXPECTED_VERSION_ENV, raising=False)
    with pytest.raises(UserError, match="--framework-version") as info:
        expected_flashinfer_version()
    assert "frameworks.sglang.flashinfer=0.6.9" in str(info.value)
    assert "\n" not in str(info.value)
    monkeypatch.setenv(EXPECTED_VERSION_ENV, "0.6.9")  # the override resolves it
    assert check_installed_version({"flashinfer-python": "0.6.9"}.get) == "0.6.9"


# --- the gate -----------------------------------------------------------------------------


def test_gate_refuses_a_wrong_installed_version(manifest: Path) -> None:
    for wrong in ("0.6.11", "0.6.12.post1", "0.6.12+cu130", "0.6"):
        with pytest.raises(UserError, match="refusing to collect") as info:
            check_installed_version({"flashinfer-python": wrong}.get)
        text = str(info.value)
        assert f"flashinfer-python {wrong} is installed but" in text and "pins 0.6.12" in text
        assert "\n" not in text
    with pytest.raises(UserError):
        FlashinferBackend(version_of={"flashinfer-python": "0.6.11"}.get)


def test_gate_passes_the_pin_and_ignores_absence(manifest: Path) -> None:
    assert check_installed_version({"flashinfer-python": "0.6.12"}.get) == "0.6.12"
    assert check_installed_version(lambda dist: None) is None


def test_installed_with_no_pin_anywhere_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MANIFEST_ENV, str(tmp_path / "absent.yaml"))
    monkeypatch.delenv(EXPECTED_VERSION_ENV, raising=False)
    with pytest.raises(UserError, match="no pinned flashinfer version"):
        check_installed_version({"flashinfer-python": "0.6.12"}.get)


def test_preflight_checks_the_page_size(manifest: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PAGE_SIZE_ENV, "0")
    with pytest.raises(UserError, match=PAGE_SIZE_ENV):
        preflight("flashinfer")
    monkeypatch.setenv(PAGE_SIZE_ENV, "64")
    preflight("flashinfer")


# --- availability -------------------------------------------------------------------------


def test_not_installed_is_backend_unavailable(manifest: Path) -> None:
    with pytest.raises(BackendUnavailable, match="FlashInfer not installed") as info:
        FlashinferBackend(version_of=lambda dist: None)
    assert classify_exception(info.value) == BACKEND_UNAVAILABLE
    assert "flashinfer-python" in str(info.value)


def test_installed_but_unimportable_is_backend_unavailable(manifest: Path) -> None:
    def broken() -> types.ModuleType:
        raise ImportError("libcudart.so.13: cannot open shared object file")

    with pytest.raises(BackendUnavailable, match=r"0\.6\.12 is installed but does not import"):
        FlashinferBackend(version_of={"flashinfer-python": "0.6.12"}.get, import_runtime=broken)


def test_cpu_device_and_unknown_ops_are_unsupported(manifest: Path) -> None:
    assert_needs_cuda(require_cuda)
    backend = FlashinferBackend(
        version_of={"flashinfer-python": "0.6.12"}.get,
        import_runtime=lambda: types.ModuleType("rt"),  # never reached on a CPU
    )
    assert backend.framework_version() == "0.6.12"
    assert backend.supported_ops() == {"gemm", "context_attention", "generation_attention"}
    gemm = Case.build("gemm", {"gemm_dtype": "bfloat16", "m": 8, "n": 64, "k": 64})
    with pytest.raises(NotImplementedError, match="needs a CUDA device"):
        backend.prepare(gemm, "cpu", 0)
    moe = Case("moe", (("m", 8),))
    with pytest.raises(NotImplementedError, match="does not implement op 'moe'"):
        backend.prepare(moe, "cuda", 0)


def test_backend_is_registered_lazily(manifest: Path) -> None:
    assert "flashinfer" in BACKEND_NAMES
    assert "collector.backends.flashinfer_runtime" not in sys.modules
    preflight("flashinfer")  # nothing installed, or the pin: nothing to refuse
    if not FLASHINFER_PRESENT:
        with pytest.raises(BackendUnavailable):
            get_backend("flashinfer")


# --- the runtime's dispatch observer, over the stand-in package -----------------------------


@pytest.fixture
def runtime_module(tmp_path: Path) -> Iterator[types.ModuleType]:
    if FLASHINFER_PRESENT:
        pytest.skip("FlashInfer is importable here; the stand-in would shadow it")
    site = _stand_in(tmp_path / "site")
    sys.path.insert(0, str(site))
    try:
        module = importlib.import_module("collector.backends.flashinfer_runtime")
        yield module
    finally:
        sys.path.remove(str(site))
        for name in [n for n in sys.modules if n == "flashinfer" or n.startswith("flashinfer.")]:
            del sys.modules[name]
        sys.modules.pop("collector.backends.flashinfer_runtime", None)


def test_dispatch_is_observed_and_the_tuner_restored(runtime_module: types.ModuleType) -> None:
    from flashinfer.autotuner import AutoTuner

    class CudnnBf16GemmRunner:
        pass

    class TinyGemmBf16GemmRunner:
        pass

    tuner = AutoTuner.get()
    runners = [CudnnBf16GemmRunner(), TinyGemmBf16GemmRunner()]
    with runtime_module.observe_dispatch() as seen:
        runner, tactic = tuner.choose_one("bf16_gemm", runners, None, [])
        assert runner is runners[0] and tactic == -1
    assert seen == ["CudnnBf16GemmRunner"]
    assert "choose_one" not in vars(tuner)  # the class's method is back
    with runtime_module.observe_dispatch() as seen_again:
        pass
    assert seen_again == []
    # An exception inside the block still restores the tuner.
    with pytest.raises(RuntimeError), runtime_module.observe_dispatch():
        raise RuntimeError("kernel failed")
    assert "choose_one" not in vars(tuner)


def test_flashinfer_refusal_becomes_unsupported(runtime_module: types.ModuleType) -> None:
    from flashinfer.utils import BackendSupportedError

    rt = object.__new__(runtime_module.FlashinferRuntime)
    rt.capability = (8, 0)

    def refuse() -> None:
        raise BackendSupportedError("bmm_fp8 does not support backend 'cutlass' with capability 80")

    with pytest.raises(NotImplementedError) as info:
        rt.first_call("bmm_fp8", refuse)
    assert str(info.value) == (
        "flashinfer.bmm_fp8 is not supported on compute capability 8.0: "
        "bmm_fp8 does not support backend 'cutlass' with capability 80"
    )
    assert classify_exception(info.value) == UNSUPPORTED
    assert rt.first_call("bmm_fp8", lambda: 7) == 7

    def other() -> None:
        raise ValueError("K dimension must be divisible by block size (128), got K=64")

    with pytest.raises(ValueError, match="divisible"):  # not a refusal of the device
        rt.first_call("fp8_blockscale_gemm_sm90", other)


# --- the CLI on a machine without a GPU -----------------------------------------------------


def _collect(
    tmp_path: Path, out: Path, pythonpath: Path | None, *extra: str
) -> subprocess.CompletedProcess[str]:
    return collect_unpinned(
        tmp_path, pythonpath, "--backend", "flashinfer", "--device", "cpu",
        "--ops", "gemm,context_attention,generation_attention", "--case-set", "smoke",
        "--out", str(out), "--quiet", "--runs", "1", *extra,
    )  # fmt: skip


def _failures(out: Path) -> list[dict[str, object]]:
    failures: list[dict[str, object]] = json.loads((out / "failures.json").read_text())
    return failures


SMOKE_CASES = 16 + 4 + 4  # gemm, context_attention, generation_attention smoke sets


@pytest.mark.slow
@pytest.mark.skipif(FLASHINFER_PRESENT, reason="FlashInfer is importable here")
def test_cli_not_installed_records_every_case_unavailable(tmp_path: Path) -> None:
    out = tmp_path / "run"
    failures = unavailable_run(_collect(tmp_path, out, None), out, "FlashInfer not installed")
    assert len(failures) == SMOKE_CASES
    assert {f["op"] for f in failures} == {"gemm", "context_attention", "generation_attention"}
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "failed" and meta["counts"]["ok"] == 0
    assert meta["backend"] == meta["framework"] == "flashinfer"
    record = read_record(out)  # valid: checksums, schema, no rows
    assert all(table.num_rows == 0 for table in record.perf.values())


@pytest.mark.slow
@pytest.mark.skipif(FLASHINFER_PRESENT, reason="FlashInfer is importable here")
def test_cli_on_cpu_records_every_case_unsupported(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _collect(tmp_path, out, _stand_in(tmp_path / "site"))
    assert "Traceback" not in proc.stderr, proc.stderr
    failures = _failures(out)
    assert len(failures) == SMOKE_CASES
    assert {f["classification"] for f in failures} == {UNSUPPORTED}
    assert {f["message"] for f in failures} == {
        "the flashinfer backend needs a CUDA device, got 'cpu'"
    }
    # Every case ran and failed as observed: a complete record, each failure classified.
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "complete"
    assert meta["framework_version"] == "0.6.12" and meta["counts"]["ok"] == 0
    assert meta["counts"]["failed"] == SMOKE_CASES
    read_record(out)


@pytest.mark.slow
@pytest.mark.skipif(FLASHINFER_PRESENT, reason="FlashInfer is importable here")
def test_cli_wrong_version_stops_before_collecting(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _collect(tmp_path, out, fake_dist(tmp_path / "site", "flashinfer-python", "0.6.11"))
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "flashinfer-python 0.6.11 is installed but" in proc.stderr
    assert "frameworks.vllm.flashinfer pins 0.6.12" in proc.stderr
    assert not out.exists()
    # The explicit pin overrides the manifest; the (metadata-only) install does not import.
    proc = _collect(tmp_path, out, tmp_path / "site", "--framework-version", "0.6.11")
    assert proc.returncode == 2
    assert "installed but does not import" in proc.stderr
    assert {f["classification"] for f in _failures(out)} == {BACKEND_UNAVAILABLE}


def test_flashinfer_case_set_fits_one_gpu_session() -> None:
    """The H200 set: every op and dtype, both SM90 block-FP8 leaves, only the attention
    JIT variants the carried cache holds, and only shapes the default set also has."""
    ops = ("gemm", "context_attention", "generation_attention")
    plan = build_plan(ops, case_set="flashinfer")
    assert plan.count_by_op() == {"gemm": 72, "context_attention": 36, "generation_attention": 24}
    default = {c.key for c in build_plan(ops).cases}
    assert {c.key for c in plan.cases} <= default
    gemm = [c.params for c in plan.cases if c.op == "gemm"]
    assert {p["gemm_dtype"] for p in gemm} == {"bfloat16", "fp8", "fp8_block"}
    block = [p for p in gemm if p["gemm_dtype"] == "fp8_block"]
    assert {p["m"] < SM90_SWAP_AB_M_THRESHOLD for p in block} == {True, False}
    attention = [c.params for c in plan.cases if c.op != "gemm"]
    variants = {(p["head_dim"], p["kv_cache_dtype"], p["window_size"]) for p in attention}
    assert variants == {(128, "bfloat16", 0), (128, "fp8", 0)}
