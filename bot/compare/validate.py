"""Validate a comparison.json document against its versioned JSON Schema.

The trusted publisher renders comments from comparisons that untrusted jobs wrote: it accepts
one only when it matches the schema, so the renderer never meets a shape it does not know.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from bot.compare.comparison import SCHEMA_FILE
from collector.errors import UserError


@cache
def _validator() -> Any:
    import jsonschema

    schema = json.loads(SCHEMA_FILE.read_text())
    return jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


def validate_comparison(data: Any, source: str) -> dict[str, Any]:
    """The document, or a one-line error naming the first field that breaks the schema."""
    errors = sorted(_validator().iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(map(str, first.absolute_path)) or "(top level)"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise UserError(f"{source}: {where}: {first.message[:300]}{more}")
    assert isinstance(data, dict)
    return data
