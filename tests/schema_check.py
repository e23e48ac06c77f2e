"""Validate comparison.json documents against the versioned JSON Schema in the repository."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from bot.compare.comparison import SCHEMA_FILE


@cache
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


def assert_valid_comparison(source: Path | dict[str, Any]) -> dict[str, Any]:
    """The document (a dict, comparison.json, or its directory), after validating it."""
    if isinstance(source, Path):
        path = source / "comparison.json" if source.is_dir() else source
        data: dict[str, Any] = json.loads(path.read_text())
    else:
        data = json.loads(json.dumps(source))  # exactly what write_comparison would store
    errors = sorted(validator().iter_errors(data), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:10]
    )
    return data
