"""Framework pins and the version gate.

The pin lives in `images/manifest.yaml` (`frameworks: {vllm: {version: "0.24.0", ...}}`).
A collection must run against exactly the pinned version (DESIGN.md section 5): a mismatch
ends the run with a one-line error before anything is collected, so no record is ever
written under the wrong version. The expected version can also be given explicitly (the
`--framework-version` option of `collectbot collect`, carried to the backend through
`COLLECTBOT_FRAMEWORK_VERSION`), which wins over the manifest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from collector.errors import UserError

# Set by `collectbot collect --framework-version` (or by hand) to override the manifest pin.
EXPECTED_VERSION_ENV = "COLLECTBOT_FRAMEWORK_VERSION"
# Points at another manifest (an image may keep it outside the source tree).
MANIFEST_ENV = "COLLECTBOT_MANIFEST"
DEFAULT_MANIFEST = Path(__file__).resolve().parent.parent / "images" / "manifest.yaml"


@dataclass(frozen=True)
class FrameworkPin:
    """One framework's pin, and where it came from (for error messages)."""

    framework: str
    version: str
    source: str
    extra: tuple[tuple[str, str], ...] = ()

    def get(self, key: str) -> str | None:
        return dict(self.extra).get(key)


def manifest_path() -> Path:
    env = os.environ.get(MANIFEST_ENV)
    return Path(env) if env else DEFAULT_MANIFEST


def _yaml_where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    where = f" line {mark.line + 1}" if mark is not None else ""
    return f"{where}{f' ({problem})' if problem else ''}"


def load_pins(path: Path) -> dict[str, FrameworkPin]:
    """Read `frameworks:` from a manifest; every malformed field is a one-line error."""
    try:
        data: Any = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise UserError(f"{path}: cannot read the framework manifest ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise UserError(f"{path}:{_yaml_where(exc)} not valid YAML") from None
    if not isinstance(data, dict) or not isinstance(data.get("frameworks"), dict):
        raise UserError(f"{path}: expected a mapping with a 'frameworks' mapping")
    pins: dict[str, FrameworkPin] = {}
    for name, entry in data["frameworks"].items():
        if not isinstance(entry, dict):
            raise UserError(f"{path}: frameworks.{name} must be a mapping")
        version = entry.get("version")
        if not isinstance(version, str) or not version.strip():
            raise UserError(
                f"{path}: frameworks.{name}.version must be a non-empty string "
                f'(quote it: "0.24.0"), got {version!r}'
            )
        extra = tuple(
            (str(k), str(v)) for k, v in entry.items() if k != "version" and v is not None
        )
        pins[str(name)] = FrameworkPin(str(name), version.strip(), str(path), extra)
    return pins


def expected_version(framework: str) -> tuple[str, str] | None:
    """The version a collection of `framework` must run against, and where it was set.

    The explicit override wins; otherwise the manifest's pin; None when neither exists.
    A manifest that exists but is malformed is an error, not a silent "no pin".
    """
    override = os.environ.get(EXPECTED_VERSION_ENV, "").strip()
    if override:
        return override, f"${EXPECTED_VERSION_ENV}"
    path = manifest_path()
    if not path.exists():
        return None
    pin = load_pins(path).get(framework)
    if pin is None:
        return None
    return pin.version, f"{path} frameworks.{framework}.version"


def installed_version(distribution: str) -> str | None:
    """The installed distribution's version from its metadata, without importing it."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def check_pin(framework: str, installed: str, expected: str, source: str) -> None:
    """The gate: the installed version must equal the pin exactly (string equality)."""
    if installed != expected:
        raise UserError(
            f"{framework} {installed} is installed but {source} pins {expected}; "
            f"refusing to collect under the wrong version (install {framework}=={expected} "
            f"or change the pin)"
        )


def require_pin(framework: str, installed: str) -> str:
    """Check `installed` against the expected version; returns the pin it matched."""
    found = expected_version(framework)
    if found is None:
        raise UserError(
            f"no pinned {framework} version: {manifest_path()} has no "
            f"frameworks.{framework}.version and {EXPECTED_VERSION_ENV} is unset "
            f"(pass --framework-version)"
        )
    expected, source = found
    check_pin(framework, installed, expected, source)
    return expected
