"""A local GitHub REST server for tests: stateful, fault-injectable, and checked against
GitHub's official OpenAPI description (tests/data/github/openapi-subset.json)."""

from tests.github_server.server import Fault, GitHubServer, Hold, PullState, User

__all__ = ["Fault", "GitHubServer", "Hold", "PullState", "User"]
