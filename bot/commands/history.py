"""`collectbot history` and `collectbot site`: the run store as a performance history."""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.commands.options import DEFAULT_STORE, StoreOption
from bot.errors import one_line_errors
from bot.options import option_group
from collector.errors import UserError

if TYPE_CHECKING:
    from bot.history.core import HistorySettings
    from bot.history.source import Selection
    from collector.caseplan import CaseSelector

BackendOption = Annotated[str | None, typer.Option(help="Only runs of this backend.")]
GpuOption = Annotated[
    str | None, typer.Option(help="Only runs on this GPU (its name, e.g. 'NVIDIA H200').")
]
OpsOption = Annotated[
    str | None, typer.Option(help="Only runs of exactly these ops (comma-separated).")
]
RefOption = Annotated[
    str | None, typer.Option(help="Only runs stored under this ref label (a branch, e.g. main).")
]
VersionOption = Annotated[
    str | None,
    typer.Option(help="Only runs of this framework version (default: every version)."),
]
BootstrapOption = Annotated[
    int | None,
    typer.Option(min=100, help="Bootstrap replicates of each point's interval."),
]


@dataclass(frozen=True)
class StoredRuns:
    """The options of `history` and `site` that choose the stored runs they read."""

    store: StoreOption = DEFAULT_STORE
    backend: BackendOption = None
    gpu: GpuOption = None
    ops: OpsOption = None
    ref: RefOption = None
    framework_version: VersionOption = None

    def selection(self, like: Path | None = None) -> Selection:
        """The key and ref to read; with `like`, what is not given is that record's."""
        from bot.history.source import Selection

        backend, gpu, ops = self.backend, self.gpu, self.ops
        if like is not None:
            from bot.store import key_of
            from collector.record import read_record

            key = key_of(read_record(like).meta)
            backend, gpu = backend or key.backend, gpu or key.gpu
            ops = ops or ",".join(key.ops)
        op_list = None
        if ops is not None:
            op_list = tuple(sorted(o.strip() for o in ops.split(",") if o.strip()))
            if not op_list:
                raise UserError(f"--ops: no op named in {ops!r}")
        return Selection(backend, gpu, op_list, self.ref, self.framework_version)


def _settings(bootstrap: int | None) -> HistorySettings:
    from bot.history.core import HistorySettings

    return HistorySettings() if bootstrap is None else HistorySettings(bootstrap=bootstrap)


def _case_filter(text: str | None) -> CaseSelector | None:
    from collector.caseplan import CaseSelector
    from collector.ops import OPS

    if not text:
        return None
    selector = CaseSelector.parse(text, option="--case-filter")
    known = {"op"} | {name for spec in OPS.values() for name in spec.field_names}
    for alternative in selector.alternatives:
        for name, _ in alternative:
            if name not in known:
                raise UserError(f"--case-filter: unknown field {name!r}")
    return selector


@one_line_errors
@option_group(StoredRuns, "runs")
def history(
    runs: StoredRuns = StoredRuns(),
    like: Annotated[
        Path | None, typer.Option(help="Take backend, GPU and ops from this run record.")
    ] = None,
    case_filter: Annotated[
        str | None,
        typer.Option(help="Only cases matching this selector, e.g. 'op=gemm,m=128|256'."),
    ] = None,
    changed_only: Annotated[
        bool, typer.Option(help="Only cases with a change point in the window.")
    ] = False,
    limit: Annotated[int | None, typer.Option(min=1, help="Print at most this many rows.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON (docs/history.md) instead of a table.")
    ] = False,
    bootstrap: BootstrapOption = None,
    markdown: Annotated[
        Path | None,
        typer.Option(
            help="Also write the change points, grouped by commit, as the markdown block of "
            "main's tracking issue (collectbot track --change-points) to this file."
        ),
    ] = None,
) -> None:
    """Each case's trend across the stored runs of one key and ref, with its change points."""
    import numpy as np
    from rich.console import Console

    from bot.history.changepoints import by_commit, change_points
    from bot.history.core import load_history
    from bot.history.export import history_json
    from bot.history.table import print_history

    selection = runs.selection(like)
    selector = _case_filter(case_filter)
    full = load_history(runs.store, selection, _settings(bootstrap))
    if not full.runs:
        raise UserError(
            f"{runs.store}: no stored run of {full.series.label} could be read "
            f"({len(full.skipped)} skipped, each named above)"
        )
    chosen = full.select(selector)
    points = change_points(chosen)
    if changed_only:
        rows = sorted({cp.case for cp in points})
        keep = np.zeros(len(chosen.cases), dtype=bool)
        keep[rows] = True
        chosen = chosen.subset(keep)
        points = change_points(chosen)
    groups = by_commit(chosen, points)
    if markdown is not None:
        from bot.history.tracking import change_points_markdown

        block = change_points_markdown(
            chosen,
            groups,
            repo=os.environ.get("GITHUB_REPOSITORY"),
            site_url=os.environ.get("COLLECTBOT_SITE_URL") or None,
        )
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text(block)
    if as_json:
        typer.echo(json.dumps(history_json(chosen, points, groups), sort_keys=True))
        return
    console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else 200, highlight=False)
    print_history(chosen, points, groups, console, limit)


@one_line_errors
@option_group(StoredRuns, "runs")
def site(
    out: Annotated[Path, typer.Option("--out", help="Directory to write the site to.")],
    runs: StoredRuns = StoredRuns(),
    bootstrap: BootstrapOption = None,
    force: Annotated[
        bool, typer.Option(help="Replace OUT when it is a site written before.")
    ] = False,
) -> None:
    """Write a static HTML site (no server, no network) of every history in the store."""
    from bot.site.build import SITE_MARKER, build_site

    selection, settings = runs.selection(), _settings(bootstrap)
    if out.exists() and any(out.iterdir()):
        if not (force and (out / SITE_MARKER).is_file()):
            raise UserError(f"{out}: not empty (use --force to replace a site written before)")
        shutil.rmtree(out)
    summary = build_site(runs.store, out, selection, settings)
    typer.echo(json.dumps(summary, sort_keys=True))
