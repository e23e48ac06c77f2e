"""bench/gpu/site_path.py: a `--target` install's import path, and every wheel's modules found."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

from bench.gpu import site_path


def wheel(folder: Path, files: dict[str, str]) -> Path:
    path = folder / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


# The layout of nvidia-cutlass-dsl-libs-base: its package sits behind a .pth file.
BEHIND_PTH = {
    "demo_libs/python_packages/demo_cut/__init__.py": "",
    "demo.pth": "demo_libs/python_packages\n",
    "plain_mod.py": "",
    "_native.abi3.so": "",
    "demo-1.0.dist-info/METADATA": "Name: demo\n",
    "demo-1.0.data/scripts/tool": "",
    "demo.libs/libx.so": "",  # auditwheel's vendored libraries: no module
}


def test_a_wheel_ships_its_root_modules_and_those_behind_its_pth(tmp_path: Path) -> None:
    assert site_path.shipped_modules(wheel(tmp_path, BEHIND_PTH)) == {
        "demo_libs",
        "demo_cut",
        "plain_mod",
        "_native",
    }


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The demo wheel unpacked into a target folder, and the wheel; sys.path restored after."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    target = tmp_path / "site"
    for name, text in BEHIND_PTH.items():
        if ".dist-info" not in name and ".data/" not in name:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).write_text(text)
    return target, wheel(tmp_path, BEHIND_PTH)


def test_the_path_names_the_pth_folders_and_every_module_is_found(
    installed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    target, demo = installed
    (target / "hook.pth").write_text("import os\n# a comment\nmissing_dir\n")
    assert site_path.main([str(target), str(demo)]) == 0
    expected = f"{target}:{target / 'demo_libs' / 'python_packages'}"
    assert capsys.readouterr().out.strip() == expected
    assert (target / ".pythonpath").read_text().strip() == expected


def test_a_module_the_path_misses_is_one_error_line(
    installed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    target, demo = installed
    (target / "demo.pth").unlink()  # what a .pth-blind install leaves on the path
    assert site_path.main([str(target), str(demo)]) == 6
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: installed, but not importable from ")
    assert "demo_cut (demo-1.0-py3-none-any.whl)" in err and "\n" not in err
