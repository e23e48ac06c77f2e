"""scripts/build_real_image.py: what it derives from the manifest, and its build path.

The real build is slow (docs/benchmarks.md, "Real vLLM 0.24.0 image"), so CI checks what the
script derives from the manifest and builds `images/collector.Dockerfile` the way the script
does (a base lacking some collector requirements, `--wheels`, no network) on a stand-in base;
tests/test_images_docker.py builds it on the full stand-in base.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot.cli import app
from collector.pins import load_manifest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "build_real_image.py"
runner = CliRunner()


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


@pytest.mark.slow
def test_the_collector_dockerfile_installs_from_a_wheel_bundle_with_no_network(
    tmp_path: Path,
) -> None:
    """The real build's path on a stand-in: the framework base lacks some collector
    requirements (there: pyarrow), and `--wheels` with `--build-network none` supplies them."""
    from tests.docker_support import STANDINS, engine_or_skip, ensure_base_image

    client = engine_or_skip()
    # Python, pip and the framework's version metadata; none of the collector's requirements.
    base = ensure_base_image(
        client, standins=STANDINS, roots=("pip",), repository="collectbot-test-bare"
    )
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
         "-r", str(ROOT / "images" / "collector-requirements.txt"), "-d", str(wheels)],
        check=True,
    )  # fmt: skip
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(
        (ROOT / "images" / "manifest.yaml").read_text().replace('cuda: "cu130"', 'cuda: "cpu"')
    )
    repository = f"collectbot-test-wheels-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "image.json"
    result = runner.invoke(
        app,
        ["image", "ensure", "--manifest", str(manifest), "--base-image", base,
         "--repository", repository, "--wheels", str(wheels), "--build-network", "none",
         "--no-verify", "--log", str(tmp_path / "build.log"), "--out", str(out)],
    )  # fmt: skip
    try:
        assert result.exit_code == 0, result.output
        ref = json.loads(out.read_text())["ref"]
        log = (tmp_path / "build.log").read_text()
        assert "Successfully installed" in log and "pyarrow" in log
        probe = client.containers.run(
            ref,
            ["python3", "-c", "import pyarrow, rich, numpy, yaml, pynvml, collector.pins; "
             "import os; print(os.path.exists('/opt/collectbot/wheels'))"],
            network_mode="none", remove=True,
        )  # fmt: skip
        assert bytes(probe).decode().split() == ["False"]
        versions = client.containers.run(ref, network_mode="none", remove=True)
        found = json.loads(bytes(versions).decode().splitlines()[-1])["distributions"]
        assert found == {"vllm": "0.24.0", "flashinfer-python": "0.6.12", "torch": None}
    finally:
        for image in client.images.list(name=repository):
            for tag in image.tags:
                client.images.remove(tag, force=True)
