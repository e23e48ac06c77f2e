"""How every collectbot container is locked down (pure: builds the docker SDK's arguments).

No network, a read-only root filesystem, all capabilities dropped, no privilege gain, limits
on memory (64g unless asked otherwise), CPUs and processes, locked memory bounded by the
memory limit, and an environment built from an explicit allow-list: the
host's environment never enters, and a name that looks like a secret is refused even when a
user asks for it. Writable places are the bind mounts the caller lists and a tmpfs /tmp.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collector.environment import SECRET_NAME, looks_secret
from collector.errors import UserError
from collector.settings import setting

# Container paths.
OUT = "/collectbot/out"
IN = "/collectbot/in"
CACHE = "/collectbot/cache"
HOME = "/tmp/home"  # noqa: S108 - inside the container, on its private tmpfs

# Where the JIT compilers of the GPU stack keep their caches: all under the cache mount, so
# kernels compiled in one run are reused by the next instead of compiling for minutes.
JIT_CACHE_ENV = {
    "XDG_CACHE_HOME": f"{CACHE}/xdg",
    "TORCHINDUCTOR_CACHE_DIR": f"{CACHE}/torchinductor",
    "TORCH_EXTENSIONS_DIR": f"{CACHE}/torch_extensions",
    "TRITON_CACHE_DIR": f"{CACHE}/triton",
    "FLASHINFER_WORKSPACE_BASE": f"{CACHE}/flashinfer",
    "VLLM_CACHE_ROOT": f"{CACHE}/vllm",
    # FlashInfer's block-FP8 GEMM compiles each shape's kernel with nvcc into $HOME, which is
    # the container's own tmpfs: every collection would compile them again.
    "TRTLLM_DG_CACHE_DIR": f"{CACHE}/tensorrt_llm",
    "CUDA_CACHE_PATH": f"{CACHE}/nv-compute",
    "CUDA_CACHE_MAXSIZE": str(4 << 30),
}
JIT_CACHE_DIRS = tuple(
    sorted({v.removeprefix(f"{CACHE}/") for k, v in JIT_CACHE_ENV.items() if v.startswith(CACHE)})
)
BASE_ENV = {
    "HOME": HOME,
    "PYTHONUNBUFFERED": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}
# Host variables a user may pass through with --env NAME: settings, never credentials.
PASSABLE = re.compile(
    r"^(COLLECTBOT_GIT_SHA|GITHUB_SHA|GITHUB_RUN_ID|GITHUB_REPOSITORY|CUDA_LAUNCH_BLOCKING|"
    r"NCCL_[A-Z_]+|TORCH_[A-Z_]+|PYTORCH_[A-Z_]+|VLLM_[A-Z_]+|FLASHINFER_[A-Z_]+|"
    r"TRITON_[A-Z_]+|OMP_NUM_THREADS|MKL_NUM_THREADS|NVIDIA_[A-Z_]+)$"
)
# One definition of what looks like a credential, shared with the local worker pool.
SECRET = SECRET_NAME
_SIZE = re.compile(r"^[0-9]+[bkmg]?$", re.I)
_UNITS = {"b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
# Every container gets a memory limit: without one, measured code can take the host's memory.
DEFAULT_MEMORY = "64g"


def size_bytes(size: str) -> int:
    """`64g` -> bytes (docker's units: b, k, m, g; a bare number is bytes)."""
    unit = size[-1].lower()
    return int(size[:-1]) * _UNITS[unit] if unit in _UNITS else int(size)


@dataclass(frozen=True)
class Limits:
    memory: str = setting(
        DEFAULT_MEMORY,
        help="With --image: container memory limit (it also bounds the locked memory).",
    )
    cpus: float | None = setting(None, help="With --image: container CPU limit, e.g. 8.")
    pids: int = 4096
    shm_size: str = setting("8g", help="With --image: size of /dev/shm.")
    tmp_size: str = "4g"

    def check(self) -> None:
        for name, value in (
            ("--memory", self.memory),
            ("--shm-size", self.shm_size),
            ("--tmp-size", self.tmp_size),
        ):
            if value is not None and not _SIZE.match(value):
                raise UserError(f"{name}: {value!r} is not a size like 64g or 512m")
        if self.cpus is not None and self.cpus <= 0:
            raise UserError(f"--cpus: {self.cpus} must be positive")
        if self.pids < 16:
            raise UserError(f"--pids-limit: {self.pids} is too low to start Python")


@dataclass(frozen=True)
class BindMount:
    source: Path
    target: str
    read_only: bool


@dataclass
class Sandbox:
    """Everything a locked-down container run needs, turned into docker SDK kwargs."""

    image: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    mounts: list[BindMount] = field(default_factory=list)
    gpus: list[str] | None = None
    limits: Limits = field(default_factory=Limits)
    user: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    name: str | None = None

    def kwargs(self) -> dict[str, Any]:
        from docker.types import DeviceRequest, Mount, Ulimit

        self.limits.check()
        for key, value in self.env.items():
            if looks_secret(key, value):
                raise UserError(f"environment: refusing to pass {key!r} into a container")
        out: dict[str, Any] = {
            "image": self.image,
            "command": self.command,
            "environment": {**BASE_ENV, **self.env},
            "network_mode": "none",
            "read_only": True,
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            # The container's own /tmp: a private tmpfs, not the host's.
            "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={self.limits.tmp_size},mode=1777"},  # noqa: S108
            "mounts": [
                Mount(target=m.target, source=str(m.source), type="bind", read_only=m.read_only)
                for m in self.mounts
            ],
            "pids_limit": self.limits.pids,
            "shm_size": self.limits.shm_size,
            "labels": {"org.collectbot.managed": "1", **self.labels},
            "detach": True,
            "stdin_open": False,
            "tty": False,
        }
        out["mem_limit"] = self.limits.memory
        out["memswap_limit"] = self.limits.memory
        if self.limits.cpus is not None:
            out["nano_cpus"] = int(self.limits.cpus * 1e9)
        if self.user is not None:
            out["user"] = self.user
        if self.name is not None:
            out["name"] = self.name
        if self.gpus is not None:
            out["device_requests"] = [DeviceRequest(device_ids=self.gpus, capabilities=[["gpu"]])]
            # Pinned host memory for CUDA copies and NCCL (NVIDIA suggests unlimited), bounded
            # by the memory limit so that locked pages cannot take the host's memory.
            locked = size_bytes(self.limits.memory)
            out["ulimits"] = [Ulimit(name="memlock", soft=locked, hard=locked)]
        return out


def passthrough_env(names: list[str], host_env: Mapping[str, str]) -> dict[str, str]:
    """The host variables a user asked to pass, each checked against the allow-list."""
    out = {}
    for name in names:
        if SECRET.search(name):
            raise UserError(f"--env {name}: looks like a secret; secrets never enter a container")
        if not PASSABLE.match(name):
            raise UserError(
                f"--env {name}: not on the allow-list (settings such as TORCH_*, VLLM_*, NCCL_*, "
                "OMP_NUM_THREADS, GITHUB_SHA)"
            )
        if name in host_env:
            if looks_secret(name, host_env[name]):
                raise UserError(f"--env {name}: its value looks like a credential; not passed")
            out[name] = host_env[name]
    return out


def gpu_request(device: str) -> tuple[list[str] | None, str]:
    """(device ids to request, device name inside): cuda:3 on the host is cuda:0 inside."""
    if device == "cpu":
        return None, "cpu"
    if device == "cuda":
        return ["0"], "cuda:0"
    _, _, index = device.partition(":")
    if device.startswith("cuda:") and index.isdigit():
        return [index], "cuda:0"
    raise UserError(f"--device: unknown device {device!r} (use cpu or cuda[:N])")
