"""Fill a real filesystem while a run record is written (run by tests/test_disk_full.py).

Runs inside a private mount namespace (`unshare --mount --map-root-user`), so it can mount a
small tmpfs without touching the host's mounts; whatever it wants the test to see it copies
out of the tmpfs into OUT, with a `result.json`. Two scenarios:

- `collect`: `collectbot collect` on a 128 KiB tmpfs fills it mid-run; then the tmpfs is
  grown and `collect --resume` finishes the same record.
- `finalize`: a valid record on a tmpfs, the rest of the tmpfs filled with ballast, then the
  record is finalised again with more results: the write fails; the ballast goes and the
  same finalize succeeds.

By hand: unshare --mount --map-root-user python tests/disk_full_driver.py collect /tmp/mnt /tmp/out
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

COLLECT = [
    "collect",
    "--smoke",
    "--runs",
    "40",
    "--samples",
    "5",
    "--warmup",
    "0",
    "--target-sample-ms",
    "0.5",
    "--idle-ratio",
    "0",
    # Every case takes all 40 runs: the test counts them (exactly once, none lost).
    "--target-ci",
    "0",
    "--quiet",
]


def mount_tmpfs(where: Path, size: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)


def snapshot(src: Path, dest: Path) -> list[str]:
    shutil.copytree(src, dest)
    return sorted(p.name for p in src.iterdir())


def collect_scenario(mnt: Path, out: Path) -> dict[str, object]:
    mount_tmpfs(mnt, "128k")
    run = mnt / "run"
    cmd = [sys.executable, "-m", "bot", *COLLECT, "--out", str(run)]
    full = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    listing = snapshot(run, out / "after-full")
    subprocess.run(["mount", "-o", "remount,size=64m", str(mnt)], check=True)
    resumed = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=300)
    snapshot(run, out / "resumed")
    return {
        "full": {"code": full.returncode, "stderr": full.stderr, "stdout": full.stdout},
        "listing_after_full": listing,
        "resumed": {"code": resumed.returncode, "stderr": resumed.stderr},
    }


def finalize_scenario(mnt: Path, out: Path) -> dict[str, object]:
    import numpy as np

    from collector.errors import RecordWriteError
    from collector.record import CheckpointState, finalize
    from tests.factories import gemm_case, run_result, simulated_runs, write_record

    mount_tmpfs(mnt, "1m")
    rng = np.random.default_rng(3)
    first = [gemm_case(m) for m in (1, 2)]
    run = write_record(mnt / "run", first, lambda c: simulated_runs(rng, 1.0), status="partial")
    meta = json.loads((run / "run.json").read_text())
    snapshot(run, out / "before")
    ballast = mnt / "ballast"
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    more = [gemm_case(m) for m in range(1, 65)]
    state = CheckpointState()
    for case in more:
        state.runs[case.key] = [
            run_result(case.key, i, list(r), inner=10, kernel_source="k")
            for i, r in enumerate(simulated_runs(rng, 1.0, runs=6, samples=64))
        ]
    try:
        finalize(run, meta, more, state, "partial")
        error = None
    except RecordWriteError as exc:
        error = str(exc)
    listing = snapshot(run, out / "after-full")
    ballast.unlink()
    finalize(run, meta, more, state, "complete")
    snapshot(run, out / "after-free")
    return {"error": error, "listing_after_full": listing}


def main() -> int:
    scenario, mnt, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    out.mkdir(parents=True, exist_ok=True)
    result = collect_scenario(mnt, out) if scenario == "collect" else finalize_scenario(mnt, out)
    (out / "result.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
