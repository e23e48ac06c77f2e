"""The typed contracts agree with what is written and with the JSON Schema.

comparison.json (`ComparisonDoc`) and its listed cases (`CaseRow`) against
bot/compare/comparison.schema.json, key for key and type for type; the case table
(cases.parquet) against `CASE_TABLE_SCHEMA`; run.json against `RunMeta`, from which the
reader's checks are made.
"""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any, Required, Union, get_args, get_origin, get_type_hints

import pyarrow.parquet as pq
import pytest

from bot.compare.comparison import SCHEMA_FILE, compare_runs, load_cases
from bot.compare.contract import CASE_TABLE_SCHEMA, PARAM_PREFIX, CaseRow, ComparisonDoc
from collector.errors import UserError
from collector.record import RUN_JSON, RunMeta, read_record
from collector.record.schema import RUN_META_OPTIONAL, RUN_META_REQUIRED
from tests.golden import golden_runs

SCHEMA: dict[str, Any] = json.loads(SCHEMA_FILE.read_text())
JSON_TYPES = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "object",
    list: "array",
    type(None): "null",
}


def _json_types(annotation: Any) -> set[str]:
    """The JSON types an annotation admits: `float | None` -> {"number", "null"}."""
    if get_origin(annotation) is Required:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, types.UnionType):
        return set().union(*(_json_types(a) for a in get_args(annotation)))
    origin = get_origin(annotation) or annotation
    return {JSON_TYPES[origin]}


def _schema_types(prop: dict[str, Any]) -> set[str] | None:
    """The JSON types a schema property admits, following one `$ref`; None when the
    property says no type (an enum, a const, an allOf)."""
    ref = prop.get("$ref")
    if ref:
        prop = SCHEMA["$defs"][ref.rsplit("/", 1)[1]]
    if "type" in prop:
        typ = prop["type"]
        return set(typ) if isinstance(typ, list) else {typ}
    return None


def _agrees(typed: type, schema: dict[str, Any]) -> None:
    hints = get_type_hints(typed, include_extras=True)
    required = {k for k, v in hints.items() if get_origin(v) is Required}
    assert set(hints) == set(schema["properties"]), typed.__name__
    assert required == set(schema["required"]), typed.__name__
    for name, hint in hints.items():
        want = _schema_types(schema["properties"][name])
        if want is not None:
            got = _json_types(hint)
            # A JSON integer is a number: `float` admits what "number" does, and more.
            assert got == want or got - {"number"} == want - {"integer", "number"}, (name, got)


def test_the_comparison_document_is_the_schemas_top_level() -> None:
    _agrees(ComparisonDoc, SCHEMA)


def test_a_listed_case_is_the_schemas_case() -> None:
    _agrees(CaseRow, SCHEMA["$defs"]["case"])


@pytest.fixture
def written(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    base, cand = golden_runs(tmp_path)
    result = compare_runs(read_record(base), read_record(cand))
    return result.write(tmp_path / "cmp").parent, result.data


def test_the_case_table_is_written_with_its_declared_schema(
    written: tuple[Path, dict[str, Any]],
) -> None:
    out, data = written
    schema = pq.read_schema(out / "cases.parquet")
    declared = len(CASE_TABLE_SCHEMA)
    # Every declared column with its declared type, in order, even where every value is
    # null (no confirmation pass: first_verdict and confirm_verdict), then the case fields.
    assert schema.names[:declared] == CASE_TABLE_SCHEMA.names
    assert [f.type for f in schema][:declared] == list(CASE_TABLE_SCHEMA.types)
    params = schema.names[declared:]
    assert params and all(n.startswith(PARAM_PREFIX) for n in params)
    rows = load_cases(out, data)
    assert len(rows) == data["latency"]["cases_total"] == 8 - 2  # two cases fail on a side
    assert set(rows[0]["params"]) == {n.removeprefix(PARAM_PREFIX) for n in params}


def test_a_case_table_without_a_declared_column_is_refused(
    written: tuple[Path, dict[str, Any]],
) -> None:
    out, data = written
    table = pq.read_table(out / "cases.parquet").drop_columns(["verdict"])
    pq.write_table(table, out / "cases.parquet")
    with pytest.raises(UserError, match=r"cases.parquet: column 'verdict' missing"):
        load_cases(out, data)


def test_listed_cases_hold_the_case_rows_keys(written: tuple[Path, dict[str, Any]]) -> None:
    _, data = written
    hints = get_type_hints(CaseRow, include_extras=True)
    required = {k for k, v in hints.items() if get_origin(v) is Required}
    assert data["latency"]["cases"]
    for case in data["latency"]["cases"]:
        assert required <= set(case) <= set(hints)


def test_the_readers_checks_are_run_meta(tmp_path: Path) -> None:
    """The reader checks each RunMeta field: a required one missing or mistyped, an optional
    one mistyped, each refused with the field's name; a field RunMeta does not declare is
    kept without a check."""
    assert set(RUN_META_REQUIRED) | set(RUN_META_OPTIONAL) == set(get_type_hints(RunMeta))
    base, _ = golden_runs(tmp_path)
    meta = json.loads((base / RUN_JSON).read_text())
    assert set(RUN_META_REQUIRED) <= set(meta)
    for name, typ in {**RUN_META_REQUIRED, **RUN_META_OPTIONAL}.items():
        if meta.get(name) is not None:
            assert isinstance(meta[name], typ), name

    def read_with(**fields: Any) -> None:
        (base / RUN_JSON).write_text(json.dumps({**meta, **fields}))
        read_record(base)

    with pytest.raises(UserError, match=r"field 'framework' must be a string, not 3"):
        read_with(framework=3)
    with pytest.raises(UserError, match=r"field 'panel' must be an object or null, not \[\]"):
        read_with(panel=[])
    read_with(not_declared=[1, 2])  # kept, not read
