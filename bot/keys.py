"""The names that identify stored runs and their pages, pure: a store key and its slugged
path, a history's series, and the site's directory and file names for them. Render, compare,
history, site and the store all name things by these, so they depend on nothing."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

_SLUG = re.compile(r"[^a-z0-9._+-]+")


def slug(text: str) -> str:
    """A path-safe, lower-case form of a key part: 'NVIDIA H200' -> 'nvidia-h200'."""
    out = _SLUG.sub("-", text.strip().lower()).strip("-.")
    return out[:80] or "unknown"


@dataclass(frozen=True)
class StoreKey:
    backend: str
    framework_version: str
    gpu: str
    ops: tuple[str, ...]

    @property
    def parts(self) -> tuple[str, str, str, str]:
        return (
            slug(self.backend),
            slug(self.framework_version),
            slug(self.gpu),
            slug("+".join(sorted(self.ops))),
        )

    @property
    def path(self) -> str:
        return "/".join(self.parts)

    @property
    def label(self) -> str:
        return f"{self.backend} {self.framework_version} on {self.gpu} ({','.join(self.ops)})"

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "framework_version": self.framework_version,
            "gpu": self.gpu,
            "ops": list(self.ops),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StoreKey:
        return cls(
            backend=str(data["backend"]),
            framework_version=str(data["framework_version"]),
            gpu=str(data["gpu"]),
            ops=tuple(str(o) for o in data["ops"]),
        )


@dataclass(frozen=True)
class Series:
    """What identifies one history: backend, GPU, ops and ref (None: unlabelled runs)."""

    backend: str
    gpu: str
    ops: tuple[str, ...]
    ref: str | None

    @property
    def label(self) -> str:
        ref = self.ref if self.ref is not None else "(no ref)"
        return f"{self.backend} on {self.gpu} ({','.join(self.ops)}) @ {ref}"

    def to_json(self) -> dict[str, Any]:
        return {"backend": self.backend, "gpu": self.gpu, "ops": list(self.ops), "ref": self.ref}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def series_dir(series: Series) -> str:
    """A readable, collision-free directory name for a series."""
    name = f"{series.backend}-{series.gpu}-{'+'.join(series.ops)}-{series.ref or 'no-ref'}"
    return f"{slug(name)[:60]}-{_digest(repr(series))[:8]}"


def case_file(key: str) -> str:
    return f"case-{_digest(key)}.html"
