"""The fault matrix and the threat model name real tests, and every row is in the controls
check: a renamed or deleted test must not leave a row backed by nothing."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "docs" / "reliability.md", ROOT / "docs" / "security.md")
REF = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`")


def _exists(path: str, name: str | None) -> bool:
    file = ROOT / path
    if not file.is_file():
        return False
    return name is None or re.search(rf"^def {name}\(", file.read_text(), re.M) is not None


def test_every_test_the_docs_name_exists() -> None:
    refs = [
        (doc.name, m.group(1), m.group(2)) for doc in DOCS for m in REF.finditer(doc.read_text())
    ]
    assert len(refs) > 60
    missing = [f"{doc}: {path}::{name}" for doc, path, name in refs if not _exists(path, name)]
    assert not missing, missing


def test_every_row_is_in_the_controls_check_and_every_check_names_real_tests() -> None:
    spec = importlib.util.spec_from_file_location(
        "check_controls", ROOT / "scripts" / "check_controls.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    checked = {c.row for c in module.CONTROLS}
    for control in module.CONTROLS:
        for test in control.tests:
            path, _, name = test.partition("::")
            assert _exists(path, name or None), f"{control.row}: {test}"
        for file, text, _ in control.edits:
            assert (ROOT / file).read_text().count(text) == 1, f"{control.row}: {file} changed"
    rows = set(re.findall(r"^\| (R\d+) \|", (ROOT / "docs" / "reliability.md").read_text(), re.M))
    rows |= set(re.findall(r"^\| (S\d+)", (ROOT / "docs" / "security.md").read_text(), re.M))
    unchecked = {
        r
        for r in rows
        if not any(c == r or (c.startswith(r) and not c[len(r)].isdigit()) for c in checked)
    }
    assert not unchecked, sorted(unchecked)
