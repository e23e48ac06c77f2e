"""bench/gpu/flashinfer_session.sh where no GPU is needed: usage, a missing wheel folder, the
JIT-cache round trip, and the reference step over real records."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.factories import gemm_case, write_record

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "gpu" / "flashinfer_session.sh"


def _run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {
        **os.environ,
        "OUT": str(tmp_path / "out"),
        "FISITE": str(tmp_path / "fisite"),
        "RUNS": str(tmp_path / "runs"),
        "PYTHON": sys.executable,
        "FLASHINFER_WORKSPACE_BASE": str(tmp_path / "home"),
        **env,
    }
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, env=full, timeout=120
    )


def test_usage_and_missing_wheels(tmp_path: Path) -> None:
    proc = _run(tmp_path)
    assert proc.returncode == 2 and "setup" in proc.stdout and "collect NAME OPS" in proc.stdout
    proc = _run(tmp_path, "setup", WHEELS=str(tmp_path / "none"))
    assert proc.returncode == 2 and "no wheels in" in proc.stderr
    proc = _run(tmp_path, "install", WHEELS=str(tmp_path / "none"))
    assert proc.returncode == 2
    assert "no wheels in" in proc.stderr


def test_jit_cache_is_saved_and_restored(tmp_path: Path) -> None:
    module = (
        tmp_path / "home" / ".cache" / "flashinfer" / "0.6.12" / "90a" / "cached_ops" / "x" / "x.so"
    )
    module.parent.mkdir(parents=True)
    module.write_bytes(b"\x7fELF")
    proc = _run(tmp_path, "savejit")
    assert proc.returncode == 0, proc.stderr
    saved = tmp_path / "out" / "fi-jit-cache.tgz"
    with tarfile.open(saved) as tar:
        assert "flashinfer/0.6.12/90a/cached_ops/x/x.so" in tar.getnames()
    restored = tmp_path / "restored"
    proc = _run(tmp_path, "restorejit", JIT_TGZ=str(saved), FLASHINFER_WORKSPACE_BASE=str(restored))
    assert proc.returncode == 0, proc.stderr
    assert "1 modules" in proc.stdout
    assert (
        restored / ".cache" / "flashinfer" / "0.6.12" / "90a" / "cached_ops" / "x" / "x.so"
    ).is_file()
    proc = _run(tmp_path, "restorejit", JIT_TGZ=str(tmp_path / "absent.tgz"))
    assert proc.returncode == 0 and "no JIT cache" in proc.stdout


@pytest.mark.slow
def test_reference_step_compares_the_records_in_out(tmp_path: Path) -> None:
    cases = [gemm_case(m) for m in (16, 64)]

    def record(name: str, backend: str, ms: float) -> None:
        folder = tmp_path / "runs" / name
        write_record(
            folder,
            cases,
            lambda c: [[ms] * 4, [ms] * 4],
            meta_extra={"backend": backend, "framework": backend},
        )
        out = tmp_path / "out"
        out.mkdir(exist_ok=True)
        with tarfile.open(out / f"{name}.tar", "w") as tar:
            tar.add(folder, arcname=name)

    record("fi", "flashinfer", 0.011)
    record("tr", "torch", 0.010)
    proc = _run(tmp_path, "reference", "fi", "tr")
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "out" / "fi-reference.md").read_text()
    assert "flashinfer vs torch" in text and "| gemm | bfloat16 | 2 (2) | 1.100 |" in text
    assert (tmp_path / "out" / "fi-reference.json").is_file()
