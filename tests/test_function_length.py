"""No function in bot/ or collector/ runs over 80 lines, unless this list gives its reason.

The list is a ratchet: an entry whose function shrank under the limit (or is gone) fails
the test too, so that its line is removed and the limit holds from then on.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 80
TYPER = "a typer command: one declared option per parameter, each several lines"
# "path::qualified name": why it is longer than LIMIT lines.
ALLOWED = {
    "bot/commands/publish.py::publish": TYPER + ", then the PR and SHA checks",
    "bot/commands/collect.py::collect": TYPER + " (the collect settings' options)",
    "bot/commands/plan.py::plan": TYPER,
    "bot/commands/campaign.py::campaign": TYPER,
    "bot/render/comment.py::_context": "the comment template's context, one key per section",
    "bot/site/build.py::write_history": "a history's overview, group and case pages written in one pass",
    "bot/images/container.py::collect_in_container": "one container's life: create, run, "
    "watch, copy out, remove, each failure named on the way",
    "collector/timing.py::measure_cuda": "the CUDA timing loop: graph capture, clocks and "
    "canary in one place, where splitting would add calls inside the measurement",
    "bot/importers/aic.py::import_aic": "reference tables read and turned into a record, column by column",
    "bot/history/table.py::print_history": "the history table, built column by column",
    "bot/result_bundle.py::load_result": "a bundle's every check in turn, each one line naming file and field",
    "bot/conclude.py::conclude": "the conclude pipeline's steps in order",
}


def long_functions(root: Path = ROOT) -> dict[str, int]:
    """Every function of bot/ and collector/ over LIMIT lines, with its length."""
    out: dict[str, int] = {}
    for path in sorted(p for d in ("bot", "collector") for p in root.joinpath(d).rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        stack: list[tuple[ast.AST, str]] = [(tree, "")]
        while stack:
            node, prefix = stack.pop()
            for child in ast.iter_child_nodes(node):
                name = getattr(child, "name", None)
                qual = f"{prefix}{name}" if name else prefix
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = (child.end_lineno or child.lineno) - child.lineno + 1
                    if length > LIMIT:
                        out[f"{path.relative_to(root)}::{qual}"] = length
                stack.append((child, f"{qual}." if name else prefix))
    return out


def test_no_function_runs_over_the_limit_without_a_reason() -> None:
    found = long_functions()
    unexplained = {k: v for k, v in found.items() if k not in ALLOWED}
    assert not unexplained, f"over {LIMIT} lines, with no reason in ALLOWED: {unexplained}"


def test_every_allowed_function_is_still_long() -> None:
    found = long_functions()
    stale = sorted(k for k in ALLOWED if k not in found)
    assert not stale, f"now {LIMIT} lines or fewer (or gone): remove from ALLOWED: {stale}"
    assert all(reason.strip() for reason in ALLOWED.values())


def test_a_long_function_is_found(tmp_path: Path) -> None:
    """The walk sees methods and nested functions, by their qualified names; a function of
    exactly LIMIT lines passes."""
    body = "        x = 1\n" * (LIMIT - 1)
    (tmp_path / "bot").mkdir()
    (tmp_path / "collector").mkdir()
    module = tmp_path / "bot" / "m.py"
    module.write_text(
        f"class A:\n    def f(self):\n{body}\n    def g(self):\n        return 1\n"
        f"def outer():\n    def inner():\n{body}        return 2\n"
    )
    # A.f is LIMIT lines long: at the limit, not over it.
    name = module.relative_to(tmp_path).as_posix()
    assert long_functions(tmp_path) == {
        f"{name}::outer": LIMIT + 2,
        f"{name}::outer.inner": LIMIT + 1,
    }
