"""The framework manifest (`images/manifest.yaml`): exact version pins per framework.

    schema_version: 1
    frameworks:
      vllm:
        version: "0.24.0"        # exact pin; the version gate compares the installed one to it
        torch: "2.11.0"
        flashinfer: "0.6.12"
        cuda: "cu130"            # CUDA variant of the torch build (`cpu` for a CPU build)
        base_image: "<registry>/<repo>:<tag>@sha256:<64 hex>"

Other fields are allowed and kept (they enter the image's content hash). The loader turns
every defect into a one-line error naming the file, the field and the value. The version gate
(`check_versions`) compares what is installed with the pins *exactly*: `0.24.0` matches only
`0.24.0`, or `0.24.0+<cuda variant>` (the local label a CUDA build carries).

This module runs inside the image too (the collector's gate), so it needs only pyyaml.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from collector.errors import UserError
from collector.imageref import parse_image_ref

SCHEMA_VERSION = 1
REQUIRED_FIELDS = ("version", "torch", "flashinfer", "cuda", "base_image")
# The pinned field -> the distribution whose installed version must equal it. The framework's
# own distribution is the framework's name.
PINNED_DISTRIBUTIONS = {"torch": "torch", "flashinfer": "flashinfer-python"}
# Where an image built by `collectbot image build` keeps its framework entry.
IMAGE_PINS_PATH = Path("/opt/collectbot/pins.json")


@dataclass(frozen=True)
class FrameworkPins:
    """One framework's entry: exact versions, CUDA variant and the base image."""

    name: str
    version: str
    torch: str
    flashinfer: str
    cuda: str
    base_image: str
    extra: Mapping[str, Any]

    @property
    def distribution(self) -> str:
        return self.name

    def expected(self) -> dict[str, str]:
        """Distribution name -> pinned version."""
        return {
            self.distribution: self.version,
            PINNED_DISTRIBUTIONS["torch"]: self.torch,
            PINNED_DISTRIBUTIONS["flashinfer"]: self.flashinfer,
        }

    def to_json(self) -> dict[str, Any]:
        # The named fields, then the extra ones flat beside them (as the manifest has them).
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        return {**data, **{k: self.extra[k] for k in sorted(self.extra)}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str) -> FrameworkPins:
        if not isinstance(data, Mapping) or "name" not in data:
            raise UserError(f"{source}: not a framework pin entry (no 'name')")
        entry = {k: v for k, v in data.items() if k != "name"}
        return _parse_entry(str(data["name"]), entry, source)


@dataclass(frozen=True)
class Manifest:
    path: Path
    frameworks: dict[str, FrameworkPins]

    def get(self, name: str) -> FrameworkPins:
        if name not in self.frameworks:
            known = ", ".join(sorted(self.frameworks))
            raise UserError(f"{self.path}: no framework {name!r} (the manifest has: {known})")
        return self.frameworks[name]


# What an entry's name, versions and CUDA variant look like.
_VERSION = re.compile(r"^[0-9]+(?:\.[0-9]+)*(?:(?:a|b|rc|\.post|\.dev)[0-9]+)*(?:\+[a-z0-9.]+)?$")
_CUDA = re.compile(r"^(?:cpu|cu[0-9]{3})$")
_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")


def _parse_entry(name: str, entry: Any, source: str) -> FrameworkPins:
    where = f"{source}: frameworks.{name}"
    if not _NAME.match(name):
        raise UserError(f"{source}: framework name {name!r} must be a lowercase identifier")
    if not isinstance(entry, Mapping):
        raise UserError(f"{where}: must be a mapping of fields")
    for key in REQUIRED_FIELDS:
        if key not in entry:
            raise UserError(f"{where}: missing field {key!r}")
        value = entry[key]
        if not isinstance(value, str) or not value:
            raise UserError(
                f"{where}.{key}: {value!r} must be a non-empty quoted string "
                "(YAML reads 0.10 as the number 0.1)"
            )
    for key in ("version", "torch", "flashinfer"):
        if not _VERSION.match(entry[key]):
            raise UserError(
                f"{where}.{key}: {entry[key]!r} is not an exact version (pins are exact, "
                "e.g. '0.24.0'; no ranges or wildcards)"
            )
    if not _CUDA.match(entry["cuda"]):
        raise UserError(f"{where}.cuda: {entry['cuda']!r} must be 'cpu' or like 'cu130'")
    ref = parse_image_ref(entry["base_image"], where=f"{where}.base_image")
    if not ref.pinned:
        raise UserError(
            f"{where}.base_image: {entry['base_image']!r} is not pinned by digest "
            "(append @sha256:<64 hex>; tags move and vanish)"
        )
    extra = {k: v for k, v in entry.items() if k not in REQUIRED_FIELDS}
    for key, value in extra.items():
        if not isinstance(key, str):
            raise UserError(f"{where}: field name {key!r} must be a string")
        is_image = key.endswith("image") and isinstance(value, str)
        if is_image and not parse_image_ref(value, where=f"{where}.{key}").pinned:
            raise UserError(f"{where}.{key}: {value!r} is not pinned by digest")
    return FrameworkPins(
        name=name,
        version=entry["version"],
        torch=entry["torch"],
        flashinfer=entry["flashinfer"],
        cuda=entry["cuda"],
        base_image=entry["base_image"],
        extra=extra,
    )


