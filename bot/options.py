"""CLI options derived from declared settings (`collector.settings`), so each is typed once.

`settings_options(Protocol, "protocol")` replaces a command's `protocol` parameter with one
Typer option per declared field, in the parameter's place, and hands the command a
`Protocol` built from them. `option_group` does the same for a dataclass of Typer options
that several commands take together (bot/commands/github_options.py).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import typer

from collector.settings import Declared, declared

F = TypeVar("F", bound=Callable[..., Any])


def _parameter(d: Declared) -> inspect.Parameter:
    spec = d.setting
    decls = [f"{d.flag}/--no-{spec.cli}"] if d.type is bool else [d.flag]
    kwargs: dict[str, Any] = {"help": spec.help}
    if spec.min is not None:
        kwargs["min"] = spec.min
    if spec.max is not None:
        kwargs["max"] = spec.max
    annotation: Any = Literal.__getitem__(spec.choices) if spec.choices else d.type
    if spec.parse is not None:  # a repeatable option, one item each time
        kwargs["parser"] = _item_parser(d)
        annotation = list[Any]
    return inspect.Parameter(
        d.name,
        inspect.Parameter.KEYWORD_ONLY,
        default=d.default,
        annotation=Annotated[annotation, typer.Option(*decls, **kwargs)],
    )


def _item_parser(d: Declared) -> Callable[[str], Any]:
    parse = d.setting.parse
    assert parse is not None

    def item(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None

    return item


def settings_options(
    cls: type, param: str, names: tuple[str, ...] | None = None
) -> Callable[[F], F]:
    """Replace `param` of the decorated command with options for `cls`'s declared fields.

    With `names`, only those fields become options (the rest keep their defaults)."""
    fields = declared(cls, names)

    def build(values: dict[str, Any]) -> Any:
        for d in fields:
            if d.setting.parse is not None:  # Typer hands a repeated option over as a list
                values[d.name] = tuple(values[d.name] or ())
        return cls(**values)

    return _spread(param, [_parameter(d) for d in fields], build)


def option_group(cls: type, param: str) -> Callable[[F], F]:
    """Replace `param` of the decorated command with one option per field of the dataclass
    `cls` (each field typed with its Typer option, an `Annotated` alias, and defaulted)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = [
        inspect.Parameter(
            f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=hints[f.name]
        )
        for f in dataclasses.fields(cls)
    ]
    return _spread(param, fields, lambda values: cls(**values))


def _spread(
    param: str, options: list[inspect.Parameter], build: Callable[[dict[str, Any]], Any]
) -> Callable[[F], F]:
    """The decorator: `options` stand in `param`'s place; the command gets `build(values)`."""
    names = [o.name for o in options]

    def decorate(func: F) -> F:
        sig = inspect.signature(func, eval_str=True)
        params: list[inspect.Parameter] = []
        for p in sig.parameters.values():
            if p.name == param:
                params += options
            else:
                params.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY))
        clash = set(names) & (set(sig.parameters) - {param})
        if clash or param not in sig.parameters:
            raise TypeError(f"{func.__name__}: no parameter {param!r}, or names clash: {clash}")

        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            values = {name: kwargs.pop(name) for name in names}
            return func(**kwargs, **{param: build(values)})

        command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        return command  # type: ignore[return-value]

    return decorate


def options_given(ctx: typer.Context, cls: type) -> set[str]:
    """The declared fields of `cls` that the command line (or environment) set, as opposed
    to left at their declared defaults: what wins over a config file."""
    given = ("COMMANDLINE", "ENVIRONMENT")
    sources = {d.name: ctx.get_parameter_source(d.name) for d in declared(cls)}
    return {name for name, source in sources.items() if source and source.name in given}
