"""Build the bot's own image (the root Dockerfile) offline, from a folder of wheels.

The context is assembled here: the Dockerfile, collectbot's wheel (built from this checkout)
and the wheels of its runtime dependencies for the base image's Python and platform (from
the package index, or a wheel folder given with --find-links). The build itself runs with
no network, so the image holds exactly those wheels.

    python scripts/build_bot_image.py [--base-image REF] [--tag collectbot:VERSION]
"""

from __future__ import annotations

import argparse
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BASE = re.search(
    r"^ARG BASE_IMAGE=(\S+)$", (ROOT / "Dockerfile").read_text(), flags=re.MULTILINE
)


def default_base() -> str:
    if DEFAULT_BASE is None:
        raise SystemExit("error: Dockerfile: no ARG BASE_IMAGE default")
    return DEFAULT_BASE.group(1)


def base_python(client: Any, base: str) -> str:
    """The base image's Python version as 'X.Y', asked of its own interpreter."""
    out = client.containers.run(
        base,
        ["python3", "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
        entrypoint=[],
        network_mode="none",
        remove=True,
    )
    return bytes(out).decode().strip()


def gather_wheels(dest: Path, python: str, find_links: list[str]) -> None:
    """collectbot's wheel plus its runtime dependencies' binary wheels for `python`."""
    dest.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--quiet", "--no-deps", "-w", str(dest), str(ROOT)], check=True)
    (wheel,) = dest.glob("collectbot-*.whl")
    machine = platform.machine()
    platforms = [f"manylinux_2_{n}_{machine}" for n in (17, 24, 27, 28, 31, 34, 35, 36, 38, 39)] + [
        f"manylinux2014_{machine}",
        f"linux_{machine}",
    ]
    links = [arg for link in find_links for arg in ("--find-links", link)]
    subprocess.run(
        [*pip, "download", "--quiet", "--only-binary=:all:", "--python-version", python,
         *(arg for p in platforms for arg in ("--platform", p)), *links,
         "-d", str(dest), str(wheel)],
        check=True,
    )  # fmt: skip


def build(base: str, tag: str, find_links: list[str]) -> dict[str, Any]:
    import docker

    client = docker.from_env()
    python = base_python(client, base)
    with tempfile.TemporaryDirectory(prefix="collectbot-bot-image-") as tmp:
        ctx = Path(tmp)
        shutil.copy2(ROOT / "Dockerfile", ctx / "Dockerfile")
        gather_wheels(ctx / "wheels", python, find_links)
        wheels_mb = sum(p.stat().st_size for p in (ctx / "wheels").iterdir()) / 2**20
        image, _ = client.images.build(
            path=str(ctx),
            tag=tag,
            buildargs={"BASE_IMAGE": base},
            network_mode="none",
            rm=True,
            forcerm=True,
        )
    base_size = client.images.get(base).attrs["Size"]
    size = image.attrs["Size"]
    return {
        "tag": tag,
        "id": image.id,
        "python": python,
        "wheels_mb": round(wheels_mb, 1),
        "size_mb": round(size / 2**20, 1),
        "added_mb": round((size - base_size) / 2**20, 1),
    }


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from bot import __version__

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-image", default=default_base())
    parser.add_argument("--tag", default=f"collectbot:{__version__}")
    parser.add_argument("--find-links", action="append", default=[])
    args = parser.parse_args()
    result = build(args.base_image, args.tag, args.find_links)
    print(" ".join(f"{k}={v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
