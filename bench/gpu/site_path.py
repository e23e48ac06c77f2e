"""The import path of a `pip install --target` folder, and proof that every wheel imports.

A `--target` folder on PYTHONPATH is not a site directory, so Python reads none of its `.pth`
files; a wheel that puts its package behind one (nvidia-cutlass-dsl, which FA4 imports as
`cutlass`) then installs fine and fails at import. This writes `TARGET/.pythonpath` (the
target, then each folder a `.pth` file names; `import` lines are start-up hooks, skipped) and
checks that each top-level module each wheel ships is found on that path (found, not run).

    python3 bench/gpu/site_path.py TARGET WHEEL...    # prints the path; exit 6 if one is not found

Standard library only: it runs on the GPU runner before anything else is installed.
"""

from __future__ import annotations

import importlib.util
import sys
import zipfile
from pathlib import Path


def _is_path(line: str) -> bool:
    """A `.pth` line that names a folder (not blank, a comment or an `import` hook)."""
    line = line.strip()
    return bool(line) and not line.startswith(("#", "import ", "import\t"))


def pth_folders(target: Path) -> list[Path]:
    """The folders the `.pth` files in `target` name, in file order, existing ones only."""
    folders: list[Path] = []
    for pth in sorted(target.glob("*.pth")):
        for line in filter(_is_path, pth.read_text().splitlines()):
            folder = (target / line.strip()).resolve()
            if folder.is_dir() and folder not in folders:
                folders.append(folder)
    return folders


def shipped_modules(wheel: Path) -> set[str]:
    """Top-level modules a wheel installs: at its root, or behind a `.pth` file it ships."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        roots = [""]
        for name in names:
            if "/" not in name and name.endswith(".pth"):
                lines = zf.read(name).decode(errors="replace").splitlines()
                roots += [f"{ln.strip().rstrip('/')}/" for ln in lines if _is_path(ln)]
    modules: set[str] = set()
    for name in names:
        for root in roots:
            if not name.startswith(root):
                continue
            first, _, rest = name[len(root) :].partition("/")
            if first.endswith((".dist-info", ".data")) or first.endswith(".pth") or not first:
                continue
            # A folder is a package only if its name is one (not `pyzmq.libs`, auditwheel's).
            module = first if rest else first.split(".")[0]
            if (rest or first.endswith((".py", ".so", ".pyd"))) and module.isidentifier():
                modules.add(module)
    return modules


def main(argv: list[str]) -> int:
    if len(argv) < 1:
        print("error: usage: site_path.py TARGET [WHEEL...]", file=sys.stderr)
        return 2
    target = Path(argv[0]).resolve()
    path = [target, *pth_folders(target)]
    text = ":".join(str(p) for p in path)
    (target / ".pythonpath").write_text(text + "\n")
    sys.path[:0] = [str(p) for p in path]
    missing = sorted(
        f"{module} ({Path(wheel).name})"
        for wheel in argv[1:]
        for module in shipped_modules(Path(wheel))
        if importlib.util.find_spec(module) is None
    )
    if missing:
        print(
            f"error: installed, but not importable from {text}: {', '.join(missing)}",
            file=sys.stderr,
        )
        return 6
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
