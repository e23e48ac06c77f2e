"""Run a probe under vLLM 0.24.0 in a fresh interpreter and read the JSON line it prints last.

Skips the calling test, saying why, where vLLM 0.24.0 is not installed
(scripts/vllm-cpu-env.sh makes it importable).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

VLLM_VERSION = "0.24.0"
ROOT = Path(__file__).resolve().parents[1]


def vllm_probe(argv: list[str]) -> dict[str, Any]:
    """`python argv...` from the repository root, offline; its last stdout line as JSON."""
    try:
        version = metadata.version("vllm")
    except metadata.PackageNotFoundError:
        pytest.skip("vLLM is not installed here (scripts/vllm-cpu-env.sh makes it importable)")
    if version != VLLM_VERSION:
        pytest.skip(f"vLLM {version} is installed; this checks {VLLM_VERSION}")
    done = subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found
