"""Where the field's perf tables (aiconfigurator's H200 tables) are read from.

They are read at run time and never copied into the repository; one environment variable
names their folder, and every reader takes it as the default of its own flag.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ENV = "COLLECTBOT_AIC_DATA"


def default_dir() -> Path | None:
    """The folder `$COLLECTBOT_AIC_DATA` names, or None when it is unset."""
    value = os.environ.get(ENV, "").strip()
    return Path(value) if value else None


def require(path: Path | None, flag: str = "--reference-dir") -> Path:
    """`path`, or one `error:` line and exit 2 when no folder was given either way."""
    if path is None:
        print(f"error: no reference tables: pass {flag} or set {ENV}", file=sys.stderr)
        raise SystemExit(2)
    return path
