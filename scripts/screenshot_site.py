#!/usr/bin/env python3
"""Headless-Chromium screenshots of a `collectbot site`: each history's overview, its first
page of cases, and the page of its first stepped case (the first case the change-point
table links to).

Chromium runs with every host name unresolvable, so a page that needed the network would
show it. Usage: scripts/screenshot_site.py SITE_DIR --out DIR [--chromium PATH]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CASE_LINK = re.compile(r'href="(case-[0-9a-f]{16}\.html)"')
GROUP_LINK = re.compile(r'href="(group-[a-z0-9._+-]+-1\.html)"')


def screenshot(chromium: str, page: Path, png: Path, height: int) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                f"--window-size=1200,{height}",
                f"--screenshot={png}",
                page.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    args = parser.parse_args()
    series = sorted(p.parent for p in args.site.glob("*/index.html"))
    if not series:
        print(f"error: {args.site}: no history pages (is it a collectbot site?)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for n, directory in enumerate(series, 1):
        overview = directory / "index.html"
        screenshot(args.chromium, overview, args.out / f"overview-{n}.png", 1600)
        print(args.out / f"overview-{n}.png")
        found = GROUP_LINK.search(overview.read_text())
        if found:
            screenshot(args.chromium, directory / found.group(1), args.out / f"group-{n}.png", 1400)
            print(args.out / f"group-{n}.png")
        found = CASE_LINK.search(overview.read_text())
        if found:
            screenshot(args.chromium, directory / found.group(1), args.out / f"case-{n}.png", 1100)
            print(args.out / f"case-{n}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
