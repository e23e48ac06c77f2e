"""Output of code we do not trust, as it reaches a GitHub Actions job log.

The runner reads every line a step prints and acts on workflow commands in it: `::error ...`
annotations, `::add-mask::`, `::set-output ...` (deprecated, still honoured), and whatever
GitHub adds later. A pull request's code prints through `collect` (its kernels, its
collector, its container) and through `image build` (its Dockerfile's steps). So while such
output flows, workflow commands are switched off with `::stop-commands::<token>`, the token
random and printed only by this process, and switched back on with `::<token>::` afterwards,
as GitHub's documentation prescribes. The runner reads commands from stdout and stderr
alike; the fence goes to stderr, so stdout keeps only the command's result (workflows capture
it: `ref=$(collectbot image ensure ...)`). Outside Actions (`GITHUB_ACTIONS` unset) nothing
is printed.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def workflow_commands_off() -> Iterator[str | None]:
    """Stop the runner from acting on workflow commands until the block ends."""
    if os.environ.get("GITHUB_ACTIONS") != "true":
        yield None
        return
    token = secrets.token_hex(16)
    sys.stdout.flush()
    print(f"::stop-commands::{token}", file=sys.stderr, flush=True)
    try:
        yield token
    finally:
        sys.stdout.flush()
        print(f"::{token}::", file=sys.stderr, flush=True)
