"""The environment of a process that runs measured code: an allow-list, never the parent's.

Worker processes import the framework and run the kernels a pull request changed, and a
campaign's rounds run a pull request's whole collector. Whatever such a process inherits, the
code it runs can read (`os.environ`, `/proc/self/environ`), so it starts with only the names
below: paths, locale, and the settings of the GPU stack. A name that looks like a credential
(`GITHUB_TOKEN`, `ACTIONS_RUNTIME_TOKEN`, `AWS_SECRET_ACCESS_KEY`, `HF_TOKEN`, ...) never
passes, even when it matches the allow-list, and neither does a value that looks like one (a
GitHub or AWS key, a PEM block, a URL with a password). The container path applies the same
patterns (`bot/images/sandbox.py`).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

# Names that look like credentials: refused everywhere, whatever the allow-list says.
SECRET_NAME = re.compile(
    r"TOKEN(?!IZER)|SECRET|PASSW|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE|AUTH|COOKIE|SESSION"
    r"|SIGNATURE",
    re.IGNORECASE,
)
# Values that look like credentials, whatever their name.
SECRET_VALUE = re.compile(
    r"\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----|://[^/\s:@]+:[^/\s@]+@"
)
ALLOWED_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TERM",
        "COLUMNS",
        "NO_COLOR",
        "FORCE_COLOR",
        "PYTHONPATH",
        "PYTHONHASHSEED",
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONWARNINGS",
        "VIRTUAL_ENV",
        "LD_LIBRARY_PATH",
        "XDG_CACHE_HOME",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "DO_NOT_TRACK",
        "CI",
        "GITHUB_ACTIONS",
        "GITHUB_SHA",
        "GITHUB_RUN_ID",
        "GITHUB_REPOSITORY",
        "TOKENIZERS_PARALLELISM",
    }
)
ALLOWED_PREFIXES = (
    # The collector's own settings (framework version, manifest, vLLM block size, git SHA);
    # COLLECTBOT_APP_PRIVATE_KEY and the like still fall to SECRET_NAME.
    "COLLECTBOT_",
    "HF_",
    "LC_",
    "CUDA_",
    "NVIDIA_",
    "NCCL_",
    "CUBLAS_",
    "CUDNN_",
    "TORCH_",
    "TORCHINDUCTOR_",
    "PYTORCH_",
    "VLLM_",
    "FLASHINFER_",
    "TRITON_",
)

_SWAP_LOCK = threading.Lock()


def looks_secret(name: str, value: str = "") -> bool:
    return bool(SECRET_NAME.search(name) or SECRET_VALUE.search(value))


def allowed(name: str) -> bool:
    return name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)


def measured_code_environment(parent: Mapping[str, str] | None = None) -> dict[str, str]:
    """The parent's variables that a process running measured code may see."""
    source = os.environ if parent is None else parent
    return {
        name: value
        for name, value in source.items()
        if allowed(name) and not looks_secret(name, value)
    }


@contextmanager
def environment_for_children(env: Mapping[str, str]) -> Iterator[None]:
    """Processes started inside this block get exactly `env`.

    `multiprocessing`'s spawn start method execs the child with the current process's
    environment and has no argument for another one, so the environment is swapped for the
    moment of the start and restored after (under a lock: one start at a time).
    """
    with _SWAP_LOCK:
        saved = dict(os.environ)
        try:
            os.environ.clear()
            os.environ.update(env)
            yield
        finally:
            os.environ.clear()
            os.environ.update(saved)
