"""The REST calls the bot makes, through PyGithub's requester (auth, retries, throttling).

One facade over the handful of endpoints we use, so the set stays small and matches the
OpenAPI subset the tests check requests against (`scripts/vendor_github_data.py`).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


def _texts(data: dict[str, Any], *names: str) -> dict[str, str]:
    """The named string fields of a GitHub object ("" where absent or null)."""
    return {name: str(data.get(name) or "") for name in names}


def _author(data: dict[str, Any]) -> dict[str, str]:
    """Who wrote a comment or issue: the user's login and account type (User, Bot)."""
    user = data.get("user") or {}
    return {"author": str(user.get("login") or ""), "author_type": str(user.get("type") or "")}


@dataclass(frozen=True)
class Comment:
    id: int
    body: str
    author: str
    author_type: str
    html_url: str
    created_at: str
    updated_at: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Comment:
        texts = _texts(data, "body", "html_url", "created_at", "updated_at")
        return cls(id=int(data["id"]), **texts, **_author(data))


@dataclass(frozen=True)
class PullRequest:
    number: int
    state: str
    head_sha: str
    head_repo: str
    base_sha: str
    base_ref: str
    labels: tuple[str, ...]
    html_url: str
    head_ref: str = ""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PullRequest:
        head, base = data.get("head") or {}, data.get("base") or {}
        return cls(
            number=int(data["number"]),
            state=str(data.get("state")),
            head_sha=str(head.get("sha")),
            head_repo=str((head.get("repo") or {}).get("full_name") or ""),
            base_sha=str(base.get("sha")),
            base_ref=str(base.get("ref")),
            labels=tuple(str(lbl.get("name")) for lbl in data.get("labels") or []),
            html_url=str(data.get("html_url") or ""),
            head_ref=str(head.get("ref") or ""),
        )


@dataclass(frozen=True)
class IssueEvent:
    """One entry of an issue's event log (GitHub's record: who did what, and when)."""

    event: str  # labeled, unlabeled, ...
    actor: str
    label: str | None
    created_at: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IssueEvent:
        label = data.get("label")
        return cls(
            event=str(data.get("event") or ""),
            actor=str((data.get("actor") or {}).get("login") or ""),
            label=str(label.get("name")) if isinstance(label, dict) else None,
            created_at=str(data.get("created_at") or ""),
        )


@dataclass(frozen=True)
class Issue:
    """An issue (not a pull request): the tracking issue of main's regressions."""

    number: int
    title: str
    body: str
    state: str
    author: str
    author_type: str
    html_url: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Issue:
        texts = _texts(data, "title", "body", "state", "html_url")
        return cls(number=int(data["number"]), **texts, **_author(data))


