"""`collectbot bundle` and the GPU-side install scripts, end to end on real wheels and real pip.

The wheels are small but real (zip, dist-info, METADATA with Requires-Dist); pip downloads
them from a local folder with --no-index, so no network is needed.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.bundle import PARTS_SUMS, build_bundle, load_spec, split_file
from bot.cli import app
from collector.errors import UserError
from collector.record import sha256_file

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "bench" / "gpu"


def make_wheel(
    folder: Path,
    name: str,
    version: str,
    requires: list[str] = (),  # type: ignore[assignment]
    payload: int = 0,
    tag: str = "py3-none-any",
    behind_pth: str = "",
) -> Path:
    """A minimal valid wheel; `payload` adds incompressible bytes to make it big;
    `behind_pth` puts the package in that folder, named by a `.pth` file (as
    nvidia-cutlass-dsl does), so it imports only where `.pth` files are read."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = name.replace("-", "_")
    path = folder / f"{dist}-{version}-{tag}.whl"
    info = f"{dist}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    package = f"{behind_pth}/{dist}" if behind_pth else dist
    files = {
        f"{package}/__init__.py": f"VERSION = {version!r}\n".encode(),
        f"{info}/METADATA": meta.encode(),
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: {tag}\n".encode(),
    }
    if behind_pth:
        files[f"{dist}.pth"] = f"# where the package lives\n{behind_pth}\n".encode()
    if payload:
        files[f"{dist}/blob.bin"] = os.urandom(payload)
    record = "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record.encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for arcname, data in files.items():
            zf.writestr(arcname, data)
    return path


SPEC = """
framework: fakefw
version: "1.0"
target:
  python: "3.12"
  implementation: cp
  abi: cp312
  platforms: [manylinux_2_28_x86_64, manylinux2014_x86_64]
wheels:
  - fakefw==1.0
  - dep-a==2.0
base:
  numpy: "2.0"
  requests: null
excluded:
  server-thing: API server only
"""


def index(tmp_path: Path, payload: int = 0, dep_version: str = "2.0") -> Path:
    links = tmp_path / "index"
    make_wheel(
        links,
        "fakefw",
        "1.0",
        [
            "dep-a>=2",
            "numpy>=1.26",
            "requests",
            "server-thing>=1",
            'docs-only; extra == "docs"',
            'winonly; sys_platform == "win32"',
        ],
        payload=payload,
    )
    make_wheel(links, "dep-a", dep_version, ["numpy"], behind_pth="dep_a_libs/python")
    return links


def spec_file(tmp_path: Path, text: str = SPEC) -> Path:
    path = tmp_path / "bundle.yaml"
    path.write_text(text)
    return path


