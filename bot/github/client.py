"""Build a PyGithub client the way Actions and a GitHub App expect, with honest retries.

- API address: option, else `$GITHUB_API_URL` (Actions sets it; GitHub Enterprise too), else
  https://api.github.com.
- Credentials, first found wins: a token option; a GitHub App (id, private key, and an
  installation id or the installation of the target repository); `$GITHUB_TOKEN`.
- Retries (PyGithub's `GithubRetry`, a urllib3 `Retry`): 5xx and 429 with exponential
  backoff; 403 only when it is a rate limit (a `Retry-After` header is honoured, a secondary
  rate limit without one waits `secondary_rate_wait`); connect and read timeouts. PATCH is
  retried too: the bot's PATCHes are idempotent, and a POST that was retried after the
  server acted is cleaned up by the sticky comment's duplicate check.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from urllib3 import Retry

from collector.errors import UserError

DEFAULT_API_URL = "https://api.github.com"


@dataclass(frozen=True)
class ClientConfig:
    api_url: str = DEFAULT_API_URL
    token: str | None = None
    app_id: str | None = None
    app_private_key: str | None = None
    installation_id: int | None = None
    timeout: float = 15.0
    retries: int = 8
    backoff_factor: float = 1.0
    backoff_max: float = 60.0
    secondary_rate_wait: float = 60.0
    # Cap on any rate-limit wait; longer waits fail instead of stalling the job.
    max_rate_limit_wait: float = 900.0
    # GitHub asks integrations to space out writes to avoid secondary rate limits.
    seconds_between_requests: float = 0.25
    seconds_between_writes: float = 1.0
    user_agent: str = "collectbot"

    @property
    def auth_kind(self) -> str:
        if self.token:
            return "token"
        if self.app_id:
            return "app"
        return "none"


def config_from_env(
    api_url: str | None = None,
    token: str | None = None,
    app_id: str | None = None,
    app_private_key_file: Path | None = None,
    installation_id: int | None = None,
    **overrides: float | int | str,
) -> ClientConfig:
    """Options first, then the environment Actions provides (and the App's variables)."""
    env = os.environ
    key = None
    key_file = app_private_key_file or (
        Path(env["COLLECTBOT_APP_PRIVATE_KEY_FILE"])
        if env.get("COLLECTBOT_APP_PRIVATE_KEY_FILE")
        else None
    )
    if key_file is not None:
        if not key_file.is_file():
            raise UserError(f"{key_file}: GitHub App private key not found")
        key = key_file.read_text()
    elif env.get("COLLECTBOT_APP_PRIVATE_KEY"):
        key = env["COLLECTBOT_APP_PRIVATE_KEY"]
    app = app_id or env.get("COLLECTBOT_APP_ID") or None
    inst = installation_id
    if inst is None and env.get("COLLECTBOT_APP_INSTALLATION_ID"):
        raw = env["COLLECTBOT_APP_INSTALLATION_ID"]
        if not raw.isdigit():
            raise UserError(f"COLLECTBOT_APP_INSTALLATION_ID: not a number: {raw!r}")
        inst = int(raw)
    chosen_token = token or (None if app else env.get("GITHUB_TOKEN") or None)
    if app and not key:
        raise UserError(
            "GitHub App id given but no private key: set --app-private-key-file, "
            "COLLECTBOT_APP_PRIVATE_KEY_FILE or COLLECTBOT_APP_PRIVATE_KEY"
        )
    cfg = ClientConfig(
        api_url=(api_url or env.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/"),
        token=chosen_token,
        app_id=app,
        app_private_key=key,
        installation_id=inst,
    )
    tunables: dict[str, float] = {}
    for var, name in _TUNABLE_ENV.items():
        if env.get(var):
            try:
                tunables[name] = float(env[var])
            except ValueError:
                raise UserError(f"{var}: not a number: {env[var]!r}") from None
    if "throttle" in tunables:
        throttle = tunables.pop("throttle")
        tunables["seconds_between_requests"] = throttle / 4
        tunables["seconds_between_writes"] = throttle
    return replace(cfg, **{**tunables, **overrides})  # type: ignore[arg-type]


# Environment knobs for the pacing of API calls (tests and busy installations).
_TUNABLE_ENV = {
    "COLLECTBOT_GITHUB_BACKOFF": "backoff_factor",
    "COLLECTBOT_GITHUB_SECONDARY_WAIT": "secondary_rate_wait",
    # Seconds between writes (a quarter of it between reads); 0 turns pacing off.
    "COLLECTBOT_GITHUB_THROTTLE": "throttle",
}


def make_retry(cfg: ClientConfig) -> Retry:
    from github.GithubRetry import GithubRetry

    return GithubRetry(
        secondary_rate_wait=cfg.secondary_rate_wait,
        max_rate_limit_wait=cfg.max_rate_limit_wait,
        total=cfg.retries,
        connect=cfg.retries,
        read=cfg.retries,
        status=cfg.retries,
        backoff_factor=cfg.backoff_factor,
        backoff_max=cfg.backoff_max,
        status_forcelist=[429, *range(500, 600)],
        allowed_methods=Retry.DEFAULT_ALLOWED_METHODS | {"GET", "POST", "PATCH"},
        respect_retry_after_header=True,
        raise_on_status=False,
    )


class _CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever sys.stderr is at the time (PyGithub binds the import-time one)."""

    @property
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass


def _route_logs() -> None:
    """Retry notices as one line each on stderr, e.g. `GitHub API: Retrying after 1 seconds`."""
    handler = _CurrentStderr()
    handler.setFormatter(logging.Formatter("GitHub API: %(message)s"))
    handler.setLevel(logging.INFO)
    for name in ("github", "urllib3.connectionpool"):
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if isinstance(h, logging.StreamHandler)]:
            logger.removeHandler(old)
        logger.addHandler(handler)
    logging.getLogger("github.GithubRetry").setLevel(logging.INFO)


def connect(cfg: ClientConfig, repo: str | None = None):  # type: ignore[no-untyped-def]
    """A `github.Github`; for an App without an installation id, the repo's installation."""
    from github import Auth, Github, GithubException, GithubIntegration

    _route_logs()

    common = {
        "base_url": cfg.api_url,
        "timeout": max(1, round(cfg.timeout)),  # PyGithub takes whole seconds
        "retry": make_retry(cfg),
        "user_agent": cfg.user_agent,
        "per_page": 100,
        "seconds_between_requests": cfg.seconds_between_requests or None,
        "seconds_between_writes": cfg.seconds_between_writes or None,
    }
    auth: Auth.Auth
    if cfg.token:
        auth = Auth.Token(cfg.token)
    elif cfg.app_id and cfg.app_private_key:
        app_auth = Auth.AppAuth(cfg.app_id, cfg.app_private_key)
        installation = cfg.installation_id
        if installation is None:
            if not repo:
                raise UserError("GitHub App: give --installation-id (no repository to look up)")
            owner, _, name = repo.partition("/")
            integration = GithubIntegration(auth=app_auth, **common)  # type: ignore[arg-type]
            try:
                installation = integration.get_repo_installation(owner, name).id
            except GithubException as exc:
                raise UserError(
                    f"GitHub App {cfg.app_id}: no installation found on {repo} "
                    f"({exc.status}); install the App on the repository"
                ) from None
        auth = app_auth.get_installation_auth(int(installation))
    else:
        raise UserError(
            "no GitHub credentials: set GITHUB_TOKEN (Actions: `env: GITHUB_TOKEN: "
            "${{ secrets.GITHUB_TOKEN }}`), pass --token, or configure a GitHub App"
        )
    return Github(auth=auth, **common)  # type: ignore[arg-type]
