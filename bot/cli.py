"""collectbot: collect kernel performance, compare it with a baseline, render the evidence.

Each subcommand is a plain function (or a sub-app) in its own module under `bot/commands/`;
this module builds the Typer app and registers them, so no command module imports it.
"""

from __future__ import annotations

import typer

from bot import __version__
from bot.commands import (
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


# Registration order is the order `--help` lists the commands in (groups after commands).
app.command()(bundle.bundle)
app.command()(campaign.campaign)
app.command()(collect.collect)
app.command()(compare.compare)
app.add_typer(result.result_app, name="result")
app.command()(conclude.conclude)
app.command()(demo.demo)
app.add_typer(image.image_app, name="image")
app.command("import-aic")(import_aic.import_aic)
app.command()(merge.merge)
app.command()(plan.plan)
app.command()(publish.publish)
app.command()(render.render)
app.command()(history.history)
app.command()(history.site)
app.add_typer(store.store_app, name="store")
