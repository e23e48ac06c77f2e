"""The `--trust` option of `image ensure|build` and `collect` (bot/images/trust.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from bot.images.trust import TRUST_ENV

TrustOpt = Annotated[
    str,
    typer.Option(
        "--trust",
        envvar=TRUST_ENV,
        help="The job's trust level: untrusted (pull request jobs) or trusted (the default "
        "branch's baseline: builds its own image without cache, runs it by id, writes the "
        "persistent JIT cache).",
    ),
]
