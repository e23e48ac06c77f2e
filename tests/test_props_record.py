"""Property tests: the run-record reader and the comparison against hostile records.

A record comes from the untrusted side of the pipeline (a PR's code wrote it, or a disk or
an upload damaged it). Whatever the damage, reading it either succeeds with the reader's
promises kept (unique case keys, finite positive latencies, defects listed as anomalies) or
fails with a `RunRecordError`: one line naming the file. Never another exception. A record
that reads must also compare and render without crashing.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.compare.comparison import compare_records
from bot.render.comment import RenderOptions, render_comment
from collector.caseplan import build_plan
from collector.errors import RunRecordError, UserError
from collector.record import RunRecord, read_record
from tests.factories import failure, gemm_case, simulated_runs, write_record
from tests.hostile import Mutator, hostile_text


@pytest.fixture(scope="module")
def template() -> Iterator[Path]:
    rng = np.random.default_rng(5)
    with tempfile.TemporaryDirectory() as tmp:
        cases = [gemm_case(m) for m in (1, 2, 4, 8)]
        path = write_record(
            Path(tmp) / "run",
            cases,
            lambda c: None if c.params["m"] == 8 else simulated_runs(rng, 0.1 * c.params["m"]),
            failures=[failure(cases[3], "CUDA error: illegal memory access", cls="cuda_fatal")],
        )
        yield path


def read_or_refuse(path: Path) -> RunRecord | None:
    try:
        return read_record(path)
    except RunRecordError as exc:
        message = str(exc)
        assert message and "\n" not in message.strip(), message
        return None


def check_promises(record: RunRecord) -> None:
    for op, table in record.perf.items():
        keys = table.column("case_key").to_pylist()
        assert len(keys) == len(set(keys)), f"{op}: duplicate case keys survived"
        lat = pc.cast(table.column("latency"), "double").to_numpy(zero_copy_only=False)
        assert np.all(np.isfinite(lat)) and np.all(lat > 0), f"{op}: bad latency survived"


@settings(max_examples=300)
@given(seed=st.integers(0, 2**32 - 1))
def test_a_damaged_record_reads_or_is_refused_in_one_line(template: Path, seed: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        shutil.copytree(template, run)
        Mutator(random.Random(seed)).mutate(run)
        record = read_or_refuse(run)
        if record is not None:
            check_promises(record)


@settings(max_examples=40)
@given(seed=st.integers(0, 2**32 - 1))
def test_a_damaged_record_that_reads_also_compares_and_renders(template: Path, seed: int) -> None:
    base = read_record(template)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        shutil.copytree(template, run)
        Mutator(random.Random(seed)).mutate(run)
        cand = read_or_refuse(run)
        if cand is None:
            return
        for a, b in ((base, cand), (cand, base)):
            try:
                comparison = compare_records(a, b)
            except UserError:
                continue
            body = render_comment(comparison, RenderOptions(head_sha="a" * 40))
            assert body.startswith("<!-- collectbot ") and len(body) <= 65536


@settings(max_examples=60)
@given(
    device=hostile_text,
    run_id=hostile_text,
    backend=hostile_text,
    kernel=hostile_text,
    message=hostile_text,
    command=st.lists(hostile_text, max_size=4),
)
def test_hostile_text_in_a_record_never_escapes_the_comment(
    template: Path,
    device: str,
    run_id: str,
    backend: str,
    kernel: str,
    message: str,
    command: list[str],
) -> None:
    from tests.hostile import assert_safe_comment

    rng = np.random.default_rng(1)
    cases = [gemm_case(m) for m in (1, 2, 4)]
    with tempfile.TemporaryDirectory() as tmp:
        cand = write_record(
            Path(tmp) / "cand",
            cases,
            lambda c: None if c.params["m"] == 4 else simulated_runs(rng, 1.3),
            failures=[failure(cases[2], message)],
            kernel_for=lambda c: kernel,
            device_name=device,
            meta_extra={"run_id": run_id, "backend": backend, "command": command},
        )
        comparison = compare_records(read_record(template), read_record(cand))
    assert_safe_comment(render_comment(comparison, RenderOptions(head_sha="b" * 40)))


@settings(max_examples=150)
@given(text=st.one_of(hostile_text, st.binary(max_size=300).map(lambda b: b.decode("latin-1"))))
def test_any_case_file_builds_a_plan_or_is_one_line(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        nested, raw = Path(tmp) / "nested.yaml", Path(tmp) / "raw.yaml"
        nested.write_text("op: gemm\nsets:\n  default:\n" + text)
        raw.write_text(text)
        for path in (nested, raw):
            try:
                plan = build_plan(("gemm",), case_file=path)
            except UserError as exc:
                assert str(exc).startswith(str(path)), str(exc)
                continue
            assert all(c.op == "gemm" for c in plan.cases)


@settings(max_examples=150)
@given(data=st.binary(max_size=200))
def test_a_case_file_that_is_not_text_is_one_line(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cases.yaml"
        path.write_bytes(b"op: gemm\nsets:\n  default:\n    - cases: [" + data)
        try:
            build_plan(("gemm",), case_file=path)
        except UserError as exc:
            assert str(exc).startswith(str(path))


def test_yaml_with_mixed_key_types_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "cases.yaml"
    path.write_text(
        "op: gemm\nsets:\n  default:\n    - cases:\n      - {1: 2, zz: 3, m: 4, n: 4, k: 4}\n"
    )
    with pytest.raises(UserError, match=r"cases\.yaml"):
        build_plan(("gemm",), case_file=path)
