"""Check out collector versions (git refs) into temporary worktrees."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from collector.errors import UserError

GIT_TIMEOUT_S = 300


def _git(repo: Path, *args: str) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(repo), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"{repo}: git {args[0]} failed ({exc})") from None
    if out.returncode != 0:
        message = (out.stderr.strip().splitlines() or ["no message"])[-1]
        raise UserError(f"{repo}: git {' '.join(args[:2])} failed: {message}")
    return out.stdout.strip()


def repo_root(path: Path) -> Path:
    return Path(_git(path, "rev-parse", "--show-toplevel"))


def resolve(repo: Path, ref: str) -> str:
    """The commit SHA a ref names; a one-line error if it names none."""
    if ref.startswith("-"):
        raise UserError(f"git ref {ref!r}: a ref may not start with '-'")
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except UserError:
        raise UserError(f"{repo}: git ref {ref!r} names no commit") from None


@contextmanager
def worktree(repo: Path, sha: str, path: Path) -> Iterator[Path]:
    """A detached worktree of `sha` at `path`, removed afterwards."""
    _git(repo, "worktree", "add", "--detach", "--force", str(path), sha)
    try:
        yield path
    finally:
        with suppress(UserError):
            _git(repo, "worktree", "remove", "--force", str(path))
        _git(repo, "worktree", "prune")
