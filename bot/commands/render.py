"""`collectbot render`: comparison.json in, the evidence comment out."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bot.cli import app
from bot.errors import one_line_errors


@app.command()
@one_line_errors
def render(
    cmp_dir: Annotated[
        Path, typer.Argument(help="Directory holding comparison.json (or the file).")
    ],
    out: Annotated[Path, typer.Option("--out", help="Markdown file to write.")],
    head_sha: Annotated[str | None, typer.Option(help="PR head SHA for the hidden marker.")] = None,
    artifacts_url: Annotated[str | None, typer.Option(help="Link to the full artifacts.")] = None,
) -> None:
    """Render the evidence comment (markdown, under GitHub's 65,536-character limit)."""
    from bot.compare.comparison import load_comparison
    from bot.render.comment import RenderOptions, render_comment

    comparison = load_comparison(cmp_dir)
    body = render_comment(comparison, RenderOptions(head_sha=head_sha, artifacts_url=artifacts_url))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(body)
    typer.echo(str(out))
