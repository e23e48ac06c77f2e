"""Cases as data: load case files, expand grids, and fix a plan with a stable hash."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from collector.errors import UserError
from collector.jsonfile import is_json_type
from collector.ops import get_op
from collector.ops.base import KNOWN_DTYPES

BUILTIN_CASES_PACKAGE = "collector.cases"


@dataclass(frozen=True)
class Case:
    """One measurable point: an op and its field values, in the op's field order."""

    op: str
    values: tuple[tuple[str, Any], ...]

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.values)

    @cached_property
    def key(self) -> str:
        # Stable, human-readable identity used across runs, shards and comparisons.
        return self.op + ":" + ",".join(f"{k}={v}" for k, v in self.values)

    @property
    def dtype(self) -> str:
        return get_op(self.op).dtype_of(self.params)

    @classmethod
    def build(cls, op: str, params: Mapping[str, Any], *, source: str = "<input>") -> Case:
        spec = get_op(op)
        optional = {f.name: f for f in spec.optional}
        unknown = sorted(set(params) - set(spec.field_names) - set(optional), key=repr)
        if unknown:
            raise UserError(f"{source}: unknown field {unknown[0]!r} for op {op!r}")
        values = []
        for name, typ in spec.fields:
            if name not in params:
                raise UserError(f"{source}: case for op {op!r} is missing field {name!r}")
            value = params[name]
            if typ is int and not is_json_type(value, int):
                raise UserError(f"{source}: field {name!r} must be an integer, got {value!r}")
            if typ is int and (value < 0 or (value == 0 and name not in spec.zero_ok)):
                raise UserError(f"{source}: field {name!r} must be positive, got {value!r}")
            if typ is str and not isinstance(value, str):
                raise UserError(f"{source}: field {name!r} must be a string, got {value!r}")
            values.append((name, value))
        for opt in spec.optional:
            value = params.get(opt.name, opt.default)
            if not isinstance(value, opt.type) or (opt.choices and value not in opt.choices):
                allowed = ", ".join(map(str, opt.choices)) or opt.type.__name__
                raise UserError(f"{source}: field {opt.name!r} must be {allowed}; got {value!r}")
            if value != opt.default:  # the default stays out of the key
                values.append((opt.name, value))
        return cls(op=op, values=tuple(values))

    def with_values(self, run_values: Mapping[str, Any], *, source: str = "<input>") -> Case:
        """This case with run-wide values for the optional fields it leaves at their default."""
        spec = get_op(self.op)
        params = self.params
        for opt in spec.optional:
            value = run_values.get(opt.name, opt.default)
            if opt.name not in params and value != opt.default:
                params[opt.name] = value
        return Case.build(self.op, params, source=source)


def _check_dtype(field: str, value: object, where: str) -> None:
    if str(value) not in KNOWN_DTYPES:
        raise UserError(
            f"{where}: unknown dtype {str(value)!r} in {field!r} "
            f"(known: {', '.join(sorted(KNOWN_DTYPES))})"
        )


def _planned(case: Case, source: str) -> Case:
    """A case from a case file, with its dtype fields checked against the known names."""
    for name in get_op(case.op).dtype_fields:
        _check_dtype(name, case.params[name], source)
    return case


@dataclass(frozen=True)
class CaseSelector:
    """Selects cases by field values.

    Grammar: alternatives separated by `;`, each a comma-separated list of `field=value`
    conditions that must all hold; a value may list choices with `|`. The field `op` matches
    the op name. Example: `gemm_dtype=bfloat16,m=128|256;op=gemm,k=512`.
    """

    alternatives: tuple[tuple[tuple[str, frozenset[str]], ...], ...]
    text: str
    option: str = field(default="selector", compare=False)

    @classmethod
    def parse(cls, text: str, *, option: str = "selector") -> CaseSelector:
        alternatives = []
        for alt in text.split(";"):
            if not alt.strip():
                continue
            conditions = []
            for cond in alt.split(","):
                name, sep, value = cond.strip().partition("=")
                if not sep or not name.strip() or not value.strip():
                    raise UserError(f"{option}: {cond.strip()!r} is not of the form field=value")
                choices = frozenset(v.strip() for v in value.split("|"))
                conditions.append((name.strip(), choices))
            alternatives.append(tuple(conditions))
        if not alternatives:
            raise UserError(f"{option}: empty selector")
        return cls(alternatives=tuple(alternatives), text=text, option=option)

    def check(self, ops: Sequence[str]) -> None:
        """Refuse a field that no op in `ops` has, or a dtype name that does not exist: a
        selector with a typo would silently select nothing."""
        specs = [get_op(op) for op in ops]
        fields = {"op", *(name for spec in specs for name in spec.field_names)}
        fields |= {f.name for spec in specs for f in spec.optional}
        dtype_fields = {name for spec in specs for name in spec.dtype_fields}
        for alt in self.alternatives:
            for name, choices in alt:
                if name not in fields:
                    raise UserError(
                        f"{self.option}: unknown field {name!r} for op(s) {', '.join(ops)} "
                        f"(fields: {', '.join(sorted(fields))})"
                    )
                if name in dtype_fields:
                    for value in sorted(choices):
                        _check_dtype(name, value, self.option)

    def matches(self, case: Case) -> bool:
        params = {k: str(v) for k, v in get_op(case.op).with_defaults(case.params).items()}
        params["op"] = case.op
        return any(
            all(params.get(name) in choices for name, choices in alt) for alt in self.alternatives
        )


