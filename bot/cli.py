"""collectbot: collect kernel performance, compare it with a baseline, render the evidence.

Each subcommand is a plain function (or a sub-app) in its own module under `bot/commands/`;
this module builds the Typer app and registers them, so no command module imports it.
"""

from __future__ import annotations

import importlib
import sys
import typing
from pathlib import Path
from typing import Any

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
    track,
)
from bot.errors import EXIT_USER_ERROR, one_line

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
# A command is named after its function (`import_aic`: import-aic), a group by its Typer app.
COMMANDS: tuple[Any, ...] = (
    bundle.bundle,
    campaign.campaign,
    collect.collect,
    compare.compare,
    result.result_app,
    conclude.conclude,
    demo.demo,
    image.image_app,
    import_aic.import_aic,
    merge.merge,
    plan.plan,
    publish.publish,
    render.render,
    history.history,
    history.site,
    store.store_app,
    track.track,
)
for command in COMMANDS:
    if isinstance(command, typer.Typer):
        app.add_typer(command)
    else:
        app.command()(command)


# Click's exception classes, from the module Typer raises them from (Typer vendors its own
# copy of click in recent releases; `BadParameter` is the one it re-exports).
_click_errors = importlib.import_module(typer.BadParameter.__module__)

# What a value's type reads as in `--help` (Typer's own labels are `<list[Path]>`, `<bool>`).
_TYPE_LABELS: dict[Any, str] = {str: "TEXT", int: "INT", float: "NUMBER", Path: "PATH"}


def _value_label(param: Any) -> str:
    """`PATH`, `INT`, `a|b`...: from Typer's type descriptor, or click's type in older Typer."""
    desc = getattr(param, "type_descriptor", None)
    if desc is None:
        return str(param.type.name).upper()
    if desc.is_choice and desc.choices:
        return "|".join(str(c) for c in desc.choices)
    annotation = desc.annotation
    if typing.get_origin(annotation) is list:
        (annotation,) = typing.get_args(annotation)
    return _TYPE_LABELS.get(annotation, getattr(annotation, "__name__", "VALUE").upper())


def _readable_metavars(command: Any) -> None:
    """Give every parameter of `command` and its subcommands a metavar that reads naturally:
    none for a flag, `RUNS...` for an argument, `PATH`, `INT`, `a|b` for an option's value."""
    for sub in getattr(command, "commands", {}).values():
        _readable_metavars(sub)
    make_help_option = command.get_help_option

    def help_option(ctx: Any) -> Any:  # click makes --help per context, outside `params`
        option = make_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = help_option
    for param in command.params:
        if param.metavar is not None:
            continue
        if getattr(param, "is_flag", False) or getattr(param, "is_bool_flag", False):
            param.metavar = ""
        elif param.param_type_name == "argument":
            # Typer shows an argument's metavar as its name and ignores it for the type column.
            label = _value_label(param) + ("..." if param.nargs != 1 else "")
            param.metavar = param.name.upper()
            param.display_type_rich = lambda ctx, label=label: label
        else:
            param.metavar = _value_label(param)


def main(args: list[str] | None = None) -> int:
    """The `collectbot` console script: a usage error is one `error:` line and exit 2, like
    every other user error (`bot.errors`); `--help`, `--version` and exit codes are Typer's."""
    command = typer.main.get_command(app)
    _readable_metavars(command)
    try:
        code = command.main(args=args, prog_name="collectbot", standalone_mode=False)
    except _click_errors.NoArgsIsHelpError as exc:
        exc.show()
        return int(exc.exit_code)
    except _click_errors.ClickException as exc:
        print(f"error: {one_line(exc.format_message())}", file=sys.stderr)
        return EXIT_USER_ERROR
    except typer.Abort:
        print("error: aborted", file=sys.stderr)
        return 1
    return code if isinstance(code, int) else 0
