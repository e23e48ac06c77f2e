"""GitHub's OpenAPI description (the vendored subset) as routes and JSON-schema validators.

OpenAPI 3.0 schemas are JSON Schema with a few differences; the one GitHub's description
relies on is `nullable`, which becomes a `null` type here. `$ref`s resolve into the
document's `components`.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

SUBSET = Path(__file__).resolve().parent.parent / "data" / "github" / "openapi-subset.json"


def to_json_schema(node: Any) -> Any:
    if isinstance(node, list):
        return [to_json_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: to_json_schema(v) for k, v in node.items()}
    if out.pop("nullable", False):
        if "type" in out:
            types = out["type"] if isinstance(out["type"], list) else [out["type"]]
            out["type"] = [*types, "null"]
            if "enum" in out and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
        else:
            return {"anyOf": [out, {"type": "null"}]}
    return out


class OpenApi:
    def __init__(self, path: Path = SUBSET) -> None:
        raw = json.loads(path.read_text())
        self.doc = raw
        self.components = to_json_schema(raw["components"])
        self.routes: list[tuple[str, re.Pattern[str], dict[str, Any], list[str]]] = []
        for template, methods in raw["paths"].items():
            names = re.findall(r"{([^}]+)}", template)
            pattern = re.compile("^" + re.sub(r"{[^}]+}", "([^/]+)", template) + "$")
            for method, op in methods.items():
                self.routes.append((method.upper(), pattern, op, names))
        self._validators: dict[str, jsonschema.protocols.Validator] = {}

    def resolve(self, node: Any) -> Any:
        while isinstance(node, dict) and "$ref" in node:
            target: Any = self.doc
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            node = target
        return node

    def match(self, method: str, path: str) -> tuple[dict[str, Any], dict[str, str]] | None:
        for verb, pattern, op, names in self.routes:
            m = pattern.match(path)
            if verb == method and m:
                return op, dict(zip(names, m.groups(), strict=True))
        return None

    def _validator(self, key: str, schema: dict[str, Any]) -> jsonschema.protocols.Validator:
        if key not in self._validators:
            root = {"components": self.components, **to_json_schema(copy.deepcopy(schema))}
            self._validators[key] = jsonschema.Draft202012Validator(root)
        return self._validators[key]

    def _errors(self, key: str, schema: dict[str, Any], value: Any) -> list[str]:
        validator = self._validator(key, schema)
        return [
            f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message[:300]}"
            for e in validator.iter_errors(value)
        ][:10]

    def parameters(self, op: dict[str, Any]) -> list[dict[str, Any]]:
        return [self.resolve(p) for p in op.get("parameters", [])]

    def request_errors(
        self,
        op: dict[str, Any],
        path_params: dict[str, str],
        query: dict[str, list[str]],
        body: Any,
        has_body: bool,
    ) -> list[str]:
        op_id = op["operationId"]
        errors = []
        params = self.parameters(op)
        by_place = {(p["in"], p["name"]): p for p in params}
        for name, value in path_params.items():
            p = by_place.get(("path", name))
            if p is None:
                errors.append(f"{op_id}: undeclared path parameter {name}")
                continue
            errors += [
                f"{op_id}: path {name}: {e}"
                for e in self._errors(f"{op_id}:path:{name}", p["schema"], _coerce(value, p))
            ]
        for name, values in query.items():
            p = by_place.get(("query", name))
            if p is None:
                errors.append(f"{op_id}: undeclared query parameter {name!r}")
                continue
            for value in values:
                errors += [
                    f"{op_id}: query {name}: {e}"
                    for e in self._errors(f"{op_id}:query:{name}", p["schema"], _coerce(value, p))
                ]
        request = op.get("requestBody")
        if request is None:
            if has_body:
                errors.append(f"{op_id}: sends a body, but the operation takes none")
            return errors
        request = self.resolve(request)
        if not has_body:
            if request.get("required"):
                errors.append(f"{op_id}: request body is required")
            return errors
        schema = request["content"]["application/json"]["schema"]
        errors += [f"{op_id}: body {e}" for e in self._errors(f"{op_id}:request", schema, body)]
        return errors

    def response_errors(self, op: dict[str, Any], status: int, body: Any) -> list[str]:
        op_id = op["operationId"]
        responses = op["responses"]
        spec = responses.get(str(status))
        if spec is None:
            if status >= 400:
                # Errors GitHub may answer on any operation (rate limits, 401) are basic-errors.
                schema = {"$ref": "#/components/schemas/basic-error"}
                return [f"{op_id} {status}: {e}" for e in self._errors("basic-error", schema, body)]
            return [f"{op_id}: status {status} is not a documented response"]
        spec = self.resolve(spec)
        content = (spec.get("content") or {}).get("application/json")
        if content is None:
            return [] if body is None else [f"{op_id} {status}: documented without a body"]
        return [
            f"{op_id} {status}: {e}"
            for e in self._errors(f"{op_id}:{status}", content["schema"], body)
        ]


def _coerce(value: str, param: dict[str, Any]) -> Any:
    typ = (param.get("schema") or {}).get("type")
    if typ == "integer":
        try:
            return int(value)
        except ValueError:
            return value
    return value


@cache
def openapi() -> OpenApi:
    return OpenApi()


def example(name: str) -> Any:
    """An official example from the description, e.g. `issue-comment` or `pull-request`."""
    return copy.deepcopy(openapi().doc["components"]["examples"][name]["value"])