@dataclass(frozen=True)
class Plan:
    """An ordered, de-duplicated list of cases and the hash that identifies it."""

    cases: tuple[Case, ...]
    source: str
    case_set: str
    ops: tuple[str, ...] = field(default=())

    @property
    def hash(self) -> str:
        payload = json.dumps([c.key for c in self.cases], separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def count_by_op(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for case in self.cases:
            counts[case.op] = counts.get(case.op, 0) + 1
        return counts


def _expand_entry(op: str, entry: Any, source: str) -> list[Case]:
    if (
        not isinstance(entry, Mapping)
        or len(entry) != 1
        or next(iter(entry))
        not in (
            "grid",
            "cases",
        )
    ):
        raise UserError(
            f"{source}: each entry of a case set must be {{grid: ...}} or {{cases: ...}}"
        )
    kind, body = next(iter(entry.items()))
    if kind == "cases":
        if not isinstance(body, list):
            raise UserError(f"{source}: 'cases' must be a list of mappings")
        return [_planned(Case.build(op, params, source=source), source) for params in body]
    if not isinstance(body, Mapping):
        raise UserError(f"{source}: 'grid' must map each field to a list of values")
    names = list(body)
    axes = []
    for name in names:
        axis = body[name]
        axes.append(axis if isinstance(axis, list) else [axis])
    return [
        _planned(Case.build(op, dict(zip(names, combo, strict=True)), source=source), source)
        for combo in itertools.product(*axes)
    ]


def load_case_documents(text: str, source: str) -> list[Mapping[str, Any]]:
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise UserError(f"{source}:{where} is not valid YAML") from None
    for doc in docs:
        if not isinstance(doc, Mapping) or "op" not in doc or "sets" not in doc:
            raise UserError(f"{source}: each document needs 'op' and 'sets'")
    return docs


def cases_from_documents(
    docs: Iterable[Mapping[str, Any]], case_set: str, source: str
) -> list[Case]:
    cases: list[Case] = []
    found = False
    for doc in docs:
        op = str(doc["op"])
        get_op(op)
        sets = doc["sets"]
        if not isinstance(sets, Mapping):
            raise UserError(f"{source}: 'sets' of op {op!r} must be a mapping of set names")
        if case_set not in sets:
            continue
        found = True
        entries = sets[case_set]
        if not isinstance(entries, list):
            raise UserError(f"{source}: set {case_set!r} of op {op!r} must be a list")
        for entry in entries:
            cases.extend(_expand_entry(op, entry, f"{source} ({op}/{case_set})"))
    if not found:
        raise UserError(f"{source}: no case set named {case_set!r}")
    return cases


def builtin_case_text(op: str) -> tuple[str, str]:
    name = f"{op}.yaml"
    resource = resources.files(BUILTIN_CASES_PACKAGE).joinpath(name)
    if not resource.is_file():
        raise UserError(f"no built-in cases for op {op!r}")
    return resource.read_text(), f"collector/cases/{name}"


def build_plan(
    ops: Sequence[str],
    *,
    case_file: Path | None = None,
    case_set: str = "default",
    case_filter: CaseSelector | None = None,
    limit: int | None = None,
    run_values: Mapping[str, Any] | None = None,
) -> Plan:
    """Resolve ops and case files into a plan; order is the files' order, duplicates dropped.

    `run_values` (e.g. the run's `attn_backend`) fill the optional fields a case leaves at
    their default, so they become part of its key."""
    for op in ops:
        get_op(op)
    docs: list[Mapping[str, Any]] = []
    if case_file is not None:
        try:
            text = case_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"{case_file}: cannot read case file ({exc.strerror})") from None
        except UnicodeDecodeError as exc:
            raise UserError(
                f"{case_file}: not UTF-8 text (byte {exc.start}: {exc.reason})"
            ) from None
        source = str(case_file)
        docs = load_case_documents(text, source)
        docs = [d for d in docs if str(d["op"]) in ops]
        if not docs:
            raise UserError(f"{source}: no cases for op(s) {', '.join(ops)}")
        cases = cases_from_documents(docs, case_set, source)
    else:
        cases = []
        sources = []
        for op in ops:
            text, source = builtin_case_text(op)
            sources.append(source)
            cases.extend(cases_from_documents(load_case_documents(text, source), case_set, source))
        source = ",".join(sources)
    if run_values:
        cases = [c.with_values(run_values, source="run option") for c in cases]
    seen: set[str] = set()
    unique = []
    for case in cases:
        if case.key not in seen and case.op in ops:
            seen.add(case.key)
            unique.append(case)
    if case_filter is not None:
        case_filter.check(ops)
        unique = [c for c in unique if case_filter.matches(c)]
    if limit is not None:
        unique = unique[:limit]
    return Plan(cases=tuple(unique), source=source, case_set=case_set, ops=tuple(ops))


def parse_shard(text: str) -> tuple[int, int]:
    """`i/n` with 1 <= i <= n: this process takes shard i of n."""
    left, sep, right = text.partition("/")
    try:
        index, count = int(left), int(right)
    except ValueError:
        index = count = 0
    if not sep or count < 1 or not 1 <= index <= count:
        raise UserError(f"--shard: {text!r} must be i/n with 1 <= i <= n, e.g. 1/4")
    return index, count


def shard_of(key: str, count: int) -> int:
    """1-based shard of a case key: deterministic across machines, runs and Python versions."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:12], 16) % count + 1


def take_shard(cases: Sequence[Case], shard: tuple[int, int] | None) -> list[Case]:
    if shard is None:
        return list(cases)
    index, count = shard
    return [c for c in cases if shard_of(c.key, count) == index]
