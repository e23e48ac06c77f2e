"""bench/ holds what is current: every kept record is indexed, every archived probe is gone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def test_every_record_is_indexed_under_its_folder() -> None:
    text = (RESULTS / "README.md").read_text()
    for folder in sorted(p for p in RESULTS.iterdir() if p.is_dir()):
        section = text.split(f"## `{folder.name}/`")[1].split("\n## ")[0]
        named = set(re.findall(r"`([^`\s]+)`", section))
        files = {p.name for p in folder.iterdir()}
        assert files - named == set(), f"{folder.name}: records not in the index"
        assert {n for n in named if "." in n} - files == set(), f"{folder.name}: indexed, absent"


def test_archived_probes_are_indexed_and_gone() -> None:
    rows = (ROOT / "bench" / "archive" / "README.md").read_text().splitlines()
    archived = [re.findall(r"`([^`]+)`", row)[0] for row in rows if row.startswith("| `bench/")]
    assert len(archived) >= 10
    for path in archived:
        assert not (ROOT / path).exists(), f"{path} is indexed as archived but still there"
