"""Code and docs cite only what is in the repository, and no lab notebook.

Every repository path they name exists (or is indexed as archived in bench/archive/README.md),
and no file cites the design notes or numbered GPU sessions and probes that live outside the
code: reasoning is in docs/statistics.md, history in CHANGELOG.md and docs/benchmarks.md.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEXT = {".py", ".md", ".yaml", ".yml", ".sh", ".toml", ".j2", ".txt", ".cfg", ""}
PATH = re.compile(
    r"(?<![\w./-])((?:bot|collector|tests|bench|docs|scripts|images|\.github|\.ci)/"
    r"[\w./-]*\w\.(?:py|md|yaml|yml|sh|json|jsonl|toml|j2|txt|tar|gz|parquet))\b"
)
CITATION = re.compile(
    "|".join(
        [
            "DESIGN" + r"\.md",
            r"(?:\.\./|/work/)" + "shared",
            r"\b(?:noise )?probes? \d+(?![\d>])",
            r"\bsessions? \d",
        ]
    ),
    re.IGNORECASE,
)
# History keeps its session and probe numbers: the measurements page and the indexes of its
# records and of the retired probes (raw records are data and not read at all).
HISTORY = {"docs/benchmarks.md", "bench/results/README.md", "bench/archive/README.md"}
# Paths in the repository that installs the bot, not in this one: its config file and the
# framework manifest its callers pass to the reusable workflows.
INSTALLING_REPOSITORY = {".github/collectbot.yml", ".github/collectbot/manifest.yaml"}
# Paths inside the built wheel: pyproject's force-include puts the image stage's files there.
WHEEL_ONLY = {
    "bot/images/data/collector.Dockerfile",
    "bot/images/data/collector-requirements.txt",
    "bot/images/data/manifest.yaml",
}
# Files exempt while they are being rewritten (none now).
PENDING: set[str] = set()


def _files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [
        f
        for f in listed
        if Path(f).suffix in TEXT
        and not f.startswith("bench/results/h200")
        and f != "tests/test_citations.py"
        and (ROOT / f).is_file()
    ]


def _archived() -> set[str]:
    text = (ROOT / "bench" / "archive" / "README.md").read_text()
    return set(re.findall(r"^\| `(bench/[^`]+)`", text, re.MULTILINE))


def test_every_cited_repository_path_exists() -> None:
    archived = _archived() | INSTALLING_REPOSITORY | WHEEL_ONLY
    missing = []
    for name in _files():
        for lineno, line in enumerate((ROOT / name).read_text().splitlines(), 1):
            for path in PATH.findall(line):
                if not (ROOT / path).exists() and path not in archived:
                    missing.append(f"{name}:{lineno}: {path}")
    assert missing == []


def test_no_file_cites_design_notes_sessions_or_probes() -> None:
    found = []
    for name in _files():
        if name in HISTORY | PENDING:
            continue
        for lineno, line in enumerate((ROOT / name).read_text().splitlines(), 1):
            if CITATION.search(line):
                found.append(f"{name}:{lineno}: {line.strip()}")
    assert found == []


def test_the_patterns_catch_what_they_are_for() -> None:
    assert CITATION.search("see " + "DESIGN" + ".md section 6")
    assert CITATION.search("(probe 11 and session 8)")
    assert CITATION.search('REFERENCE = Path("/work/' + 'shared/data")')
    assert CITATION.search("noise probes 5 and 6")
    assert not CITATION.search("the version probe did not answer; a GPU session's harness")
    assert not CITATION.search("touch /probe 2>/dev/null")
    assert PATH.findall("see `bot/compare/stats.py`.") == ["bot/compare/stats.py"]
    assert PATH.findall("bench/gpu/*.sh and ../bot/x.py") == []
