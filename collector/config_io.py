"""`CollectConfig` as JSON: how the host hands a collection to the collector in a container.

Encoding is driven by the dataclass's fields, so fields added to `CollectConfig` later travel
too as long as they are plain JSON values; a field of a type this module does not know fails
loudly at encode time rather than being dropped.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from collector.canary import Canary
from collector.caseplan import CaseSelector
from collector.engine import CollectConfig
from collector.errors import UserError
from collector.timing import Protocol

CONFIG_SCHEMA = 1
_PLAIN = (str, int, float, bool, type(None))


def _encode(name: str, value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, CaseSelector):
        return value.text
    if isinstance(value, Protocol):
        return value.to_json()
    if isinstance(value, Canary):
        return value.to_json()
    if isinstance(value, (tuple, list)):
        return [_encode(name, v) for v in value]
    if isinstance(value, dict):
        return {str(k): _encode(name, v) for k, v in value.items()}
    if isinstance(value, _PLAIN):
        return value
    raise TypeError(f"CollectConfig.{name}: cannot encode {type(value).__name__} as JSON")


def config_to_json(cfg: CollectConfig) -> dict[str, Any]:
    fields = {f.name: _encode(f.name, getattr(cfg, f.name)) for f in dataclasses.fields(cfg)}
    return {"config_schema": CONFIG_SCHEMA, **fields}


def _selector(value: Any, option: str) -> CaseSelector | None:
    return None if value is None else CaseSelector.parse(str(value), option=option)


def config_from_json(data: Any, source: str = "config") -> CollectConfig:
    if not isinstance(data, dict) or data.get("config_schema") != CONFIG_SCHEMA:
        raise UserError(f"{source}: not a collectbot collection config (config_schema 1)")
    known = {f.name for f in dataclasses.fields(CollectConfig)}
    values = {k: v for k, v in data.items() if k != "config_schema"}
    unknown = sorted(set(values) - known)
    if unknown:
        raise UserError(f"{source}: unknown field {unknown[0]!r} (collector and host differ?)")
    if "out" not in values:
        raise UserError(f"{source}: missing field 'out'")
    kwargs: dict[str, Any] = dict(values)
    kwargs["out"] = Path(values["out"])
    for name in ("case_file", "rules_file"):
        if values.get(name) is not None:
            kwargs[name] = Path(values[name])
    if values.get("shard") is not None:
        kwargs["shard"] = tuple(int(v) for v in values["shard"])
    if "ops" in values:
        kwargs["ops"] = tuple(values["ops"])
    if "case_filter" in values:
        kwargs["case_filter"] = _selector(values["case_filter"], "case_filter")
    if "protocol" in values:
        try:
            kwargs["protocol"] = Protocol(**values["protocol"])
        except (TypeError, ValueError) as exc:
            raise UserError(f"{source}: field 'protocol': {exc}") from None
    if "canary" in values:
        kwargs["canary"] = Canary.from_json(values["canary"])
    if "command" in values:
        kwargs["command"] = [str(c) for c in values["command"]]
    return CollectConfig(**kwargs)


def write_config(cfg: CollectConfig, path: Path) -> None:
    path.write_text(json.dumps(config_to_json(cfg), indent=2, sort_keys=True) + "\n")


def read_config(path: Path) -> CollectConfig:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: unreadable config ({exc})") from None
    return config_from_json(data, str(path))
