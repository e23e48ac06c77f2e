"""The Jinja environment every renderer starts from: a package's templates, block tags that
leave no blank lines behind, and an error for any undefined name (never an empty string)."""

from __future__ import annotations

from typing import Any

import jinja2


def template_environment(package: str = "bot.render", **options: Any) -> jinja2.Environment:
    """Jinja for `package`'s templates; `options` are the renderer's own (escaping first)."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader(package, "templates"),
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
        **options,
    )
