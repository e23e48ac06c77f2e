"""Render what maintainers read to PNG, to look at the result rather than the source.

    python scripts/screenshots.py COMMENT.md REPORT.html OUT_DIR

Writes OUT_DIR/chart-N.png (each Mermaid block of the comment, drawn by mermaid-cli),
OUT_DIR/comment.png (the comment as GitHub-flavoured HTML, <details> opened, charts inlined)
and OUT_DIR/report.png (the HTML report), all through headless Chromium.

Needs Chromium (Debian: `apt-get install -y chromium`) and mermaid-cli
(`PUPPETEER_SKIP_DOWNLOAD=1 npm install @mermaid-js/mermaid-cli`; MMDC names its `mmdc` when
it is not on PATH). CHROMIUM names the browser (default /usr/bin/chromium).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from markdown_it import MarkdownIt

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
MERMAID = re.compile(r"^```mermaid\n(.*?)^```$", re.S | re.M)
# Enough of GitHub's look that tables, code and <details> read as they do there (a wide table
# scrolls inside the column, as on GitHub, rather than spilling past it).
STYLE = """
body { font: 14px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1f2328;
       max-width: 880px; margin: 16px; }
table { border-collapse: collapse; margin: 8px 0; display: block; width: max-content;
        max-width: 100%; overflow: auto; } th, td { border: 1px solid #d0d7de;
       padding: 4px 10px; } th { background: #f6f8fa; }
code { background: #eff1f3; padding: 1px 4px; border-radius: 4px; font-size: 12px; }
pre { background: #f6f8fa; padding: 10px; overflow: auto; } pre code { background: none; }
blockquote { border-left: 4px solid #d0d7de; margin: 0; padding: 0 12px; color: #59636e; }
details { margin: 6px 0; } summary { cursor: pointer; } img { max-width: 100%; }
"""


def _chromium(args: list[str]) -> None:
    subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
        check=True,
        capture_output=True,
        timeout=120,
    )


def _mmdc() -> list[str]:
    found = os.environ.get("MMDC") or shutil.which("mmdc")
    return [found] if found else ["npx", "--no-install", "mmdc"]


def charts(comment: str, out: Path) -> str:
    """Draw each Mermaid block to chart-N.png; the comment with the blocks as <img>s."""
    config = out / "puppeteer.json"
    config.write_text(json.dumps({"executablePath": CHROMIUM, "args": ["--no-sandbox"]}))
    count = 0

    def draw(match: re.Match[str]) -> str:
        nonlocal count
        count += 1
        source = out / f"chart-{count}.mmd"
        source.write_text(match.group(1))
        png = out / f"chart-{count}.png"
        subprocess.run(
            [*_mmdc(), "-p", str(config), "-i", str(source), "-o", str(png), "-w", "800"],
            check=True,
            capture_output=True,
            timeout=180,
        )
        return f'<img alt="chart {count}" src="{png.name}">\n'

    return MERMAID.sub(draw, comment)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    comment, report, out = Path(argv[0]), Path(argv[1]), Path(argv[2]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    body = charts(comment.read_text(), out)
    md = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough")
    html = md.render(body).replace("<details>", "<details open>")
    page = out / "comment.html"
    page.write_text(f"<!doctype html><meta charset='utf-8'><style>{STYLE}</style>{html}")
    _chromium([f"--screenshot={out / 'comment.png'}", "--window-size=920,4200", page.as_uri()])
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "report.html"
        shutil.copy(report, copy)
        _chromium([f"--screenshot={out / 'report.png'}", "--window-size=1320,3600", copy.as_uri()])
    for name in sorted(p.name for p in out.glob("*.png")):
        print(out / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
