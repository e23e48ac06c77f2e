"""Container image references: `[registry/]repository[:tag][@sha256:<64 hex>]`.

A reference whose first path component looks like a host (has a `.` or `:`, or is
`localhost`) names that registry; any other reference names Docker Hub implicitly. Either way
it names a registry, so a committed reference must carry its digest: tags move and vanish,
digests do not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collector.errors import UserError

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_HOST = re.compile(r"^[A-Za-z0-9.-]+(?::[0-9]+)?$")


@dataclass(frozen=True)
class ImageRef:
    registry: str | None
    repository: str
    tag: str | None
    digest: str | None

    @property
    def pinned(self) -> bool:
        return self.digest is not None

    @property
    def name(self) -> str:
        """Registry and repository, without tag or digest."""
        return f"{self.registry}/{self.repository}" if self.registry else self.repository

    def __str__(self) -> str:
        text = self.name
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def parse_image_ref(text: str, *, where: str = "image reference") -> ImageRef:
    """Parse a reference; a malformed one is a one-line error naming `where` and the value."""
    ref = text.strip()
    if not ref or ref != text or any(c.isspace() for c in ref):
        raise UserError(f"{where}: {text!r} is not an image reference")
    digest = None
    if "@" in ref:
        ref, _, digest = ref.partition("@")
        if not _DIGEST.match(digest):
            raise UserError(
                f"{where}: {text!r} has a malformed digest {digest!r} "
                "(expected sha256: and 64 lowercase hex digits)"
            )
    parts = ref.split("/")
    registry = None
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        registry = parts.pop(0)
        if not _HOST.match(registry):
            raise UserError(f"{where}: {text!r} has a malformed registry host {registry!r}")
    tag = None
    if ":" in parts[-1]:
        parts[-1], _, tag = parts[-1].partition(":")
        if not _TAG.match(tag):
            raise UserError(f"{where}: {text!r} has a malformed tag {tag!r}")
    for part in parts:
        if not _COMPONENT.match(part):
            raise UserError(f"{where}: {text!r} has a malformed repository component {part!r}")
    return ImageRef(registry=registry, repository="/".join(parts), tag=tag, digest=digest)


def is_digest(text: str) -> bool:
    return bool(_DIGEST.match(text))
