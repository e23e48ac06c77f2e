"""Options shared by the commands that talk to GitHub (plan, publish, track), declared once:
the connection as one option group, and the one way its failures become an `error:` line."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from collector.errors import UserError

if TYPE_CHECKING:
    from bot.github.api import RepoApi

ApiUrl = Annotated[
    str | None,
    typer.Option(help="GitHub API address; default $GITHUB_API_URL, else https://api.github.com."),
]
Token = Annotated[
    str | None,
    typer.Option(help="API token; default $GITHUB_TOKEN (unless a GitHub App is configured)."),
]
AppId = Annotated[
    str | None, typer.Option(help="GitHub App id (default $COLLECTBOT_APP_ID) instead of a token.")
]
AppKey = Annotated[
    Path | None,
    typer.Option(
        help="GitHub App private key (PEM); default $COLLECTBOT_APP_PRIVATE_KEY_FILE.",
    ),
]
InstallationId = Annotated[
    int | None,
    typer.Option(help="GitHub App installation id; default: the repository's installation."),
]
Timeout = Annotated[
    float, typer.Option(min=0.1, help="Seconds before an API request times out (then retried).")
]
Retries = Annotated[
    int, typer.Option(min=0, help="Retries per request on 5xx, rate limits and timeouts.")
]
BotLogin = Annotated[
    str | None,
    typer.Option(
        help="Login whose comments are the bot's (default: any Bot account, e.g. "
        "github-actions[bot]); $COLLECTBOT_BOT_LOGIN."
    ),
]


@dataclass(frozen=True)
class GitHubOptions:
    """How a command reaches GitHub: `@option_group(GitHubOptions, "github")` spreads these
    over the command's options in the place of its `github` parameter (bot/options.py)."""

    api_url: ApiUrl = None
    token: Token = None
    app_id: AppId = None
    app_private_key_file: AppKey = None
    installation_id: InstallationId = None
    timeout: Timeout = 15.0
    retries: Retries = 8
    bot_login: BotLogin = None

    def repo_api(self, repo: str) -> RepoApi:
        """The API of `repo`, authenticated as these options (or the environment) say."""
        from bot.github.api import RepoApi
        from bot.github.client import config_from_env, connect

        cfg = config_from_env(
            self.api_url,
            self.token,
            self.app_id,
            self.app_private_key_file,
            self.installation_id,
            timeout=self.timeout,
            retries=self.retries,
        )
        return RepoApi(connect(cfg, repo), repo)

    def login(self) -> str | None:
        """The bot's login: --bot-login, else $COLLECTBOT_BOT_LOGIN, else any Bot account."""
        return self.bot_login or os.environ.get("COLLECTBOT_BOT_LOGIN") or None


@contextmanager
def api_errors(doing: str, then: str = "") -> Iterator[None]:
    """GitHub refusing or out of reach, as one `error:` line: what was being done, GitHub's
    answer (described, never quoted raw), then `then`."""
    from github import GithubException
    from requests import RequestException

    from bot.github.publish import describe_api_error

    try:
        yield
    except (GithubException, RequestException) as exc:
        raise UserError(
            f"GitHub API failed while {doing}: {describe_api_error(exc)}{then}"
        ) from None
