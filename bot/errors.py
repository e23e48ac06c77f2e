"""Turn user errors into one line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import errno
import functools
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer

from bot.render.sanitize import clean
from collector.errors import UserError

P = ParamSpec("P")
R = TypeVar("R")
EXIT_USER_ERROR = 2


def one_line(message: str) -> str:
    """A message as one printable line (control characters and newlines removed)."""
    return " ".join(clean(message, 1000).split())


def os_error_message(exc: OSError) -> str:
    """`PATH: why` for an error on a file or directory."""
    why = _WHY.get(exc.errno or 0, exc.strerror or type(exc).__name__)
    where = exc.filename if exc.filename is not None else "file system"
    return f"{where}: {why}"


# Plainer words than strerror's where they mislead (mkdir's EEXIST means "a file is there").
_WHY = {
    errno.EEXIST: "exists and is not a directory",
    errno.ENOTDIR: "a parent of this path is a file, not a directory",
    errno.EISDIR: "is a directory (give a file path)",
    errno.ENOENT: "no such file or directory, and it cannot be created here",
    errno.EACCES: "permission denied",
    errno.EROFS: "read-only file system",
}


def one_line_errors(fn: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            print(f"error: {one_line(str(exc))}", file=sys.stderr)
            raise typer.Exit(EXIT_USER_ERROR) from None
        except OSError as exc:
            # A path the user gave that cannot be written or read (an --out that is a file or
            # under one, a directory given for a file, a read-only place): its name and why.
            print(f"error: {one_line(os_error_message(exc))}", file=sys.stderr)
            raise typer.Exit(EXIT_USER_ERROR) from None

    return wrapper
