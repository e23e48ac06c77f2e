"""Settings declared once: a dataclass field that carries its default, unit, help and CLI name.

`setting(...)` is a `dataclasses.field` whose metadata the CLI options, the reproduce command
and the reference page are derived from; the JSON forms (run.json, the container's config)
come from the dataclass itself. Nothing here imports the CLI library.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_KEY = "collectbot.setting"


@dataclass(frozen=True)
class Setting:
    """What a user reads about one field, and how the command line spells it."""

    help: str
    # Option name without dashes ("runs" -> --runs; a bool also gets --no-<name>).
    cli: str
    unit: str = ""
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()
    # A tuple-valued field: one item per repetition of the option, read by `parse` (which
    # raises ValueError) and written back by `show`.
    parse: Callable[[str], Any] | None = None
    show: Callable[[Any], str] | None = None


@dataclass(frozen=True)
class Declared:
    """One declared field: its name, Python type, default and `Setting`."""

    name: str
    type: Any
    default: Any
    setting: Setting

    @property
    def flag(self) -> str:
        return f"--{self.setting.cli}"


def setting(
    default: Any,
    *,
    help: str,
    cli: str = "",
    unit: str = "",
    min: float | None = None,
    max: float | None = None,
    choices: tuple[str, ...] = (),
    parse: Callable[[str], Any] | None = None,
    show: Callable[[Any], str] | None = None,
) -> Any:
    """A dataclass field with its user-facing declaration (CLI name defaults to the field's)."""
    meta = {
        "help": help,
        "cli": cli,
        "unit": unit,
        "min": min,
        "max": max,
        "choices": choices,
        "parse": parse,
        "show": show,
    }
    return dataclasses.field(default=default, metadata={_KEY: meta})


def declared(cls: type, names: tuple[str, ...] | None = None) -> list[Declared]:
    """The declared fields of a settings dataclass, in declaration order (or `names`' order)."""
    hints = typing.get_type_hints(cls)
    out: dict[str, Declared] = {}
    for f in dataclasses.fields(cls):
        meta = f.metadata.get(_KEY)
        if meta is None:
            continue
        spec = Setting(**{**meta, "cli": meta["cli"] or f.name.replace("_", "-")})
        out[f.name] = Declared(f.name, hints[f.name], f.default, spec)
    if names is None:
        return list(out.values())
    return [out[n] for n in names]


def cli_args(value: Any, names: tuple[str, ...] | None = None, every: bool = False) -> list[str]:
    """The options that reproduce `value`: the settings that differ from their defaults (with
    `every`, all of them, so that a later change of a default does not change the result)."""
    args: list[str] = []
    for d in declared(type(value), names):
        current = getattr(value, d.name)
        if current == d.default and not every:
            continue
        if isinstance(current, bool):
            args.append(d.flag if current else f"--no-{d.setting.cli}")
        elif d.setting.show is not None:
            for item in current:
                args += [d.flag, d.setting.show(item)]
        else:
            args += [d.flag, str(current)]
    return args
