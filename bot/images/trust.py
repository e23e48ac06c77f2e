"""Trust levels of a job on a shared GPU fleet (docs/security.md, "Trust levels").

- `trusted`: the default branch's baseline collection (and the publisher). Its image is built
  by the job itself, from the pinned base and without the engine's layer cache, and run by
  image id; its JIT cache is the persistent one, mounted read-write.
- `untrusted` (the default): every pull request job. It may reuse images by tag, and its
  container gets a private copy of the JIT cache that is thrown away after the run, so
  nothing it compiles or plants is ever read by a trusted job.
"""

from __future__ import annotations

import re
from typing import Literal

from collector.errors import UserError

Trust = Literal["trusted", "untrusted"]
TRUST_ENV = "COLLECTBOT_TRUST"
LEVELS: tuple[Trust, ...] = ("trusted", "untrusted")
# An image id or a digest reference: content-addressed, so no later `docker tag` moves it.
_BY_CONTENT = re.compile(r"^(?:sha256:[0-9a-f]{64}|[^@\s]+@sha256:[0-9a-f]{64})$")


def parse_trust(value: str, where: str = "--trust") -> Trust:
    for level in LEVELS:
        if value == level:
            return level
    raise UserError(f"{where}: {value!r} is not a trust level (trusted or untrusted)")


def require_content_ref(image: str) -> None:
    """A trusted collection names its image by id or digest, never by a tag anyone can move."""
    if not _BY_CONTENT.match(image):
        raise UserError(
            f"--image {image}: a trusted collection runs an image by id or digest "
            "(sha256:... from `collectbot image ensure --trust trusted`), not by a tag"
        )
