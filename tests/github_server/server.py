"""The server: GitHub's REST endpoints the bot calls, with state and fault injection.

Responses are built from GitHub's own examples (so they carry every field real responses
do) with the state's values patched in. Every request the bot sends and every response the
server gives is validated against the OpenAPI subset; violations are collected in
`server.violations` and the test fixture fails on any.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt

from tests.github_server.spec import example, openapi

SECONDARY_RATE_LIMIT = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID."
)
RATE_LIMIT_DOCS = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"


def _in_state(query: dict[str, list[str]], state: str) -> bool:
    """GitHub's `state` filter of a list: open ones unless it asks for closed or all."""
    return query.get("state", ["open"])[0] in ("all", state)


@dataclass(frozen=True)
class User:
    login: str
    id: int
    type: str = "User"  # User | Bot


@dataclass
class PullState:
    number: int
    head_sha: str
    base_sha: str
    head_repo: str
    head_ref: str = "feature"
    base_ref: str = "main"
    state: str = "open"
    labels: list[str] = field(default_factory=list)


@dataclass
class Fault:
    """Answer matching requests with `status` (or delay them), `times` times."""

    method: str
    path: str  # regex on the path
    status: int | None = None
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    times: int = 1
    delay: float = 0.0  # seconds to sleep before handling normally (a timeout when > client's)
    # Seconds to sleep after handling, before answering: the server acted, the answer is late.
    delay_after: float = 0.0

    @classmethod
    def forbidden(
        cls, method: str, path: str, message: str, times: int = 1, **headers: str
    ) -> Fault:
        """GitHub's 403: its message and a documentation link, and any `headers`."""
        body = {"message": message, "documentation_url": RATE_LIMIT_DOCS}
        return cls(method, path, status=403, body=body, headers=headers, times=times)

    @classmethod
    def secondary_rate_limit(cls, method: str, path: str, times: int = 1) -> Fault:
        """GitHub's 403 with Retry-After: 1, as its secondary rate limit answers."""
        return cls.forbidden(method, path, SECONDARY_RATE_LIMIT, times, **{"Retry-After": "1"})

    def matches(self, method: str, path: str) -> bool:
        return self.times > 0 and method == self.method and re.search(self.path, path) is not None


@dataclass
class Hold:
    """Make the first `parties` matching requests wait for each other (a forced race): they
    are handled only when all have arrived, and answered only when all have been handled, so
    every one of them sees the state from before any of their clients' next requests."""

    method: str
    path: str
    parties: int
    timeout: float = 10.0  # then the waiting requests go on alone (the race did not happen)
    barrier: threading.Barrier = field(init=False)
    answered: threading.Barrier = field(init=False)
    remaining: int = field(init=False)

    def __post_init__(self) -> None:
        self.barrier = threading.Barrier(self.parties, timeout=self.timeout)
        self.answered = threading.Barrier(self.parties, timeout=self.timeout)
        self.remaining = self.parties


@dataclass
class Logged:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    status: int
    user: str | None