def parse_manifest(data: Any, path: Path) -> Manifest:
    if not isinstance(data, Mapping):
        raise UserError(f"{path}: must hold a YAML mapping with schema_version and frameworks")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise UserError(
            f"{path}: schema_version {version!r} is not supported (this reader knows "
            f"{SCHEMA_VERSION})"
        )
    unknown = sorted(str(k) for k in data if k not in ("schema_version", "frameworks"))
    if unknown:
        raise UserError(f"{path}: unknown top-level field {unknown[0]!r}")
    frameworks = data.get("frameworks")
    if not isinstance(frameworks, Mapping) or not frameworks:
        raise UserError(f"{path}: 'frameworks' must be a non-empty mapping")
    parsed = {
        str(name): _parse_entry(str(name), entry, str(path)) for name, entry in frameworks.items()
    }
    return Manifest(path=path, frameworks=parsed)


def load_manifest(path: Path) -> Manifest:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: manifest not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read the manifest ({exc})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "malformed YAML"
        raise UserError(f"{path}: not valid YAML{where} ({problem})") from None
    return parse_manifest(data, path)


def default_manifest_path() -> Path:
    """$COLLECTBOT_MANIFEST, else the checkout's `images/manifest.yaml`, else the copy an
    installed wheel carries (bot/images/data/, a path: the collector never imports bot)."""
    env = os.environ.get("COLLECTBOT_MANIFEST")
    if env:
        return Path(env)
    root = Path(__file__).resolve().parent.parent
    checkout = root / "images" / "manifest.yaml"
    return checkout if checkout.is_file() else root / "bot" / "images" / "data" / "manifest.yaml"


def load_image_pins(path: Path = IMAGE_PINS_PATH) -> FrameworkPins | None:
    """The pins baked into an image at build time; None outside such an image."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: unreadable pins ({exc})") from None
    return FrameworkPins.from_json(data, str(path))


# --- the version gate -------------------------------------------------------------------------


@dataclass(frozen=True)
class Installed:
    """What is installed where the probe ran: distribution versions and torch's CUDA."""

    distributions: dict[str, str | None]
    torch_cuda: str | None
    python: str

    def to_json(self) -> dict[str, Any]:
        return {
            "distributions": dict(sorted(self.distributions.items())),
            "torch_cuda": self.torch_cuda,
            "python": self.python,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Installed:
        dists = data.get("distributions")
        if not isinstance(dists, Mapping):
            raise UserError(f"version probe: malformed answer {json.dumps(data)[:200]}")
        return cls(
            distributions={str(k): None if v is None else str(v) for k, v in dists.items()},
            torch_cuda=None if data.get("torch_cuda") is None else str(data["torch_cuda"]),
            python=str(data.get("python", "")),
        )


def probe_installed(distributions: list[str]) -> Installed:
    """Read installed versions here (inside the image, when run there)."""
    import platform

    found: dict[str, str | None] = {}
    for name in distributions:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    torch_cuda = None
    if found.get("torch"):
        import torch

        torch_cuda = torch.version.cuda
    return Installed(distributions=found, torch_cuda=torch_cuda, python=platform.python_version())


@dataclass(frozen=True)
class Mismatch:
    what: str
    installed: str | None
    pinned: str

    def message(self, source: str = "the manifest") -> str:
        have = self.installed if self.installed is not None else "nothing (not installed)"
        return f"{self.what}: installed {have}, {source} pins {self.pinned}"


def cuda_variant(torch_cuda: str | None) -> str:
    """torch.version.cuda ('13.0', None) -> the manifest's variant ('cu130', 'cpu')."""
    if not torch_cuda:
        return "cpu"
    major, _, minor = torch_cuda.partition(".")
    return f"cu{major}{minor.split('.')[0] or '0'}"


def version_matches(installed: str | None, pinned: str, cuda: str) -> bool:
    return installed is not None and installed in (pinned, f"{pinned}+{cuda}")


def check_versions(pins: FrameworkPins, installed: Installed) -> list[Mismatch]:
    """Every pin the installed software does not meet exactly; empty means verified."""
    out = []
    for dist, pinned in pins.expected().items():
        have = installed.distributions.get(dist)
        if not version_matches(have, pinned, pins.cuda):
            out.append(Mismatch(dist, have, pinned))
    if installed.distributions.get("torch") is not None:
        variant = cuda_variant(installed.torch_cuda)
        if variant != pins.cuda:
            out.append(Mismatch("torch CUDA variant", variant, pins.cuda))
    python = pins.extra.get("python")
    if isinstance(python, str) and installed.python:
        have = ".".join(installed.python.split(".")[: len(python.split("."))])
        if have != python:
            out.append(Mismatch("python", installed.python, python))
    return out


def enforce(pins: FrameworkPins, installed: Installed, source: str) -> None:
    """The gate: raise one line naming every mismatch, with both versions."""
    mismatches = check_versions(pins, installed)
    if mismatches:
        detail = "; ".join(m.message(source) for m in mismatches)
        raise UserError(f"version gate for {pins.name}: {detail}")
