"""`collectbot site` on a synthetic store, and the SVG helper it draws with."""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.keys import case_file
from bot.site.build import PAGE_CASES, SITE_MARKER
from bot.site.svg import Point, sparkline_svg, trend_svg
from bot.store import RunStore
from tests.factories import failure, write_record
from tests.history_store import SyntheticStore, commit_of, grid_cases, make_store

runner = CliRunner()
SVG = "{http://www.w3.org/2000/svg}"
SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "screenshot_site.py"
HOSTILE = '<script>alert(1)</script>"&'


@pytest.fixture(scope="module")
def stepped(tmp_path_factory: pytest.TempPathFactory) -> SyntheticStore:
    root = tmp_path_factory.mktemp("site-store")
    return make_store(root / "store", root / "work", grid_cases(30), failing={8: {5}})


@pytest.fixture(scope="module")
def site(stepped: SyntheticStore, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    result = runner.invoke(app, ["site", "--store", stepped.url, "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["histories"] == 1 and summary["cases"] == 30
    return out


def _series(site: Path) -> Path:
    (directory,) = [p.parent for p in site.glob("*/index.html")]
    return directory


def _svg(html: str) -> ET.Element:
    found = re.search(r'<svg class="plot".*?</svg>', html, re.S)
    assert found
    return ET.fromstring(found.group(0))


def test_stepped_case_pages_show_the_step(stepped: SyntheticStore, site: Path) -> None:
    directory = _series(site)
    for key in stepped.steps:
        html = (directory / case_file(key)).read_text()
        svg = _svg(html)
        steps = svg.findall(f"{SVG}line[@class='step']")
        circles = svg.findall(f"{SVG}circle[@class='pt']")
        assert len(steps) == 1 and len(circles) == 20
        # The dashed line sits between runs 11 and 12.
        xs = [float(c.get("cx", "nan")) for c in circles]
        assert xs[10] < float(steps[0].get("x1", "nan")) < xs[11]
        # Points after the step sit on the other side of the pre-step level.
        ys = [float(c.get("cy", "nan")) for c in circles]
        before, after = sum(ys[:11]) / 11, sum(ys[11:]) / 9
        assert (after < before) == (stepped.steps[key] > 1)  # SVG y grows downwards
        assert f"{commit_of(11)[:12]}..{commit_of(12)[:12]}" in html
    calm = next(c.key for c in stepped.cases if c.key not in stepped.steps)
    assert "No step in the window" in (directory / case_file(calm)).read_text()


def test_overview_lists_the_commit_and_every_group(stepped: SyntheticStore, site: Path) -> None:
    html = (_series(site) / "index.html").read_text()
    row = re.search(r"<tr><td class=\"n\">12</td>.*?</tr>", html, re.S)
    assert row and f"{commit_of(11)[:12]}..{commit_of(12)[:12]}" in row.group(0)
    assert row.group(0).count('href="case-') == 5
    for title in ("gemm bfloat16", "gemm float16", "generation_attention fp8"):
        assert f"<h3>{title}</h3>" in html
    assert html.count('<svg class="plot"') == 3
    for n in range(1, 21):
        assert f"sha256:{hashlib.sha256(str(n).encode()).hexdigest()}"[:19] in html


def test_failures_and_provenance_on_the_case_page(stepped: SyntheticStore, site: Path) -> None:
    key = stepped.cases[8].key
    html = (_series(site) / case_file(key)).read_text()
    assert "boom in run 5" in html
    svg = _svg(html)
    assert len(svg.findall(f"{SVG}g[@class='fail']")) == 1
    assert "collector 0.5, torch 2.11.0" in html and "Test GPU · GPU-test" in html


def test_pages_are_self_contained(site: Path) -> None:
    for page in site.rglob("*.html"):
        html = page.read_text()
        assert "<script" not in html
        for ref in re.findall(r'(?:href|src)="([^"]+)"', html):
            assert "://" not in ref and not ref.startswith("//"), (page, ref)
            assert (page.parent / ref).resolve().is_file(), (page, ref)


def test_hostile_text_is_escaped(tmp_path: Path) -> None:
    store = make_store(
        tmp_path / "store", tmp_path / "work", grid_cases(6), runs=6, steps=(), failing={1: {2}}
    )
    # A failure message is text the PR's code chose: one more run with a hostile message.
    bad = failure(store.cases[1], message=HOSTILE)
    record = write_record(
        tmp_path / "hostile",
        store.cases,
        lambda c: None if c == store.cases[1] else [[1.0] * 8] * 3,
        failures=[bad],
        status="partial",
        meta_extra={"versions": {"torch": HOSTILE}, "git_sha": HOSTILE},
    )
    RunStore(store.url).put(record, ref="main")
    out = tmp_path / "site"
    assert runner.invoke(app, ["site", "--store", store.url, "--out", str(out)]).exit_code == 0
    for page in out.rglob("*.html"):
        assert "<script>" not in page.read_text()
    html = (_series(out) / case_file(store.cases[1].key)).read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_group_pages_split_by_page_size(tmp_path: Path) -> None:
    store = make_store(
        tmp_path / "store",
        tmp_path / "work",
        [c for c in grid_cases(PAGE_CASES * 3) if c.op == "gemm"][: PAGE_CASES + 5],
        runs=6,
        steps=(),
        samples=4,
        collector_runs=2,
    )
    out = tmp_path / "site"
    assert runner.invoke(app, ["site", "--store", store.url, "--out", str(out)]).exit_code == 0
    pages = sorted(p.name for p in _series(out).glob("group-gemm-*.html"))
    assert len(pages) >= 2
    rows = sum(p.read_text().count('<tr><td><a href="case-') for p in _series(out).glob("group-*"))
    assert rows == PAGE_CASES + 5


def test_out_must_be_empty_or_an_earlier_site(stepped: SyntheticStore, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("x")
    result = runner.invoke(app, ["site", "--store", stepped.url, "--out", str(out), "--force"])
    assert result.exit_code == 2 and result.stderr.startswith("error: ")
    assert (out / "precious.txt").exists()
    out2 = tmp_path / "out2"
    assert runner.invoke(app, ["site", "--store", stepped.url, "--out", str(out2)]).exit_code == 0
    assert (out2 / SITE_MARKER).is_file()
    again = runner.invoke(app, ["site", "--store", stepped.url, "--out", str(out2), "--force"])
    assert again.exit_code == 0


def test_trend_svg_places_points_intervals_and_failures() -> None:
    points = [
        Point("a", 1.0, 0.9, 1.1),
        Point("b <&>", 2.0, 1.8, 2.2),
        Point("failed", failed=True),
        Point("missing"),
        Point("d", 3.0),
    ]
    svg = ET.fromstring(str(trend_svg(points, steps=[1], unit=" µs", title="t <x>")))
    circles = svg.findall(f"{SVG}circle")
    assert len(circles) == 3
    assert len(svg.findall(f"{SVG}line[@class='ci']")) == 2
    assert len(svg.findall(f"{SVG}g[@class='fail']")) == 1
    cy = [float(c.get("cy", "nan")) for c in circles]
    assert cy[0] > cy[1] > cy[2]  # larger values higher up
    height = float(svg.get("height", "nan"))
    assert all(0 <= y <= height for y in cy)
    assert circles[1].findtext(f"{SVG}title") == "b <&>"
    assert svg.get("aria-label") == "t <x>"


def test_trend_svg_survives_flat_empty_and_nan() -> None:
    for points in ([], [Point("x")], [Point("a", 5.0), Point("b", 5.0)]):
        svg = ET.fromstring(str(trend_svg(points)))
        for c in svg.findall(f"{SVG}circle"):
            assert math.isfinite(float(c.get("cy", "nan")))
    spark = ET.fromstring(str(sparkline_svg([1.0, math.nan, 2.0], [False, True, False])))
    line = spark.find(f"{SVG}polyline")
    assert line is not None and len(line.get("points", "").split()) == 2


def test_tick_labels_carry_the_decimals_the_span_needs() -> None:
    from bot.site.svg import tick

    assert tick(0.001307, 0.24) == "0.001"
    assert tick(548.5, 93.5) == "548.5"
    assert tick(1234.5, 900.0) == "1234"
    assert tick(1.23456, 0.01) == "1.2346"
    assert tick(5.0, 0.0) == "5"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium")
def test_screenshot_script_renders_the_site_in_chromium(site: Path, tmp_path: Path) -> None:
    out = tmp_path / "shots"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(site), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    shots = sorted(p.name for p in out.glob("*.png"))
    assert shots == ["case-1.png", "group-1.png", "overview-1.png"]
    for png in out.glob("*.png"):
        data = png.read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000