class GitHubServer:
    def __init__(self, repo: str = "Codertocat/Hello-World") -> None:
        self.repo = repo
        self.lock = threading.RLock()
        self.users: dict[str, User] = {}  # token -> user
        self.permissions: dict[str, tuple[str, str]] = {}  # login -> (permission, role_name)
        self.pulls: dict[int, PullState] = {}
        self.comments: dict[int, dict[str, Any]] = {}  # id -> {issue, body, user, times}
        self.statuses: list[dict[str, Any]] = []
        self.issue_events: dict[int, list[dict[str, Any]]] = {}  # number -> event log
        self.check_runs: dict[int, dict[str, Any]] = {}
        # Issues that are not pull requests: number -> {number, title, body, state, user, ...}.
        self.issues: dict[int, dict[str, Any]] = {}
        self.faults: list[Fault] = []
        self.holds: list[Hold] = []
        self.log: list[Logged] = []
        self.violations: list[str] = []
        self.app: dict[str, Any] | None = None  # {"id", "public_key", "installation_id"}
        self._ids = itertools.count(1_000_001)
        self._clock = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
        self.httpd: ThreadingHTTPServer | None = None
        self.thread: threading.Thread | None = None

    # -- set-up helpers ---------------------------------------------------------------------
    def add_token(self, token: str, login: str, type_: str = "User") -> User:
        user = User(login, 5000 + len(self.users), type_)
        self.users[token] = user
        return user

    def add_pull(self, pull: PullState) -> PullState:
        self.pulls[pull.number] = pull
        return pull

    def label(self, number: int, name: str, actor: str) -> str:
        """`actor` applies label `name` to PR `number` now: the label and GitHub's event log
        entry for it. Returns the event's created_at (a run it starts is created after)."""
        with self.lock:
            pr = self.pulls[number]
            if name not in pr.labels:
                pr.labels.append(name)
            at = self.now()
            self.issue_events.setdefault(number, []).append(
                {"event": "labeled", "actor": actor, "label": name, "created_at": at}
            )
            return at

    def add_comment(self, number: int, body: str, token: str) -> int:
        with self.lock:
            return int(self._create_comment(number, body, self.users[token])["id"])

    def fault(self, fault: Fault) -> Fault:
        self.faults.append(fault)
        return fault

    def hold(self, method: str, path: str, parties: int, timeout: float = 10.0) -> Hold:
        h = Hold(method, path, parties, timeout)
        self.holds.append(h)
        return h

    def issue_comments(self, number: int) -> list[dict[str, Any]]:
        return [c for _, c in sorted(self.comments.items()) if c["issue"] == number]

    def requests(self, method: str | None = None, path: str | None = None) -> list[Logged]:
        return [
            r
            for r in self.log
            if (method is None or r.method == method) and (path is None or re.search(path, r.path))
        ]

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self.httpd is not None
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> GitHubServer:
        server = self

        class Handler(_Handler):
            gh = server

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()

    @contextmanager
    def running(self) -> Iterator[GitHubServer]:
        self.start()
        try:
            yield self
        finally:
            self.stop()

    # -- state to JSON -----------------------------------------------------------------------
    def now(self) -> str:
        with self.lock:
            self._clock += timedelta(seconds=1)
            return self._clock.isoformat().replace("+00:00", "Z")

    def _user_json(self, user: User) -> dict[str, Any]:
        out = example("issue-comment")["user"]
        out.update(
            login=user.login,
            id=user.id,
            type=user.type,
            url=f"{self.url}/users/{urllib.parse.quote(user.login)}",
            html_url=f"https://github.com/{user.login}",
        )
        return dict(out)

    def _repo_json(self, full_name: str) -> dict[str, Any]:
        out = example("pull-request")["head"]["repo"]
        owner, name = full_name.split("/")
        out.update(full_name=full_name, name=name, fork=full_name != self.repo)
        out["owner"]["login"] = owner
        return dict(out)

    def _stamped(self, **fields: Any) -> dict[str, Any]:
        """A new stored object: `fields`, created and last updated now."""
        now = self.now()
        return {**fields, "created_at": now, "updated_at": now}

    def _create_comment(self, number: int, body: str, user: User) -> dict[str, Any]:
        cid = next(self._ids)
        self.comments[cid] = self._stamped(id=cid, issue=number, body=body, user=user)
        return self.comments[cid]

    def comment_json(self, c: dict[str, Any]) -> dict[str, Any]:
        out = example("issue-comment")
        base = f"{self.url}/repos/{self.repo}"
        out.update(
            id=c["id"],
            node_id=f"IC_{c['id']}",
            url=f"{base}/issues/comments/{c['id']}",
            html_url=f"https://github.com/{self.repo}/pull/{c['issue']}#issuecomment-{c['id']}",
            issue_url=f"{base}/issues/{c['issue']}",
            body=c["body"],
            user=self._user_json(c["user"]),
            created_at=c["created_at"],
            updated_at=c["updated_at"],
        )
        return dict(out)

    def create_issue(self, title: str, body: str, user: User) -> dict[str, Any]:
        """A new issue, numbered after every pull request and issue (GitHub shares them)."""
        number = max([*self.pulls, *self.issues, 0]) + 1
        self.issues[number] = self._stamped(
            number=number, title=title, body=body, state="open", state_reason=None, user=user,
            labels=[], closed_at=None,
        )  # fmt: skip
        return self.issues[number]

    def issue_json(self, i: dict[str, Any]) -> dict[str, Any]:
        out = example("issue")
        base = f"{self.url}/repos/{self.repo}"
        out.update(
            id=7_000_000 + i["number"],
            node_id=f"I_{i['number']}",
            number=i["number"],
            title=i["title"],
            body=i["body"],
            state=i["state"],
            state_reason=i["state_reason"],
            url=f"{base}/issues/{i['number']}",
            html_url=f"https://github.com/{self.repo}/issues/{i['number']}",
            user=self._user_json(i["user"]),
            labels=[self._label_json(n) for n in i["labels"]],
            created_at=i["created_at"],
            updated_at=i["updated_at"],
            closed_at=i["closed_at"],
            pull_request=None,
            assignee=None,
            assignees=[],
            milestone=None,
            closed_by=None,
        )
        out.pop("pull_request")
        return dict(out)

    def _label_json(self, name: str) -> dict[str, Any]:
        out = example("label-items")[0]
        out.update(name=name, id=abs(hash(name)) % 10**8, node_id=f"L_{name}")
        return dict(out)

    def pull_json(self, p: PullState) -> dict[str, Any]:
        out = example("pull-request")
        out.update(
            number=p.number,
            state=p.state,
            html_url=f"https://github.com/{self.repo}/pull/{p.number}",
        )
        out["labels"] = [self._label_json(n) for n in p.labels]
        # GitHub's own example lists a team without the fields its schema requires.
        out["requested_teams"] = []
        out["head"].update(sha=p.head_sha, ref=p.head_ref, repo=self._repo_json(p.head_repo))
        out["head"]["label"] = f"{p.head_repo.split('/')[0]}:{p.head_ref}"
        out["base"].update(sha=p.base_sha, ref=p.base_ref, repo=self._repo_json(self.repo))
        return dict(out)

    def _pull_simple_json(self, p: PullState) -> dict[str, Any]:
        out = example("pull-request-simple-items")[0]
        out.update(number=p.number, state=p.state, requested_teams=[])
        out["labels"] = [self._label_json(n) for n in p.labels]
        out["head"].update(sha=p.head_sha, ref=p.head_ref, repo=self._repo_json(p.head_repo))
        out["base"].update(sha=p.base_sha, ref=p.base_ref, repo=self._repo_json(self.repo))
        return dict(out)


