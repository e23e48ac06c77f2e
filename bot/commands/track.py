"""`collectbot track`: main compared with its previous baseline, as a tracking issue and a
commit status (the baseline workflow's trusted `track` job)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from bot.commands.github_options import (
    ApiUrl,
    AppId,
    AppKey,
    BotLogin,
    InstallationId,
    Retries,
    Timeout,
    Token,
)
from bot.errors import one_line_errors
from collector.errors import UserError

# GitHub caps an issue body at 65,536 characters; the block gets at most this share of it.
MAX_CHANGE_POINTS_CHARS = 20_000


@one_line_errors
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
    api_url: ApiUrl = None,
    token: Token = None,
    app_id: AppId = None,
    app_private_key_file: AppKey = None,
    installation_id: InstallationId = None,
    timeout: Timeout = 15.0,
    retries: Retries = 8,
    bot_login: BotLogin = None,
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

    from github import GithubException
    from requests import RequestException

    from bot.compare.comparison import load_comparison
    from bot.github.api import RepoApi
    from bot.github.client import config_from_env, connect
    from bot.github.publish import describe_api_error
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
    cfg = config_from_env(
        api_url, token, app_id, app_private_key_file, installation_id,
        timeout=timeout, retries=retries,
    )  # fmt: skip
    api = RepoApi(connect(cfg, repo_name), repo_name)
    login = bot_login or os.environ.get("COLLECTBOT_BOT_LOGIN") or None
    try:
        done = do_track(api, data, sha, ref, bot_login=login, change_points=block)
    except (GithubException, RequestException) as exc:
        raise UserError(
            f"GitHub API failed while tracking {repo_name}@{sha[:12]}: {describe_api_error(exc)}"
        ) from None
    where = f" #{done.issue}" if done.issue else ""
    typer.echo(clean(f"tracking issue: {done.action}{where}; status {done.status}", 300))
