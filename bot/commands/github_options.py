"""Options shared by the commands that talk to GitHub (plan, publish)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

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
# The workflow run a command reports on (Actions sets both variables).
RunId = Annotated[int | None, typer.Option(help="The workflow run id (default $GITHUB_RUN_ID).")]
RunAttempt = Annotated[
    int | None, typer.Option(help="The run attempt (default $GITHUB_RUN_ATTEMPT).")
]
