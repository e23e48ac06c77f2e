"""collectbot: collect kernel performance, compare it with a baseline, render the evidence.

Each subcommand lives in its own module under `bot/commands/` and registers itself on `app`.
"""

from __future__ import annotations

import typer

from bot import __version__

app = typer.Typer(
    help=(
        "Collect GPU kernel performance for a pull request, compare it with a baseline and "
        "render the evidence comment. Each stage reads and writes plain files."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"collectbot {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_print_version, help="Print the version."
    ),
) -> None:
    del version  # handled by its callback; the app's help text is the Typer app's, above


# Registration order is the order `--help` lists the commands in.
from bot.commands import (  # noqa: E402, F401
    bundle,
    campaign,
    collect,
    compare,
    conclude,
    demo,
    history,
    image,
    import_aic,
    merge,
    plan,
    publish,
    render,
    result,
    store,
)
