"""Write docs/cli.md, the CLI reference, from the Typer app: `python -m bot.docs_cli [PATH]`.

`--check` exits 1 when the page on disk is not what the app would write (tests run it).
"""

from __future__ import annotations

import sys
import typing
from pathlib import Path
from typing import Any

import typer

from bot.cli import app
from bot.compare.stats import Settings
from collector.settings import declared
from collector.timing import Protocol

# Units of the declared settings, by their parameter name.
UNITS = {d.name: d.setting.unit for cls in (Protocol, Settings) for d in declared(cls)}

PAGE = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
HEADER = """# CLI reference

Generated from the Typer app by `python -m bot.docs_cli`; do not edit by hand
(`tests/test_docs_cli.py` fails when this page and the CLI differ). The protocol and
comparison settings are declared once, in `collector/timing.py` (`Protocol`) and
`bot/compare/stats.py` (`Settings`); their options here are derived from those declarations.
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _default(param: Any) -> str:
    value = param.default
    if param.required or value is None or value == () or callable(value):
        return ""
    if value == sys.executable:
        return "the running Python"
    if isinstance(value, bool):
        return f"`{(param.opts if value else param.secondary_opts or ['off'])[0]}`"
    return f"`{value}`"


def _accepts(param: Any) -> str:
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if typing.get_origin(annotation) is typing.Literal:
        return " \\| ".join(f"`{c}`" for c in typing.get_args(annotation))
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if low is not None and high is not None:
        return f"{low} to {high}"
    if low is not None:
        return f">= {low}"
    return ""


def _option_rows(command: Any) -> list[str]:
    rows = ["| option | default | accepts | unit | what |", "| --- | --- | --- | --- | --- |"]
    for param in command.params:
        names = " / ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
        if not param.opts[0].startswith("-"):
            names = f"`{param.name.upper()}` (argument)"
        what = _cell(param.help or "")
        if getattr(param, "envvar", None):
            what += f" Env: `{param.envvar}`."
        unit = UNITS.get(param.name, "")
        rows.append(f"| {names} | {_default(param)} | {_accepts(param)} | {unit} | {what} |")
    return rows


def _sections(command: Any, path: list[str]) -> list[str]:
    out: list[str] = []
    subcommands = getattr(command, "commands", None)
    if path:
        out += ["", f"{'#' * min(len(path) + 1, 4)} `collectbot {' '.join(path)}`", ""]
        out.append((command.help or "").strip())
        if not subcommands and command.params:
            out += ["", *_option_rows(command)]
    for name, sub in (subcommands or {}).items():
        out += _sections(sub, [*path, name])
    return out


def render() -> str:
    root = typer.main.get_command(app)
    return "\n".join([HEADER.rstrip("\n"), *_sections(root, [])]) + "\n"


USAGE = "usage: python -m bot.docs_cli [--check] [PAGE]  (default page: docs/cli.md)"


def main(argv: list[str]) -> int:
    if "-h" in argv or "--help" in argv:
        print(USAGE)
        return 0
    check = "--check" in argv
    paths = [a for a in argv if a != "--check"]
    if len(paths) > 1 or any(a.startswith("-") for a in paths):
        print(f"error: unexpected arguments {' '.join(paths)}; {USAGE}", file=sys.stderr)
        return 2
    page = Path(paths[0]) if paths else PAGE
    text = render()
    if check:
        if not page.is_file() or page.read_text() != text:
            print(f"error: {page} is out of date: run python -m bot.docs_cli", file=sys.stderr)
            return 1
        return 0
    page.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
