"""collectbot as users install it: the wheel in a fresh venv, and the bot's own image.

Both build from this checkout as a user would; the image builds with no network, from a
folder of wheels, on a stand-in for the python:3.X-slim base (base images cannot be pulled
here; tests/docker_support.py).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest

from bot import __version__
from tests.docker_support import engine_or_skip

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _load_script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "build_bot_image", ROOT / "scripts" / "build_bot_image.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_wheel_installs_into_a_fresh_venv_and_runs_the_demo(tmp_path: Path) -> None:
    import torch

    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(ROOT)],
        check=True,
    )
    (wheel,) = dist.glob("collectbot-*.whl")
    assert wheel.name.startswith(f"collectbot-{__version__}-")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    # The collector extra, with this machine's CPU torch build (from pip's cache or index).
    subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         f"{wheel}[collector]", f"torch=={torch.__version__}"],
        check=True,
    )  # fmt: skip
    # Outside the checkout, with nothing of it on the path: the installed package alone runs.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    cli = env_dir / "bin" / "collectbot"
    version = subprocess.run(
        [str(cli), "--version"], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    assert version.stdout.strip() == f"collectbot {__version__}"
    where = subprocess.run(
        [str(py), "-c", "import bot; print(bot.__file__)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert str(env_dir) in where.stdout and str(ROOT) not in where.stdout
    # The image stage's files come with the wheel: an installed collectbot builds the image.
    paths = subprocess.run(
        [str(py), "-c", "from bot.images.context import DOCKERFILE, REQUIREMENTS;"
         "from collector.pins import default_manifest_path as m;"
         "print(DOCKERFILE, REQUIREMENTS, m(), sep='\\n')"],
        cwd=tmp_path, env={k: v for k, v in env.items() if k != "COLLECTBOT_MANIFEST"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    for line in paths.stdout.split():
        assert line.startswith(str(env_dir)) and Path(line).is_file(), line
    assert (
        Path(paths.stdout.split()[0]).read_text()
        == (ROOT / "images" / "collector.Dockerfile").read_text()
    )
    demo = subprocess.run(
        [str(cli), "demo", "--out", str(tmp_path / "demo")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stderr[-2000:]
    comment = (tmp_path / "demo" / "comment.md").read_text()
    assert "## " in comment and "collectbot" in comment


@pytest.fixture(scope="module")
def client() -> Any:
    return engine_or_skip()


def test_the_bot_image_builds_offline_runs_as_nobody_and_has_no_gpu_stack(client: Any) -> None:
    from tests.docker_support import ensure_python_base

    base = ensure_python_base(client)
    script = _load_script()
    tag = f"collectbot-test-bot:{__version__}"
    result = script.build(base, tag, [])
    out = client.containers.run(tag, ["--version"], network_mode="none", remove=True)
    assert bytes(out).decode().strip() == f"collectbot {__version__}"
    # A command that loads the whole CLI stack (typer's parameter adapters, pydantic_core).
    usage = client.containers.run(tag, ["compare", "--help"], network_mode="none", remove=True)
    assert "Usage: collectbot compare" in bytes(usage).decode()
    image = client.images.get(tag)
    assert image.attrs["Config"]["User"] == "65534:65534"
    # No torch and no wheel folder in any layer of the final image.
    probe = client.containers.run(
        tag, ["-c", "import importlib.util as u, os; print(u.find_spec('torch'), os.path.exists('/wheels'))"],
        entrypoint=["python3"], network_mode="none", remove=True,
    )  # fmt: skip
    assert bytes(probe).decode().split() == ["None", "False"]
    # What the bot adds to its base stays small: the trusted side's dependencies only.
    assert 0 < result["added_mb"] < 360, result
