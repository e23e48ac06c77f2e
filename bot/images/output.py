"""Take a collector container's output folder back on the host, treating it as hostile.

The container (a pull request's code) could write anything into its output mount: symbolic
links to host files (`run.json -> ~/.docker/config.json`, `container.log -> a script the
next step runs`), FIFOs that hang a reader, devices, folders. Once the container is gone,
the host moves that folder aside and builds a fresh one that no container ever had mounted,
holding copies of its regular files only, each opened with `O_NOFOLLOW` and checked with
`fstat`. Everything else is dropped and named. What the host reads and writes afterwards
(recovery from the checkpoint, `container.log`, the final `run.json`) is in that fresh
folder, so no write or read can be redirected through something the container planted.
"""

from __future__ import annotations

import os
import shutil
import stat
import uuid
from pathlib import Path

from collector.errors import UserError

# A collector writes a handful of files; more than this is not a record.
MAX_ENTRIES = 1000
_KINDS = (
    (stat.S_ISLNK, "symbolic link"),
    (stat.S_ISDIR, "folder"),
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "device"),
    (stat.S_ISBLK, "device"),
)


def _kind(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), "special file")


def _copy_regular(src: Path, dst: Path) -> bool:
    """Copy one regular file without following links on either side; False if it is not one."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as fin:
        if not stat.S_ISREG(os.fstat(fin.fileno()).st_mode):
            return False
        out_fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(out_fd, "wb") as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)
    return True


def take_output(out: Path) -> list[str]:
    """Replace `out` by a fresh folder holding only its regular files; returns what was dropped.

    Call only after the container is gone (no process of it can still write).
    """
    if out.is_symlink() or not out.is_dir():
        raise UserError(f"{out}: the output folder is no longer a folder")
    aside = out.with_name(f".{out.name}.container-{uuid.uuid4().hex[:8]}")
    os.rename(out, aside)
    dropped: list[str] = []
    try:
        os.mkdir(out, 0o755)
        with os.scandir(aside) as entries:
            for count, entry in enumerate(sorted(entries, key=lambda e: e.name)):
                mode = entry.stat(follow_symlinks=False).st_mode
                if count >= MAX_ENTRIES:
                    dropped.append(f"{entry.name} (past {MAX_ENTRIES} entries)")
                elif not stat.S_ISREG(mode) or not _copy_regular(
                    Path(entry.path), out / entry.name
                ):
                    dropped.append(f"{entry.name} ({_kind(mode)})")
    finally:
        # rmtree removes links themselves and never follows them out of the folder.
        shutil.rmtree(aside, ignore_errors=True)
    return dropped
