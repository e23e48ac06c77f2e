"""scripts/build_real_image.py: what it derives from the manifest, checked without building.

The build itself is slow (docs/benchmarks.md, "Real vLLM 0.24.0 image"); the collector
Dockerfile it drives is built on the stand-in base by tests/test_images_docker.py.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

from collector.pins import load_manifest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "build_real_image.py"


def _load_script() -> Any:
    spec = importlib.util.spec_from_file_location("build_real_image", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_framework_closure_is_the_manifests_three_pins() -> None:
    script = _load_script()
    pins = load_manifest(ROOT / "images" / "manifest.yaml").get("vllm")
    assert script.framework_requirements(pins) == [
        f"vllm=={pins.version}",
        f"torch=={pins.torch}",
        f"flashinfer-python=={pins.flashinfer}",
    ]


def test_the_derived_manifest_changes_only_python(tmp_path: Path) -> None:
    script = _load_script()
    real = ROOT / "images" / "manifest.yaml"
    derived = script.derived_manifest(real, "vllm", "3.13", tmp_path)
    before = load_manifest(real).get("vllm").to_json()
    after = load_manifest(derived).get("vllm").to_json()
    assert after["python"] == "3.13" != before["python"]
    assert {k: v for k, v in after.items() if k != "python"} == {
        k: v for k, v in before.items() if k != "python"
    }


def test_wheels_inside_the_repository_are_refused(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--wheels", str(ROOT / "wheels"), "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "outside the repository" in proc.stderr
    assert not (ROOT / "wheels").exists()