@pytest.mark.slow
def test_bundle_downloads_checks_and_splits(tmp_path: Path) -> None:
    links = index(tmp_path, payload=2_600_000)
    out = tmp_path / "out"
    result = build_bundle(
        spec_file(tmp_path), out, part_bytes=1_000_000, find_links=[links], no_index=True
    )
    assert sorted(result.downloaded) == ["dep-a==2.0", "fakefw==1.0"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest == result.manifest
    assert [w["name"] for w in manifest["wheels"]] == ["fakefw", "dep-a"]
    for wheel in manifest["wheels"]:
        assert wheel["sha256"] == sha256_file(out / "wheels" / wheel["file"])
    closure = manifest["closure"]
    assert closure["problems"] == []
    assert any("requires dep-a>=2" in line for line in closure["bundled"])
    assert any("numpy>=1.26" in line for line in closure["from_base"])
    assert any("requests" in line for line in closure["assumed_from_base"])
    assert list(closure["excluded"].values()) == ["API server only"]
    assert not any("docs-only" in line or "winonly" in line for line in json.dumps(closure))
    assert manifest["install"].startswith("pip install --no-index --no-deps --target")
    # Equal parts of at most 1 MB, one carry folder each, all checksummed.
    sizes = [p.stat().st_size for p in result.parts]
    assert len(sizes) == 3 and max(sizes) <= 1_000_000 and max(sizes) - min(sizes) <= 1
    assert [p.parent.name for p in result.parts] == ["01", "02", "03"]
    sums = (out / PARTS_SUMS).read_text().splitlines()
    assert len(sums) == 4
    for part in result.parts:
        assert f"{sha256_file(part)}  {part.name}" in sums
        assert (part.parent / PARTS_SUMS).read_text() == (out / PARTS_SUMS).read_text()
    joined = b"".join(p.read_bytes() for p in result.parts)
    tar_sha, tar_name = sums[-1].split("  ")
    assert hashlib.sha256(joined).hexdigest() == tar_sha and tar_name.endswith(".tar")
    (tmp_path / "joined.tar").write_bytes(joined)
    with tarfile.open(tmp_path / "joined.tar") as tar:
        names = sorted(tar.getnames())
        assert names[:2] == ["bundle/SHA256SUMS", "bundle/manifest.json"]
        blob = tar.extractfile(f"bundle/wheels/{manifest['wheels'][0]['file']}")
        assert blob is not None
        assert blob.read() == (out / "wheels" / manifest["wheels"][0]["file"]).read_bytes()
    # Rebuilding from the same wheels (nothing to download) gives byte-identical parts.
    again = build_bundle(spec_file(tmp_path), out, part_bytes=1_000_000, fetch=False)
    assert (out / PARTS_SUMS).read_text().splitlines() == sums
    assert again.downloaded == []


def test_split_parts_are_balanced(tmp_path: Path) -> None:
    path = tmp_path / "x.tar"
    path.write_bytes(os.urandom(10_001))
    parts = split_file(path, 4000)
    assert [p.name for p in parts] == ["x.tar.part01of03", "x.tar.part02of03", "x.tar.part03of03"]
    assert [p.stat().st_size for p in parts] == [3334, 3334, 3333]
    assert b"".join(p.read_bytes() for p in parts) == path.read_bytes()


@pytest.mark.slow
def test_closure_problems_name_the_requirement(tmp_path: Path) -> None:
    links = index(tmp_path)
    old = index(tmp_path / "old", dep_version="1.5")
    refusals = [
        (
            ("  server-thing: API server only\n", ""),
            links,
            r"fakefw 1\.0 requires server-thing>=1: not bundled",
        ),
        (('numpy: "2.0"', 'numpy: "1.20"'), links, r"the base image has numpy 1\.20"),
        (("dep-a==2.0", "dep-a==1.5"), old, r"requires dep-a>=2, but the bundle pins dep-a==1.5"),
    ]
    for i, ((was, now), found, message) in enumerate(refusals):
        spec = spec_file(tmp_path, SPEC.replace(was, now))
        with pytest.raises(UserError, match=message):
            build_bundle(spec, tmp_path / f"o{i}", find_links=[found], no_index=True)


@pytest.mark.slow
def test_unavailable_pin_is_a_one_line_error(tmp_path: Path) -> None:
    links = index(tmp_path)
    with pytest.raises(
        UserError, match=r"pip download failed for 2 pin\(s\): ERROR: .*dep-a==9\.9"
    ):
        build_bundle(
            spec_file(tmp_path, SPEC.replace("dep-a==2.0", "dep-a==9.9")),
            tmp_path / "o",
            find_links=[links],
            no_index=True,
        )


def test_wheel_for_another_python_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    make_wheel(out / "wheels", "fakefw", "1.0", tag="cp311-cp311-manylinux_2_17_x86_64")
    make_wheel(out / "wheels", "dep-a", "2.0")
    with pytest.raises(UserError, match="do not run on cp312"):
        build_bundle(spec_file(tmp_path), out, fetch=False)


@pytest.mark.parametrize(
    ("old", "new", "match"),
    [
        ("dep-a==2.0", "dep-a>=2.0", "must pin one exact version"),
        ("  - fakefw==1.0\n", "", "must pin the framework itself"),
        ("API server only", "''", "excluded.server-thing needs a reason"),
        ('version: "1.0"', 'version: "1.1"', "make them agree"),
        ("abi: cp312", "abi: ''", "target.abi"),
        ("  - dep-a==2.0\n", "  - dep-a==2.0\n  - Dep_A==2.0\n", "pinned twice"),
    ],
)
def test_spec_errors_are_one_line(tmp_path: Path, old: str, new: str, match: str) -> None:
    path = spec_file(tmp_path, SPEC.replace(old, new))
    with pytest.raises(UserError, match=match) as info:
        load_spec(path)
    assert "\n" not in str(info.value)


def test_repository_spec_is_valid() -> None:
    spec = load_spec(ROOT / "images" / "vllm-bundle.yaml")
    assert spec.framework == "vllm" and spec.version == "0.24.0"
    assert any(str(p) == "vllm==0.24.0" for p in spec.pins)
    assert spec.target.abi == "cp312"


def _sh(script: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(
        ["bash", str(SCRIPTS / script), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


@pytest.mark.slow
def test_stage_and_install_scripts(tmp_path: Path) -> None:
    links = index(tmp_path, payload=2_600_000)
    result = build_bundle(
        spec_file(tmp_path),
        tmp_path / "out",
        part_bytes=1_000_000,
        find_links=[links],
        no_index=True,
    )
    stage, target = tmp_path / "stage", tmp_path / "site"
    # Not all parts staged yet: the installer lists what is missing. Paths may be relative.
    relative = result.carry_dirs[0].relative_to(tmp_path)
    proc = _sh("stage_part.sh", str(relative), "stage", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "stage stage: 1 of 3 parts" in proc.stdout
    proc = _sh("install_bundle.sh", str(stage), str(target))
    assert proc.returncode == 3
    assert "missing parts: " in proc.stderr and "part02of03" in proc.stderr
    # A part damaged in transit is refused on arrival.
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / PARTS_SUMS).write_text((result.carry_dirs[1] / PARTS_SUMS).read_text())
    damaged = bytearray(result.parts[1].read_bytes())
    damaged[100] ^= 0xFF
    (bad / result.parts[1].name).write_bytes(bytes(damaged))
    proc = _sh("stage_part.sh", str(bad), str(stage))
    assert proc.returncode == 3 and "does not match its sha256" in proc.stderr
    assert not (stage / result.parts[1].name).exists()
    for folder in result.carry_dirs[1:]:
        assert _sh("stage_part.sh", str(folder), str(stage)).returncode == 0
    proc = _sh("install_bundle.sh", "stage", "site", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "installed fakefw 1.0 and 2 wheels" in proc.stdout
    # dep_a lives behind a .pth file, which Python skips in a folder on PYTHONPATH: the
    # installer's path names that folder too.
    pythonpath = (target / ".pythonpath").read_text().strip()
    assert pythonpath == f"{target}:{target / 'dep_a_libs' / 'python'}"
    assert f"export PYTHONPATH={pythonpath}" in proc.stdout
    code = "import fakefw, dep_a; print(fakefw.VERSION, dep_a.VERSION)"
    for path, expected in ((str(target), "No module named 'dep_a'"), (pythonpath, "1.0 2.0")):
        check = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": path},
        )
        assert expected in check.stdout + check.stderr


@pytest.mark.slow
def test_bundle_command(tmp_path: Path) -> None:
    links = index(tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        [
            *("bundle", "--spec", str(spec_file(tmp_path)), "--out", str(out)),
            *("--find-links", str(links), "--no-index", "--part-mb", "1"),
        ],
    )
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.startswith("fakefw 1.0: 2 wheels") and "1 part(s)" in first
    assert "1 excluded" in first
    assert str(out / "carry" / "01") in result.output
    missing = CliRunner().invoke(app, ["bundle", "--spec", str(tmp_path / "no.yaml"), "--out", "x"])
    assert missing.exit_code == 2 and "bundle spec not found" in missing.output
