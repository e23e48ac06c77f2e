"""The repository's CI config file (`.github/collectbot.yml`): thresholds and case sets.

Its statistics keys are the fields of the comparison's `Settings` (defaults declared there,
bounds in comparison.schema.json's `settings`); a key left out keeps the default. Besides
them, `case_sets` maps a trigger label to the case set it collects when the label names none.
Every defect is one `error:` line naming the file and the key.

    min_effect: 0.02            # smallest relative change that can be a verdict
    alpha: 0.05                 # false discovery rate across cases
    min_effect_overrides:       # per op, per dtype, or both (the most specific wins)
      - {op: gemm, dtype: fp8, min_effect: 0.03}
    case_sets:
      collect/vllm: smoke
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from typing import Any

from bot.compare.stats import MinEffectOverride, Settings
from collector.errors import UserError

DEFAULT_PATH = Path(".github/collectbot.yml")
CASE_SETS = "case_sets"
OVERRIDES = "min_effect_overrides"
_CASE_SET = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@cache
def _settings_schema() -> dict[str, Any]:
    """Each settings key's JSON Schema, from comparison.schema.json (one declaration)."""
    from bot.compare.comparison import SCHEMA_FILE

    schema = json.loads(SCHEMA_FILE.read_text())
    props: dict[str, Any] = schema["properties"]["settings"]["properties"]
    missing = {f.name for f in fields(Settings)} - set(props)
    assert not missing, f"comparison.schema.json lacks settings {sorted(missing)}"
    return props


@dataclass(frozen=True)
class CiConfig:
    """A validated config file: the settings it sets and its label -> case set map."""

    source: str
    settings: dict[str, Any] = field(default_factory=dict)
    case_sets: dict[str, str] = field(default_factory=dict)

    def apply(self, base: Settings | None = None) -> Settings:
        values = dict(self.settings)
        if OVERRIDES in values:
            values[OVERRIDES] = tuple(MinEffectOverride(**o) for o in values[OVERRIDES])
        return replace(base or Settings(), **values)

    def case_set_for(self, label: str) -> str | None:
        """The case set for a trigger label that names none (`@<case-set>` wins)."""
        return None if "@" in label else self.case_sets.get(label)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "settings": self.settings, CASE_SETS: self.case_sets}

    @classmethod
    def from_json(cls, data: Any, source: str) -> CiConfig:
        """Validate a loaded document (the file's, or one a plan carries)."""
        import jsonschema

        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise UserError(f"{source}: must be a mapping of settings, not {type(data).__name__}")
        if "settings" in data and "source" in data:  # a plan's copy (to_json's shape)
            data = {**data["settings"], CASE_SETS: data.get(CASE_SETS) or {}}
        schema = _settings_schema()
        settings: dict[str, Any] = {}
        for key, value in data.items():
            if key == CASE_SETS:
                continue
            if key not in schema:
                known = ", ".join([*schema, CASE_SETS])
                raise UserError(f"{source}: unknown key {str(key)!r:.60} (known: {known})")
            errors = list(jsonschema.Draft202012Validator(schema[key]).iter_errors(value))
            if errors:
                raise UserError(f"{source}: key {key!r}: {errors[0].message[:200]}")
            settings[key] = value
        for item in settings.get(OVERRIDES, []):
            item.setdefault("op", None)
            item.setdefault("dtype", None)
            _check_op(item["op"], source)
        return cls(source, settings, _case_sets(data.get(CASE_SETS), source))


def _check_op(op: str | None, source: str) -> None:
    from collector.ops import OPS

    if op is not None and op not in OPS:
        raise UserError(
            f"{source}: key {OVERRIDES!r}: unknown op {op!r:.60} (known: {', '.join(OPS)})"
        )


def _case_sets(value: Any, source: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"{source}: key {CASE_SETS!r}: must map labels to case set names")
    for label, name in value.items():
        if not isinstance(label, str) or not isinstance(name, str) or not _CASE_SET.match(name):
            raise UserError(
                f"{source}: key {CASE_SETS!r}: {label!r:.60} must map to a case set name "
                f"(letters, digits, '_', '.', '-'), not {name!r:.60}"
            )
    return dict(value)


def load_ci_config(path: Path | None, *, default: Path = DEFAULT_PATH) -> CiConfig | None:
    """The config at `path` (which must exist), else at `default` when there is one."""
    import yaml

    target = path if path is not None else default
    if not target.is_file():
        if path is not None:
            raise UserError(f"{path}: config file not found")
        return None
    try:
        data = yaml.safe_load(target.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{target}: not valid YAML ({first[:200]})") from None
    return CiConfig.from_json(data, str(target))


def settings_line(settings: dict[str, Any]) -> str:
    """The settings a comparison used, as one line of plain text for the comment."""
    parts = [
        f"minimum effect {settings['min_effect'] * 100:g}%",
        f"FDR {settings['alpha'] * 100:g}%",
        f"noise x{settings['noise_mult']:g}",
        f"{settings['confidence'] * 100:g}% intervals",
    ]
    for o in settings.get(OVERRIDES) or []:
        scope = " ".join(str(x) for x in (o.get("op"), o.get("dtype")) if x)
        parts.append(f"{scope}: minimum effect {o['min_effect'] * 100:g}%")
    return ", ".join(parts)
