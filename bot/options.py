"""CLI options derived from declared settings (`collector.settings`), so each is typed once.

`settings_options(Protocol, "protocol")` replaces a command's `protocol` parameter with one
Typer option per declared field, in the parameter's place, and hands the command a
`Protocol` built from them.
"""

from __future__ import annotations

import functools
import inspect
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
    return inspect.Parameter(
        d.name,
        inspect.Parameter.KEYWORD_ONLY,
        default=d.default,
        annotation=Annotated[annotation, typer.Option(*decls, **kwargs)],
    )


def settings_options(
    cls: type, param: str, names: tuple[str, ...] | None = None
) -> Callable[[F], F]:
    """Replace `param` of the decorated command with options for `cls`'s declared fields.

    With `names`, only those fields become options (the rest keep their defaults)."""
    fields = declared(cls, names)

    def decorate(func: F) -> F:
        sig = inspect.signature(func, eval_str=True)
        params: list[inspect.Parameter] = []
        for p in sig.parameters.values():
            if p.name == param:
                params += [_parameter(d) for d in fields]
            else:
                params.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY))
        clash = {d.name for d in fields} & (set(sig.parameters) - {param})
        if clash or param not in sig.parameters:
            raise TypeError(f"{func.__name__}: no parameter {param!r}, or names clash: {clash}")

        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            values = {d.name: kwargs.pop(d.name) for d in fields}
            return func(**kwargs, **{param: cls(**values)})

        command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        return command  # type: ignore[return-value]

    return decorate
