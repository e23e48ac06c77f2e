"""`collectbot store put|get|list|prune`: keep run records as baselines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.commands.options import DEFAULT_STORE, StoreOption
from bot.errors import one_line_errors
from collector.errors import UserError

if TYPE_CHECKING:
    from bot.store import RunStore

store_app = typer.Typer(
    name="store",
    help="Keep run records in a run store (a directory or an fsspec URL such as "
    "s3://bucket/prefix), keyed by backend, framework version, GPU and ops.",
    no_args_is_help=True,
)


def open_store(url: str) -> RunStore:
    """The store at `url`, read-only when the job's configuration says so
    (COLLECTBOT_STORE_ACCESS=read: every job of a pull request)."""
    from bot.store import RunStore, read_only_from_env

    return RunStore(url, read_only=read_only_from_env())


@store_app.command("put")
@one_line_errors
def put(
    run_dir: Annotated[Path, typer.Argument(help="Run record directory to store.")],
    store: StoreOption = DEFAULT_STORE,
    ref: Annotated[
        str | None, typer.Option(help="Label the run with a ref (e.g. main) to select it later.")
    ] = None,
    keep: Annotated[
        int, typer.Option(min=1, help="Keep at most this many runs per key (oldest go first).")
    ] = 20,
) -> None:
    """Store a run record (validated and checksummed); prints the entry as JSON."""
    entry = open_store(store).put(run_dir, ref=ref, keep=keep)
    typer.echo(json.dumps(entry.summary(), sort_keys=True))


@store_app.command("list")
@one_line_errors
def list_entries(
    store: StoreOption = DEFAULT_STORE,
    like: Annotated[
        Path | None,
        typer.Option(help="Only runs with the key (backend, version, GPU, ops) of this record."),
    ] = None,
    ref: Annotated[str | None, typer.Option(help="Only runs stored under this ref label.")] = None,
) -> None:
    """List stored runs, oldest first, one JSON object per line."""
    from bot.store import key_of
    from collector.record import read_record

    key = key_of(read_record(like).meta) if like is not None else None
    for entry in open_store(store).entries(key, ref):
        typer.echo(json.dumps(entry.summary(), sort_keys=True))


@store_app.command("get")
@one_line_errors
def get(
    out: Annotated[Path, typer.Option("--out", help="Directory to write the run record to.")],
    store: StoreOption = DEFAULT_STORE,
    run_id: Annotated[str | None, typer.Option(help="The stored run with this run id.")] = None,
    previous_for: Annotated[
        Path | None,
        typer.Option(
            help="The latest complete run with this record's key (its baseline), not itself."
        ),
    ] = None,
    ref: Annotated[
        str | None, typer.Option(help="With --previous-for: only runs under this ref label.")
    ] = None,
) -> None:
    """Fetch a stored run record, verifying every checksum; prints its directory."""
    from bot.store import key_of
    from collector.record import read_record

    run_store = open_store(store)
    if (run_id is None) == (previous_for is None):
        raise UserError("give exactly one of --run-id and --previous-for")
    if run_id is not None:
        entry = run_store.find(run_id)
    else:
        assert previous_for is not None
        meta = read_record(previous_for).meta
        found = run_store.latest(key_of(meta), ref=ref, exclude_run_id=meta.get("run_id"))
        if found is None:
            raise UserError(f"{store}: no stored run for {key_of(meta).label}")
        entry = found
    path = run_store.get(entry, out)
    read_record(path)
    typer.echo(str(path))


@store_app.command("prune")
@one_line_errors
def prune(
    like: Annotated[Path, typer.Option(help="Prune the key of this run record.")],
    keep: Annotated[int, typer.Option(min=1, help="Runs to keep for that key.")],
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Delete all but the newest runs of one key."""
    from bot.store import key_of
    from collector.record import read_record

    removed = open_store(store).prune(key_of(read_record(like).meta), keep)
    for entry in removed:
        typer.echo(json.dumps(entry.summary(), sort_keys=True))
