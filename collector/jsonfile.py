"""Read JSON that a pull request's code may have written, with bounds (size, nesting depth).

Run records, checkpoints, plans, comparisons and result bundles all pass through a job that
ran untrusted code. A file that is too large, nested too deep to parse (json's C decoder
raises RecursionError near 1,000 levels) or deep enough to break a later recursive reader
(the schema validator, the encoder) becomes one `UserError` line that names the file, never
a traceback or an exhausted host. Symbolic links are not followed: a hostile job could point
one at a host file.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from collector.errors import UserError

# No record, plan or bundle field nests anywhere near this deep.
MAX_DEPTH = 64
MAX_BYTES = 256 << 20


def depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level + 1)
        stack.extend((child, level + 1) for child in children)
    return deepest


def is_json_type(value: Any, *types: type) -> bool:
    """isinstance for parsed JSON or YAML: `true` is a bool, never a number (to Python, an int)."""
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


def loads(
    text: str | bytes,
    source: str,
    *,
    error: type[UserError] = UserError,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """Parse; a syntax error, bad UTF-8 or too deep a nesting is one `error` line."""
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:  # ValueError: also a 5,000-digit integer
        raise error(f"{source}: not valid JSON ({exc})") from None
    except RecursionError:
        raise error(f"{source}: JSON nested too deeply (more than {max_depth} levels)") from None
    if depth(data) > max_depth:
        raise error(f"{source}: JSON nested too deeply (more than {max_depth} levels)")
    return data


def read_bytes(
    path: Path, *, limit: int | None = None, error: type[UserError] = UserError
) -> bytes:
    """The bytes of a regular file, not through a symbolic link, at most `limit` of them."""
    limit = MAX_BYTES if limit is None else limit
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise error(f"{path}: not found") from None
    except OSError as exc:
        if os.path.islink(path):
            raise error(f"{path}: is a symbolic link; refusing to follow it") from None
        raise error(f"{path}: cannot read ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{path}: not a regular file")
        if info.st_size > limit:
            raise error(f"{path}: larger than {limit} bytes ({info.st_size})")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise error(f"{path}: larger than {limit} bytes")
    return data


def read(
    path: Path,
    *,
    limit: int | None = None,
    error: type[UserError] = UserError,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """Read and parse a JSON file with the bounds above."""
    return loads(
        read_bytes(path, limit=limit, error=error), str(path), error=error, max_depth=max_depth
    )
