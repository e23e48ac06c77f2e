"""Each setting is declared once (collector/settings.py) and reaches every place it must.

Adding a field to `Protocol` or `Settings` is one declaration: these tests fail if it does
not then appear in the CLI, the reproduce command, the container's config and run.json (or,
for the comparison, the CLI, the recompute command and comparison.json).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from bot.cli import app
from bot.collect_command import collect_command
from bot.commands.campaign import ROUND_PROTOCOL, ROUND_SETTINGS
from bot.compare.stats import Settings
from collector.config_io import config_from_json, config_to_json
from collector.engine import CollectConfig
from collector.settings import Declared, cli_args, declared
from collector.timing import Protocol

runner = CliRunner()


def _command(*path: str) -> Any:
    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return command


def _options(*path: str) -> dict[str, Any]:
    return {p.name: p for p in _command(*path).params if p.opts[0].startswith("--")}


def _parse(args: list[str], *path: str) -> dict[str, Any]:
    """The values a command line gives the command's parameters, without running it."""
    return dict(_command(*path).make_context(path[-1], list(args)).params)


# A valid item of each repeatable (tuple-valued) option, in its command-line form.
ITEMS = {"min_effect_overrides": "gemm/float16=0.03"}


def _other(d: Declared) -> Any:
    """A valid value for the field that is not its default."""
    if d.setting.parse is not None:
        return (d.setting.parse(ITEMS[d.name]),)
    if d.type is bool:
        return not d.default
    if d.setting.choices:
        return next(c for c in d.setting.choices if c != d.default)
    low = d.setting.min if d.setting.min is not None else float("-inf")
    high = d.setting.max if d.setting.max is not None else float("inf")
    for candidate in (d.default + 1, d.default / 2, d.default * 0.9, d.default - 1):
        value = d.type(candidate)
        if low <= value <= high and value != d.default:
            return value
    raise AssertionError(f"no other valid value for {d.name}")


def _built(cls: type, params: dict[str, Any]) -> Any:
    """`cls` from parsed options (a repeated option arrives as a list)."""
    return cls(
        **{
            d.name: tuple(params[d.name]) if d.setting.parse else params[d.name]
            for d in declared(cls)
        }
    )


def _changed(cls: type) -> Any:
    return cls(**{d.name: _other(d) for d in declared(cls)})


@pytest.mark.parametrize("cls", [Protocol, Settings])
def test_every_field_is_declared(cls: type) -> None:
    names = {f.name for f in dataclasses.fields(cls)}
    assert {d.name for d in declared(cls)} == names
    for d in declared(cls):
        assert len(d.setting.help) > 8, d.name


@pytest.mark.parametrize(("cls", "path"), [(Protocol, ("collect",)), (Settings, ("compare",))])
def test_every_field_is_an_option_with_its_declared_default(
    cls: type, path: tuple[str, ...]
) -> None:
    options = _options(*path)
    required = ["base", "cand", "--out", "cmp"] if path == ("compare",) else []
    for d in declared(cls):
        option = options[d.name]
        assert d.flag in option.opts, d.name
        assert option.default == d.default, d.name
        assert option.help == d.setting.help, d.name
        for choice in d.setting.choices:
            assert _parse([*required, d.flag, choice], *path)[d.name] == choice
        if d.setting.choices:
            result = runner.invoke(app, [*path, *required, d.flag, "bogus"])
            assert result.exit_code == 2 and "bogus" in result.output


def test_the_campaign_offers_its_round_options_with_the_same_declaration() -> None:
    options = _options("campaign")
    for cls, names in ((Protocol, ROUND_PROTOCOL), (Settings, ROUND_SETTINGS)):
        for d in declared(cls, names):
            assert options[d.name].default == d.default
            assert options[d.name].help == d.setting.help


def test_a_reproduce_command_parses_back_to_the_same_protocol(tmp_path: Path) -> None:
    protocol = _changed(Protocol)
    cfg = CollectConfig(out=tmp_path / "run", protocol=protocol)
    command = collect_command(cfg)
    for d in declared(Protocol):
        assert d.flag in command or f"--no-{d.setting.cli}" in command, d.name
    params = _parse(command[2:], "collect")
    assert Protocol(**{d.name: params[d.name] for d in declared(Protocol)}) == protocol
    # At the defaults nothing is spelled out.
    assert cli_args(Protocol()) == []


def test_the_container_config_carries_every_protocol_field(tmp_path: Path) -> None:
    protocol = _changed(Protocol)
    data = json.loads(json.dumps(config_to_json(CollectConfig(out=tmp_path, protocol=protocol))))
    assert set(data["protocol"]) == {d.name for d in declared(Protocol)}
    assert config_from_json(data).protocol == protocol


def test_the_framework_version_goes_before_the_out_option(tmp_path: Path) -> None:
    command = collect_command(CollectConfig(out=tmp_path / "run"), framework_version="0.24.0")
    assert command[-4:] == ["--framework-version", "0.24.0", "--out", str(tmp_path / "run")]


def test_run_json_records_every_protocol_field_and_its_reproduce_command(
    tmp_path: Path,
) -> None:
    # A real (CPU, in-process) collection through the CLI, every setting off its default.
    fast = {"runs": 3, "samples": 3, "warmup": 1, "target_sample_ms": 0.05, "min_runs": 2}
    protocol = dataclasses.replace(_changed(Protocol), cooldown_s=0.0, **fast)
    cfg = CollectConfig(
        out=tmp_path / "run", case_set="smoke", limit=1, workers=0, protocol=protocol
    )
    command = collect_command(cfg)
    result = runner.invoke(app, [*command[1:], "--quiet"])
    assert result.exit_code == 0, result.output
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["protocol"] == dataclasses.asdict(protocol)
    assert meta["command"] == command


def test_a_recompute_command_parses_back_to_the_same_settings() -> None:
    settings = _changed(Settings)
    args = cli_args(settings, every=True)
    for d in declared(Settings):
        assert d.flag in args, d.name
    params = _parse(["base", "cand", "--out", "cmp", *args], "compare")
    assert _built(Settings, params) == settings
    assert set(settings.to_json()) == {d.name for d in declared(Settings)}
