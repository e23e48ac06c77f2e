"""Turn user errors into one line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

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


def one_line_errors(fn: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            message = clean(str(exc), 1000).replace("\n", " ")
            print(f"error: {message}", file=sys.stderr)
            raise typer.Exit(EXIT_USER_ERROR) from None

    return wrapper
