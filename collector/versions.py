"""Which framework version a collection must run against, and the gate that enforces it.

The pin comes from, in order: an explicit override (`collectbot collect
--framework-version`, carried to the backend and its workers through
`COLLECTBOT_FRAMEWORK_VERSION`); the pins baked into a collector image
(`/opt/collectbot/pins.json`); the framework manifest (`images/manifest.yaml`, or
`$COLLECTBOT_MANIFEST`). Manifest and image pins are read and validated by
`collector/pins.py`, and versions match by its rule: exactly, or with the pinned CUDA
variant as the local label (`0.24.0` or `0.24.0+cu130`). A mismatch is a one-line error
raised before anything is collected.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import metadata

from collector.errors import UserError
from collector.pins import (
    IMAGE_PINS_PATH,
    default_manifest_path,
    load_image_pins,
    load_manifest,
    version_matches,
)

# Set by `collectbot collect --framework-version` (or by hand) to override the pins.
EXPECTED_VERSION_ENV = "COLLECTBOT_FRAMEWORK_VERSION"
# Kept for callers that point at another manifest; collector/pins.py reads the same variable.
MANIFEST_ENV = "COLLECTBOT_MANIFEST"


@dataclass(frozen=True)
class Expected:
    version: str
    source: str
    cuda: str | None = None  # the CUDA variant a local version label may carry


def expected_version(framework: str) -> Expected | None:
    """The version a collection of `framework` must run against; None when nothing pins it.

    A manifest that exists but is malformed is an error, not a silent "no pin".
    """
    override = os.environ.get(EXPECTED_VERSION_ENV, "").strip()
    if override:
        return Expected(override, f"${EXPECTED_VERSION_ENV}")
    image = load_image_pins()
    if image is not None and image.name == framework:
        return Expected(image.version, str(IMAGE_PINS_PATH), image.cuda)
    path = default_manifest_path()
    if not path.exists():
        return None
    manifest = load_manifest(path)
    pins = manifest.frameworks.get(framework)
    if pins is None:
        return None
    return Expected(pins.version, f"{path} frameworks.{framework}.version", pins.cuda)


def expected_flashinfer_version() -> Expected | None:
    """The FlashInfer version a `flashinfer` collection must run against.

    FlashInfer is pinned beside a framework (the manifest's `flashinfer` field of each
    entry; vLLM 0.24.0 pins 0.6.12), so, in order: the explicit override; an image's pins
    (its `flashinfer` field); a `frameworks.flashinfer` manifest entry if one exists; else
    the `flashinfer` field the manifest's entries agree on. Entries that pin different
    FlashInfer versions are ambiguous: an error that asks for --framework-version.
    """
    override = os.environ.get(EXPECTED_VERSION_ENV, "").strip()
    if override:
        return Expected(override, f"${EXPECTED_VERSION_ENV}")
    image = load_image_pins()
    if image is not None:
        return Expected(image.flashinfer, f"{IMAGE_PINS_PATH} flashinfer")
    path = default_manifest_path()
    if not path.exists():
        return None
    manifest = load_manifest(path)
    own = manifest.frameworks.get("flashinfer")
    if own is not None:
        return Expected(own.version, f"{path} frameworks.flashinfer.version")
    pins = {name: entry.flashinfer for name, entry in sorted(manifest.frameworks.items())}
    if not pins:
        return None
    if len(set(pins.values())) > 1:
        listed = ", ".join(f"frameworks.{n}.flashinfer={v}" for n, v in pins.items())
        raise UserError(
            f"{path}: the frameworks pin different FlashInfer versions ({listed}); "
            "pass --framework-version to choose one"
        )
    name, version = next(iter(pins.items()))
    return Expected(version, f"{path} frameworks.{name}.flashinfer")


def installed_version(distribution: str) -> str | None:
    """The installed distribution's version from its metadata, without importing it."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def check_pin(framework: str, installed: str, expected: Expected) -> None:
    """The gate: the installed version must equal the pin (see the module docstring)."""
    if not version_matches(installed, expected.version, expected.cuda or "-"):
        raise UserError(
            f"{framework} {installed} is installed but {expected.source} pins "
            f"{expected.version}; refusing to collect under the wrong version (install "
            f"{framework}=={expected.version} or change the pin)"
        )


def require_pin(framework: str, installed: str, distribution: str | None = None) -> str:
    """Check `installed` (of `distribution`, default the framework's name) against the
    expected version; returns the pin it matched. FlashInfer's pin sits beside a framework's
    (`expected_flashinfer_version`)."""
    flashinfer = framework == "flashinfer"
    found = expected_flashinfer_version() if flashinfer else expected_version(framework)
    if found is None:
        where = "pins none" if flashinfer else f"has no frameworks.{framework}.version"
        raise UserError(
            f"no pinned {framework} version: {default_manifest_path()} {where} and "
            f"{EXPECTED_VERSION_ENV} is unset (pass --framework-version)"
        )
    check_pin(distribution or framework, installed, found)
    return found.version
