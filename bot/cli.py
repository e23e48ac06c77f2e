"""collectbot: collect kernel performance, compare it with a baseline, render the evidence.

Each subcommand lives in its own module under `bot/commands/` and registers itself on `app`.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    help=(
        "Collect GPU kernel performance for a pull request, compare it with a baseline and "
        "render the evidence comment. Each stage reads and writes plain files."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Registration order is the order `--help` lists the commands in.
from bot.commands import (  # noqa: E402, F401
    bundle,
    campaign,
    collect,
    compare,
    conclude,
    demo,
    image,
    import_aic,
    merge,
    plan,
    publish,
    render,
    result,
    store,
)