class RepoApi:
    def __init__(self, gh: Any, repo: str) -> None:
        owner, _, name = repo.partition("/")
        self.gh = gh
        self.repo = repo
        self.base = f"/repos/{_q(owner)}/{_q(name)}"
        self._req = gh.requester

    def _call(self, verb: str, url: str, **kw: Any) -> tuple[dict[str, Any], Any]:
        headers, data = self._req.requestJsonAndCheck(verb, url, **kw)
        return {k.lower(): v for k, v in (headers or {}).items()}, data

    def _paginate(self, url: str, params: dict[str, Any] | None = None) -> Iterator[Any]:
        headers, data = self._call("GET", url, parameters={"per_page": 100, **(params or {})})
        while True:
            yield from (data if isinstance(data, list) else data.get("check_runs", []))
            match = _NEXT.search(headers.get("link", ""))
            if not match:
                return
            headers, data = self._call("GET", match.group(1))

    def pull(self, number: int) -> PullRequest:
        return PullRequest.from_json(self._call("GET", f"{self.base}/pulls/{number}")[1])

    def pulls_for_commit(self, sha: str) -> list[PullRequest]:
        return [
            PullRequest.from_json(p) for p in self._paginate(f"{self.base}/commits/{_q(sha)}/pulls")
        ]

    def open_pulls_for_branch(self, head_repo: str, head_ref: str) -> list[PullRequest]:
        """Open PRs whose head is branch `head_ref` of repository `head_repo` (a fork or this)."""
        owner = head_repo.partition("/")[0]
        found = self._paginate(
            f"{self.base}/pulls", {"state": "open", "head": f"{owner}:{head_ref}"}
        )
        pulls = [PullRequest.from_json(p) for p in found]
        return [
            p
            for p in pulls
            if p.state == "open"
            and p.head_repo.lower() == head_repo.lower()
            and p.head_ref == head_ref
        ]

    def issue_events(self, number: int) -> list[IssueEvent]:
        return [
            IssueEvent.from_json(e) for e in self._paginate(f"{self.base}/issues/{number}/events")
        ]

    def permission(self, user: str) -> tuple[str, str | None]:
        """(permission, role name) of a user on the repository; ('none', None) if unknown."""
        from github import GithubException

        try:
            _, data = self._call("GET", f"{self.base}/collaborators/{_q(user)}/permission")
        except GithubException as exc:
            if exc.status == 404:
                return "none", None
            raise
        return str(data.get("permission") or "none"), data.get("role_name")

    def comments(self, number: int) -> list[Comment]:
        return [
            Comment.from_json(c) for c in self._paginate(f"{self.base}/issues/{number}/comments")
        ]

    def create_comment(self, number: int, body: str) -> Comment:
        _, data = self._call("POST", f"{self.base}/issues/{number}/comments", input={"body": body})
        return Comment.from_json(data)

    def get_comment(self, comment_id: int) -> Comment | None:
        from github import GithubException

        try:
            _, data = self._call("GET", f"{self.base}/issues/comments/{comment_id}")
        except GithubException as exc:
            if exc.status == 404:
                return None
            raise
        return Comment.from_json(data)

    def edit_comment(self, comment_id: int, body: str) -> Comment:
        _, data = self._call(
            "PATCH", f"{self.base}/issues/comments/{comment_id}", input={"body": body}
        )
        return Comment.from_json(data)

    def _delete(self, url: str) -> bool:
        """DELETE `url`; False when it was not there (404)."""
        from github import GithubException

        try:
            self._call("DELETE", url)
        except GithubException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def delete_comment(self, comment_id: int) -> bool:
        """False when it was already gone (another publisher deleted it)."""
        return self._delete(f"{self.base}/issues/comments/{comment_id}")

    def remove_label(self, number: int, name: str) -> bool:
        """False when the label was not on the issue."""
        return self._delete(f"{self.base}/issues/{number}/labels/{_q(name)}")

    def issues(self, state: str = "all") -> list[Issue]:
        """The repository's issues (pull requests, which the list also returns, left out)."""
        found = self._paginate(f"{self.base}/issues", {"state": state})
        return [Issue.from_json(i) for i in found if "pull_request" not in i]

    def create_issue(self, title: str, body: str) -> Issue:
        _, data = self._call("POST", f"{self.base}/issues", input={"title": title, "body": body})
        return Issue.from_json(data)

    def update_issue(self, number: int, **fields: Any) -> Issue:
        """PATCH an issue: title, body, state (open|closed), state_reason."""
        _, data = self._call("PATCH", f"{self.base}/issues/{number}", input=fields)
        return Issue.from_json(data)

    def create_status(
        self, sha: str, state: str, context: str, description: str, target_url: str | None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"state": state, "context": context, "description": description}
        if target_url:
            body["target_url"] = target_url
        return dict(self._call("POST", f"{self.base}/statuses/{_q(sha)}", input=body)[1])

    def find_check_run(self, sha: str, name: str) -> dict[str, Any] | None:
        for run in self._paginate(
            f"{self.base}/commits/{_q(sha)}/check-runs", {"check_name": name, "filter": "latest"}
        ):
            if run.get("name") == name:
                return dict(run)
        return None

    def create_check_run(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call("POST", f"{self.base}/check-runs", input=body)[1])

    def update_check_run(self, run_id: int, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call("PATCH", f"{self.base}/check-runs/{run_id}", input=body)[1])


def _q(part: str) -> str:
    return urllib.parse.quote(str(part), safe="")