class _Server(ThreadingHTTPServer):
    # A storm of clients (tests/test_load.py) connects at once: a listen backlog of 5 would
    # drop their SYNs and make them wait for TCP's retransmission.
    request_queue_size = 256


class _Handler(BaseHTTPRequestHandler):
    gh: GitHubServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # -----------------------------------------------------------------------------------------
    def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-GitHub-Request-Id", "0000:TEST")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test): nothing to answer

    def _handle(self, method: str) -> None:
        gh = self.gh
        parsed = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(parsed.path)
        raw_path = parsed.path
        query = urllib.parse.parse_qs(parsed.query, keep_blank_values=True)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        has_body = bool(raw)
        body: Any = None
        if has_body:
            try:
                body = json.loads(raw)
            except json.JSONDecodeError:
                gh.violations.append(f"{method} {path}: body is not JSON")
        matched = openapi().match(method, raw_path)
        if matched is None:
            gh.violations.append(f"{method} {raw_path}: not an operation of the OpenAPI subset")
            self._send(
                404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}
            )
            return
        op, params = matched
        params = {k: urllib.parse.unquote(v) for k, v in params.items()}
        gh.violations += openapi().request_errors(op, params, query, body, has_body)
        # Fault injection and forced races, before any state changes.
        with gh.lock:
            fault = next((f for f in gh.faults if f.matches(method, path)), None)
            if fault is not None:
                fault.times -= 1
            hold = next(
                (
                    h
                    for h in gh.holds
                    if h.remaining > 0 and h.method == method and re.search(h.path, path)
                ),
                None,
            )
            if hold is not None:
                hold.remaining -= 1
        if hold is not None:
            hold.barrier.wait()
        if fault is not None and fault.delay:
            time.sleep(fault.delay)
        user = self._auth(op)
        if fault is not None and fault.status is not None:
            status, out, headers = fault.status, fault.body, fault.headers
        elif user is None:
            status, out, headers = (
                401,
                {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"},
                {},
            )
        else:
            with gh.lock:
                status, out, headers = self._dispatch(op["operationId"], params, query, body, user)
        if status < 500 and (fault is None or fault.status is None or fault.status < 500):
            gh.violations += openapi().response_errors(op, status, out)
        gh.log.append(Logged(method, path, query, body, status, getattr(user, "login", None)))
        if hold is not None:
            hold.answered.wait()
        if fault is not None and fault.delay_after:
            time.sleep(fault.delay_after)
        self._send(status, out, headers)

    def _auth(self, op: dict[str, Any]) -> Any:
        gh = self.gh
        header = self.headers.get("Authorization") or ""
        scheme, _, credential = header.partition(" ")
        if op["operationId"] in (
            "apps/create-installation-access-token",
            "apps/get-repo-installation",
        ):
            if scheme.lower() != "bearer" or gh.app is None:
                return None
            try:
                claims = jwt.decode(credential, gh.app["public_key"], algorithms=["RS256"])
            except jwt.PyJWTError:
                return None
            return (
                User(f"app-{claims['iss']}", 1) if str(claims["iss"]) == str(gh.app["id"]) else None
            )
        return gh.users.get(credential) if scheme.lower() in ("token", "bearer") else None

    def _not_found(self) -> tuple[int, Any, dict[str, str]]:
        return (
            404,
            {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"},
            {},
        )

    def _page(
        self, items: list[Any], query: dict[str, list[str]], path: str
    ) -> tuple[int, list[Any], dict[str, str]]:
        """A 200 with the requested page of `items` and GitHub's Link header to the next."""
        per_page = min(100, int(query.get("per_page", ["30"])[0]))
        page = int(query.get("page", ["1"])[0])
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        links = []
        base = f"{self.gh.url}{path}"
        keep = {k: v[0] for k, v in query.items() if k not in ("page",)}
        if page < last:
            links.append(
                f'<{base}?{urllib.parse.urlencode({**keep, "page": page + 1})}>; rel="next"'
            )
            links.append(f'<{base}?{urllib.parse.urlencode({**keep, "page": last})}>; rel="last"')
        return 200, chunk, ({"Link": ", ".join(links)} if links else {})

    def _dispatch(
        self, op_id: str, p: dict[str, str], query: dict[str, list[str]], body: Any, user: User
    ) -> tuple[int, Any, dict[str, str]]:
        gh = self.gh
        if "owner" in p and f"{p['owner']}/{p['repo']}".lower() != gh.repo.lower():
            return self._not_found()
        path = urllib.parse.urlsplit(self.path).path
        if op_id == "repos/get":
            out = example("full-repository-default-response")
            out.update(full_name=gh.repo, name=gh.repo.split("/")[1])
            return 200, out, {}
        if op_id == "pulls/get":
            pr = gh.pulls.get(int(p["pull_number"]))
            return (200, gh.pull_json(pr), {}) if pr else self._not_found()
        if op_id == "repos/list-pull-requests-associated-with-commit":
            items = [
                gh._pull_simple_json(pr)
                for pr in gh.pulls.values()
                if pr.head_sha == p["commit_sha"]
            ]
            return self._page(items, query, path)
        if op_id == "pulls/list":
            head = query.get("head", [None])[0]
            items = [
                gh._pull_simple_json(pr)
                for pr in gh.pulls.values()
                if _in_state(query, pr.state)
                and (head is None or head == f"{pr.head_repo.split('/')[0]}:{pr.head_ref}")
            ]
            return self._page(items, query, path)
        if op_id == "issues/list-events":
            number = int(p["issue_number"])
            if number not in gh.pulls:
                return self._not_found()
            template = example("issue-event-for-issue-items")[0]
            items = []
            for i, e in enumerate(gh.issue_events.get(number, [])):
                out = copy.deepcopy(template)
                actor = User(e["actor"], 7000 + i)
                out.update(
                    id=9000 + i,
                    event=e["event"],
                    created_at=e["created_at"],
                    actor=gh._user_json(actor),
                    label={"name": e["label"], "color": "f29513"},
                    commit_id=None,
                    commit_url=None,
                    performed_via_github_app=None,
                )
                items.append(out)
            return self._page(items, query, path)
        if op_id == "issues/list-for-repo":
            creator = query.get("creator", [None])[0]
            items = [
                gh.issue_json(i)
                for i in sorted(gh.issues.values(), key=lambda i: -i["number"])
                if _in_state(query, i["state"])
                and (creator is None or i["user"].login.lower() == creator.lower())
            ]
            return self._page(items, query, path)
        if op_id == "issues/create":
            created = gh.create_issue(str(body["title"]), str(body.get("body") or ""), user)
            created["labels"] = [str(n) for n in body.get("labels") or []]
            out = gh.issue_json(created)
            return 201, out, {"Location": out["url"]}
        if op_id == "issues/update":
            issue = gh.issues.get(int(p["issue_number"]))
            if issue is None:
                return self._not_found()
            if (
                issue["user"].login != user.login
                and gh.permissions.get(user.login, ("read",))[0] not in ("write", "admin")
                and user.type != "Bot"
            ):
                return (
                    403,
                    {"message": "Forbidden", "documentation_url": "https://docs.github.com/rest"},
                    {},
                )
            for field_name in ("title", "body"):
                if field_name in body:
                    issue[field_name] = str(body[field_name])
            if "state" in body and body["state"] != issue["state"]:
                issue["state"] = body["state"]
                closed = body["state"] == "closed"
                issue["closed_at"] = gh.now() if closed else None
                issue["state_reason"] = (
                    body.get("state_reason") or "completed" if closed else "reopened"
                )
            issue["updated_at"] = gh.now()
            return 200, gh.issue_json(issue), {}
        if op_id == "repos/get-collaborator-permission-level":
            perm, role = gh.permissions.get(p["username"], ("read", "read"))
            out = example(
                "repository-collaborator-permission-response-if-user-has-admin-permissions"
            )
            out["permission"], out["role_name"] = perm, role
            out["user"].update(login=p["username"], role_name=role)
            out["user"]["permissions"] = {
                "admin": perm == "admin",
                "maintain": role in ("maintain", "admin"),
                "push": perm in ("write", "admin"),
                "triage": role != "read",
                "pull": True,
            }
            return 200, out, {}
        if op_id == "issues/list-comments":
            number = int(p["issue_number"])
            if number not in gh.pulls:
                return self._not_found()
            items = [gh.comment_json(c) for c in gh.issue_comments(number)]
            return self._page(items, query, path)
        if op_id == "issues/create-comment":
            number = int(p["issue_number"])
            if number not in gh.pulls:
                return self._not_found()
            if len(body["body"]) > 65536:
                return (
                    422,
                    {
                        "message": "Validation Failed",
                        "errors": [
                            {
                                "resource": "IssueComment",
                                "code": "custom",
                                "field": "body",
                                "message": "body is too long (maximum is 65536 characters)",
                            }
                        ],
                        "documentation_url": "https://docs.github.com/rest",
                    },
                    {},
                )
            c = gh._create_comment(number, body["body"], user)
            return 201, gh.comment_json(c), {"Location": gh.comment_json(c)["url"]}
        if op_id in ("issues/get-comment", "issues/update-comment", "issues/delete-comment"):
            found = gh.comments.get(int(p["comment_id"]))
            if found is None:
                return self._not_found()
            c = found
            if op_id == "issues/get-comment":
                return 200, gh.comment_json(c), {}
            if c["user"].login != user.login:
                return (
                    403,
                    {
                        "message": "Must have admin rights to Repository.",
                        "documentation_url": "https://docs.github.com/rest",
                    },
                    {},
                )
            if op_id == "issues/delete-comment":
                del gh.comments[c["id"]]
                return 204, None, {}
            if len(body["body"]) > 65536:
                return (
                    422,
                    {
                        "message": "Validation Failed",
                        "documentation_url": "https://docs.github.com/rest",
                    },
                    {},
                )
            c["body"], c["updated_at"] = body["body"], gh.now()
            return 200, gh.comment_json(c), {}
        if op_id == "issues/remove-label":
            pr = gh.pulls.get(int(p["issue_number"]))
            if pr is None:
                return self._not_found()
            match = [n for n in pr.labels if n.lower() == p["name"].lower()]
            if not match:
                return (
                    404,
                    {
                        "message": "Label does not exist",
                        "documentation_url": "https://docs.github.com/rest",
                    },
                    {},
                )
            pr.labels.remove(match[0])
            return 200, [gh._label_json(n) for n in pr.labels], {}
        if op_id == "repos/create-commit-status":
            out = example("status")
            out.update(
                id=next(gh._ids),
                state=body["state"],
                context=body.get("context", "default"),
                description=body.get("description"),
                target_url=body.get("target_url"),
                created_at=gh.now(),
            )
            out["updated_at"] = out["created_at"]
            gh.statuses.append({**out, "sha": p["sha"]})
            return 201, out, {}
        if op_id == "checks/create":
            rid = next(gh._ids)
            run = {**body, "id": rid}
            gh.check_runs[rid] = run
            return 201, self._check_json(run), {}
        if op_id == "checks/update":
            existing = gh.check_runs.get(int(p["check_run_id"]))
            if existing is None:
                return self._not_found()
            run = existing
            run.update(body)
            return 200, self._check_json(run), {}
        if op_id == "checks/list-for-ref":
            name = query.get("check_name", [None])[0]
            runs = [
                self._check_json(r)
                for r in gh.check_runs.values()
                if r["head_sha"] == p["ref"] and (name is None or r["name"] == name)
            ]
            return 200, {"total_count": len(runs), "check_runs": runs}, {}
        if op_id == "apps/get-repo-installation":
            assert gh.app is not None
            out = example("installation")
            out["id"] = gh.app["installation_id"]
            out["app_id"] = int(gh.app["id"])
            return 200, out, {}
        if op_id == "apps/create-installation-access-token":
            assert gh.app is not None
            if int(p["installation_id"]) != gh.app["installation_id"]:
                return self._not_found()
            out = example("installation-token")
            token = f"ghs_installation{next(gh._ids)}"
            gh.users[token] = User(gh.app["bot_login"], 41898282, "Bot")
            out["token"] = token
            out["expires_at"] = (
                (datetime.now(UTC) + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
            )
            return 201, out, {}
        return (
            501,
            {
                "message": f"not implemented in the test server: {op_id}",
                "documentation_url": "https://docs.github.com/rest",
            },
            {},
        )

    def _check_json(self, run: dict[str, Any]) -> dict[str, Any]:
        out = example("check-run")
        out.update(
            id=run["id"],
            name=run["name"],
            head_sha=run["head_sha"],
            status=run.get("status", "queued"),
            conclusion=run.get("conclusion"),
            details_url=run.get("details_url"),
        )
        output = run.get("output") or {}
        out["output"].update(
            title=output.get("title"), summary=output.get("summary"), text=output.get("text")
        )
        return dict(out)
