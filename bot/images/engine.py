"""The connection to the Docker engine, with a one-line error when there is none."""

from __future__ import annotations

import os
from typing import Any

from collector.errors import UserError


def connect(timeout: int = 600) -> Any:
    """A docker SDK client for $DOCKER_HOST or the default socket."""
    import docker
    import docker.errors

    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except (docker.errors.DockerException, OSError) as exc:
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise UserError(
            f"cannot reach the Docker engine at {where} ({reason}); start dockerd or set "
            "DOCKER_HOST"
        ) from None
    return client


def find_local(client: Any, ref: str) -> Any | None:
    """The engine's image `ref` names (a tag, id or digest reference); None if it has none."""
    import docker.errors

    try:
        return client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None
