"""Provenance that is not about the device: code hash, git SHA, library versions."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def collector_hash() -> str:
    """sha256 over the collector's sources and case files: which measuring code ran."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE_DIR.rglob("*")):
        if path.suffix in (".py", ".yaml") and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(_PACKAGE_DIR)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def git_sha() -> str | None:
    env = os.environ.get("COLLECTBOT_GIT_SHA") or os.environ.get("GITHUB_SHA")
    if env:
        return env
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=_PACKAGE_DIR,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def library_versions() -> dict[str, str | None]:
    return {
        "python": platform.python_version(),
        "torch": package_version("torch"),
        "vllm": package_version("vllm"),
        "flashinfer": package_version("flashinfer-python"),
        "nvidia-ml-py": package_version("nvidia-ml-py"),
        "collector": package_version("collectbot"),
    }
