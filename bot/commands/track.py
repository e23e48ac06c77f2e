"""`collectbot track`: main compared with its previous baseline, as a tracking issue and a
commit status (the baseline workflow's trusted `track` job)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from bot.commands.github_options import GitHubOptions, api_errors
from bot.errors import one_line_errors
from bot.options import option_group
from collector.errors import UserError

# GitHub caps an issue body at 65,536 characters; the block gets at most this share of it.
MAX_CHANGE_POINTS_CHARS = 20_000


@one_line_errors
@option_group(GitHubOptions, "github")
def track(
    comparison: Annotated[
        Path,
        typer.Argument(help="The new baseline compared with the previous one (compare --out)."),
    ],
    sha: Annotated[str, typer.Option(help="The commit the new baseline measured.")],
    ref: Annotated[str, typer.Option(help="The branch of both baselines (e.g. main).")] = "main",
    repo: Annotated[
        str | None, typer.Option(help="owner/name (default $GITHUB_REPOSITORY).")
    ] = None,
    github: GitHubOptions = GitHubOptions(),
    change_points: Annotated[
        Path | None,
        typer.Option(
            help="A markdown block of the baselines' change points for the issue's body "
            "(written by the trusted store job: collectbot history --markdown)."
        ),
    ] = None,
) -> None:
    """Open or update the one tracking issue when the new baseline is red against the previous
    one (closing it when clean again), and set the result as a status on SHA."""
    import re

    from bot.compare.comparison import load_comparison
    from bot.github.tracking import track as do_track
    from bot.render.sanitize import clean

    if not re.fullmatch(r"[0-9a-f]{40}", sha):
        raise UserError(f"--sha: {sha[:60]!r} is not a 40-digit commit SHA")
    data = load_comparison(comparison)
    block = None
    if change_points is not None:
        if not change_points.is_file():
            raise UserError(f"--change-points: {change_points}: no such file")
        block = change_points.read_text(errors="replace")[:MAX_CHANGE_POINTS_CHARS]
    repo_name = repo or os.environ.get("GITHUB_REPOSITORY")
    if not repo_name or "/" not in repo_name:
        raise UserError("--repo: give owner/name (or set $GITHUB_REPOSITORY)")
    api = github.repo_api(repo_name)
    with api_errors(f"tracking {repo_name}@{sha[:12]}"):
        done = do_track(api, data, sha, ref, bot_login=github.login(), change_points=block)
    where = f" #{done.issue}" if done.issue else ""
    typer.echo(clean(f"tracking issue: {done.action}{where}; status {done.status}", 300))
