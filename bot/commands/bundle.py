"""`collectbot bundle`: an offline wheel bundle of a framework and its import closure."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bot.errors import one_line_errors
from collector.errors import UserError


@one_line_errors
def bundle(
    out: Annotated[
        Path,
        typer.Option("--out", help="Bundle directory (wheels/ is reused; parts are rewritten)."),
    ],
    spec: Annotated[
        Path, typer.Option("--spec", help="Bundle spec (YAML): pins, target, base, exclusions.")
    ] = Path("images/vllm-bundle.yaml"),
    part_mb: Annotated[
        int,
        typer.Option(min=1, help="Largest part in MB (10^6 bytes); parts are equal-sized."),
    ] = 48,  # one part and a ~15 MB checkout fit a 64 MiB transfer (docs/backends.md)
    find_links: Annotated[
        list[Path] | None,
        typer.Option("--find-links", help="Extra local folder of wheels for pip (repeatable)."),
    ] = None,
    no_index: Annotated[
        bool, typer.Option("--no-index", help="Download from --find-links folders only.")
    ] = False,
    offline: Annotated[
        bool, typer.Option(help="Download nothing: package the wheels already in OUT/wheels.")
    ] = False,
) -> None:
    """Build an offline wheel bundle for a GPU runner without a package index.

    Downloads every pin of the spec for its target, checks the wheels and their closure
    (each Requires-Dist bundled, in the base image, or excluded with a reason), writes
    manifest.json and SHA256SUMS, and splits a reproducible tar into carry/NN/ parts.
    """
    from bot.bundle import build_bundle

    if not spec.is_file():
        raise UserError(f"{spec}: bundle spec not found")
    result = build_bundle(
        spec,
        out,
        part_bytes=part_mb * 1_000_000,
        find_links=find_links or [],
        no_index=no_index,
        fetch=not offline,
    )
    manifest = result.manifest
    closure = manifest["closure"]
    typer.echo(
        f"{manifest['framework']} {manifest['version']}: {len(manifest['wheels'])} wheels, "
        f"{manifest['total_wheel_bytes'] / 1e6:.1f} MB, {len(result.parts)} part(s) of at most "
        f"{max(p.stat().st_size for p in result.parts) / 1e6:.1f} MB; closure: "
        f"{len(closure['bundled'])} bundled, "
        f"{len(closure['from_base']) + len(closure['assumed_from_base'])} from the base image, "
        f"{len(closure['excluded'])} excluded"
    )
    for name in closure["unused_exclusions"]:
        typer.echo(f"warning: exclusion {name!r} is not required by any bundled wheel", err=True)
    for folder in result.carry_dirs:
        typer.echo(str(folder))
