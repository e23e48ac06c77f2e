"""docs/cli.md is generated from the CLI and must match it."""

from __future__ import annotations

from pathlib import Path

from bot import docs_cli
from collector.settings import declared
from collector.timing import Protocol


def test_the_cli_reference_page_is_current() -> None:
    assert docs_cli.PAGE.read_text() == docs_cli.render(), (
        "docs/cli.md is out of date: run python -m bot.docs_cli"
    )


def test_the_page_lists_every_protocol_setting_with_its_unit() -> None:
    section = docs_cli.render().split("## `collectbot collect`")[1].split("\n## ")[0]
    for d in declared(Protocol):
        row = next(line for line in section.splitlines() if line.startswith(f"| `{d.flag}`"))
        assert d.setting.unit in row and d.setting.help.split("(")[0].strip() in row


def test_check_mode_fails_on_a_stale_page(tmp_path: Path) -> None:
    page = tmp_path / "cli.md"
    assert docs_cli.main([str(page)]) == 0
    assert docs_cli.main(["--check", str(page)]) == 0
    page.write_text(page.read_text().replace("--runs", "--rounds"))
    assert docs_cli.main(["--check", str(page)]) == 1
