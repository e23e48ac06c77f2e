"""Regenerate the GitHub test data in tests/data/github/ from GitHub's own published files.

Sources (npm registry, fetched with `npm pack`, so only `npm` and the registry are needed):
- `@octokit/openapi`: GitHub's official OpenAPI description of the REST API. We keep the
  operations the bot calls (OPERATIONS below), every component they reference, and their
  examples, with prose descriptions stripped: `openapi-subset.json`.
- `@octokit/webhooks-definitions`: real webhook payloads recorded by GitHub, and the JSON
  schema of each event. We keep the payloads the `plan` tests replay (`webhooks/*.json`) and
  the schemas of those events (`webhook-schema-subset.json`).

Run from the repository root (needs network access to the npm registry):

    python scripts/vendor_github_data.py            # fetch the pinned versions and rewrite
    python scripts/vendor_github_data.py --from DIR # use tarballs already in DIR

Add an endpoint to OPERATIONS when the bot starts calling it, then rerun.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

OPENAPI_PACKAGE = "@octokit/openapi@23.0.2"
WEBHOOKS_PACKAGE = "@octokit/webhooks-definitions@3.68.1"
OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "github"

# (method, path template) of every REST call the bot (through PyGithub) makes.
OPERATIONS = [
    ("get", "/repos/{owner}/{repo}"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}"),
    ("get", "/repos/{owner}/{repo}/collaborators/{username}/permission"),
    ("get", "/repos/{owner}/{repo}/issues/{issue_number}"),
    ("get", "/repos/{owner}/{repo}/issues"),
    ("post", "/repos/{owner}/{repo}/issues"),
    ("patch", "/repos/{owner}/{repo}/issues/{issue_number}"),
    ("get", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("post", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("get", "/repos/{owner}/{repo}/issues/comments/{comment_id}"),
    ("patch", "/repos/{owner}/{repo}/issues/comments/{comment_id}"),
    ("delete", "/repos/{owner}/{repo}/issues/comments/{comment_id}"),
    ("get", "/repos/{owner}/{repo}/issues/{issue_number}/labels"),
    ("delete", "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}"),
    ("post", "/repos/{owner}/{repo}/statuses/{sha}"),
    ("post", "/repos/{owner}/{repo}/check-runs"),
    ("patch", "/repos/{owner}/{repo}/check-runs/{check_run_id}"),
    ("get", "/repos/{owner}/{repo}/commits/{ref}/check-runs"),
    ("get", "/repos/{owner}/{repo}/commits/{commit_sha}/pulls"),
    ("get", "/repos/{owner}/{repo}/pulls"),
    ("get", "/repos/{owner}/{repo}/issues/{issue_number}/events"),
    ("get", "/repos/{owner}/{repo}/installation"),
    ("post", "/app/installations/{installation_id}/access_tokens"),
]

# (event, action) payloads replayed by the plan tests and the workflow tests (act); the first
# valid example of each is kept. Events without actions (push, workflow_dispatch) use None.
WEBHOOKS: list[tuple[str, str | None]] = [
    ("pull_request", "labeled"),
    ("pull_request", "unlabeled"),
    ("pull_request", "synchronize"),
    ("pull_request", "opened"),
    ("workflow_run", "completed"),
    ("push", None),
    ("workflow_dispatch", None),
]


# Extra conditions on the kept example: the baseline workflow runs on a branch push, not on
# the deleted tag most recorded push examples are.
PREFER: dict[str, Any] = {
    "push": lambda x: str(x.get("ref", "")).startswith("refs/heads/") and not x.get("deleted"),
}


def _definition(event: str, action: str | None) -> str:
    return f"{event}${action or 'event'}"


def _file_name(event: str, action: str | None) -> str:
    return f"{event}.{action}" if action else event


_DROP_KEYS = {"description", "externalDocs", "x-github", "x-octokit", "x-githubEnterpriseOnly"}


def _strip(node: Any, in_properties: bool = False) -> Any:
    """Drop prose and vendor extensions; keep a property that happens to be named so."""
    if isinstance(node, dict):
        return {
            k: _strip(v, in_properties=(k == "properties"))
            for k, v in node.items()
            if in_properties or k not in _DROP_KEYS
        }
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _refs(node: Any) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            found.append(ref)
        for v in node.values():
            found.extend(_refs(v))
    elif isinstance(node, list):
        for v in node:
            found.extend(_refs(v))
    return found


def _resolve_pointer(doc: dict[str, Any], ref: str) -> Any:
    node: Any = doc
    for part in ref.removeprefix("#/").split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _closure(doc: dict[str, Any], roots: Any) -> dict[str, Any]:
    """Every `#/a/b/c` reachable from roots, as a nested dict shaped like the document."""
    out: dict[str, Any] = {}
    todo, seen = _refs(roots), set()
    while todo:
        ref = todo.pop()
        if ref in seen:
            continue
        seen.add(ref)
        target = _resolve_pointer(doc, ref)
        parts = ref.removeprefix("#/").split("/")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = target
        todo.extend(_refs(target))
    return out


def _pack(spec: str, into: Path) -> Path:
    name = (
        subprocess.run(
            ["npm", "pack", spec, "--pack-destination", str(into)],
            check=True,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    return into / name


def _member(tarball: Path, suffix: str) -> Any:
    with tarfile.open(tarball) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(suffix))
        fh = tar.extractfile(member)
        assert fh is not None
        return json.load(fh)


def vendor_openapi(tarball: Path) -> dict[str, Any]:
    doc = _member(tarball, "generated/api.github.com.json")
    paths: dict[str, Any] = {}
    for method, path in OPERATIONS:
        paths.setdefault(path, {})[method] = doc["paths"][path][method]
    subset: dict[str, Any] = {
        "openapi": doc["openapi"],
        "info": {
            "title": doc["info"]["title"],
            "version": doc["info"]["version"],
            "x-vendored-from": OPENAPI_PACKAGE,
            "x-regenerate": "python scripts/vendor_github_data.py",
        },
        "paths": paths,
    }
    subset.update(_closure(doc, paths))
    # Examples are data: a field named `description` in them is kept.
    examples = subset["components"].pop("examples", {})
    subset = _strip(subset)
    subset["components"]["examples"] = examples
    return subset


def vendor_webhooks(tarball: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    import jsonschema  # a dev dependency: run this script from the project's venv

    index = _member(tarball, "package/index.json")
    schema = _member(tarball, "package/schema.json")
    payloads: dict[str, Any] = {}
    for event, action in WEBHOOKS:
        entry = next(e for e in index if e["name"] == event)
        # Some recorded examples predate fields the schema now requires: keep the first one
        # that is valid, so the tests replay what GitHub sends today.
        validator = jsonschema.Draft7Validator(
            {**schema, "$ref": f"#/definitions/{_definition(event, action)}"}
        )
        prefer = PREFER.get(event, lambda x: True)
        example = next(
            x
            for x in entry["examples"]
            if x.get("action") == action and validator.is_valid(x) and prefer(x)
        )
        payloads[_file_name(event, action)] = example
    roots = {_definition(e, a): schema["definitions"][_definition(e, a)] for e, a in WEBHOOKS}
    definitions = {**_closure(schema, roots).get("definitions", {}), **roots}
    subset = {
        "$schema": schema["$schema"],
        "x-vendored-from": WEBHOOKS_PACKAGE,
        "x-regenerate": "python scripts/vendor_github_data.py",
        "definitions": dict(sorted(definitions.items())),
    }
    return payloads, subset


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {path} ({path.stat().st_size // 1024} KiB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", type=Path, help="directory with the tarballs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.source:
            api_tgz = next(args.source.glob("octokit-openapi-*.tgz"))
            hooks_tgz = next(args.source.glob("octokit-webhooks-definitions-*.tgz"))
        else:
            api_tgz = _pack(OPENAPI_PACKAGE, Path(tmp))
            hooks_tgz = _pack(WEBHOOKS_PACKAGE, Path(tmp))
        _write(OUT / "openapi-subset.json", vendor_openapi(api_tgz))
        payloads, schema = vendor_webhooks(hooks_tgz)
        for name, payload in payloads.items():
            _write(OUT / "webhooks" / f"{name}.json", payload)
        _write(OUT / "webhook-schema-subset.json", schema)


if __name__ == "__main__":
    main()
