"""`collectbot image verify`: prove what is inside an image before anything is measured.

The image's own interpreter reports the installed versions (`python -m collector versions`,
in a container with no network and no environment); the host compares them with the
manifest's pins exactly and fails with one line that names both versions of every mismatch.
"""

from __future__ import annotations

import json
from typing import Any

from bot.images.sandbox import Limits, Sandbox
from bot.render.sanitize import clean
from collector.errors import UserError
from collector.pins import FrameworkPins, Installed, check_versions

PROBE_TIMEOUT_S = 300


def run_probe(client: Any, image: str, distributions: list[str]) -> Installed:
    """Run the version probe inside `image` and parse its answer."""
    import docker.errors
    import requests

    sandbox = Sandbox(
        image=image,
        command=["python3", "-m", "collector", "versions", *distributions],
        limits=Limits(memory="4g", shm_size="64m", tmp_size="64m"),
        labels={"org.collectbot.role": "verify"},
    )
    try:
        container = client.containers.run(**sandbox.kwargs())
    except docker.errors.ImageNotFound:
        raise UserError(f"image {image!r} not found in the engine") from None
    except docker.errors.APIError as exc:
        raise UserError(f"image {image}: cannot start the probe ({exc.explanation})") from None
    try:
        try:
            status = container.wait(timeout=PROBE_TIMEOUT_S)
        except requests.exceptions.ConnectionError:
            raise UserError(
                f"image {image}: version probe did not answer in {PROBE_TIMEOUT_S} s"
            ) from None
        stdout = container.logs(stdout=True, stderr=False).decode(errors="replace")
        stderr = container.logs(stdout=False, stderr=True).decode(errors="replace")
    finally:
        container.remove(force=True)
    code = int(status.get("StatusCode", -1))
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    if code != 0 or not lines:
        last = (stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(
            f"image {image}: version probe exited with {code}: {clean(last, 300)} "
            "(is the collector installed in it?)"
        )
    try:
        return Installed.from_json(json.loads(lines[-1]))
    except json.JSONDecodeError:
        raise UserError(
            f"image {image}: version probe printed no JSON: {clean(lines[-1], 200)}"
        ) from None


def verify_image(client: Any, image: str, pins: FrameworkPins, source: str) -> Installed:
    """Installed versions, after checking they equal the pins; else one line naming both."""
    installed = run_probe(client, image, list(pins.expected()))
    mismatches = check_versions(pins, installed)
    if mismatches:
        detail = "; ".join(m.message(source) for m in mismatches)
        raise UserError(f"image {image} does not hold the pinned {pins.name}: {detail}")
    return installed
