"""A local stand-in for the framework base image, for tests against a real Docker engine.

Base images cannot be pulled here, so the tests build one with `docker import` from a root
filesystem assembled out of what this machine already has: a static busybox for /bin/sh,
this interpreter's Python installation (at the same absolute path, so its run path and the
loader's search paths hold), the shared libraries that Python and the copied extension
modules link against (found with ldd), and the distributions the CPU collector needs (torch,
numpy, pyarrow, pyyaml, rich and what they require), copied file by file from this
environment by their RECORDs. Two small stand-in distributions, `vllm` and
`flashinfer-python`, carry only metadata: their versions are what the version gate reads.

Building takes about a minute (most of it torch's 500 MB); the image is tagged by a hash of
its inputs and reused while that tag exists. Run `python -m tests.docker_support` to build it
by hand.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

BASE_REPOSITORY = "collectbot-test-base"
PYTHON_REPOSITORY = "collectbot-test-python"
# What the CPU collector imports inside the image; their requirements are followed.
ROOT_DISTRIBUTIONS = ("torch", "numpy", "pyarrow", "pyyaml", "rich", "nvidia-ml-py", "pip")
STANDINS = {"vllm": "0.24.0", "flashinfer-python": "0.6.12"}
# Parts of distributions nothing in the image imports: left out to keep the image small.
_SKIP = re.compile(r"(^|/)(__pycache__|include|test|tests|testing/_internal/data)(/|$)|\.a$")
_SKIP_STDLIB = {
    "site-packages",
    "test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "__pycache__",
}
_BASE_LIBRARIES = tuple(
    Path("/lib/x86_64-linux-gnu") / name
    for name in (
        "libc.so.6",
        "libm.so.6",
        "librt.so.1",
        "libpthread.so.0",
        "libdl.so.2",
        "libutil.so.1",
        "libz.so.1",
        "libgcc_s.so.1",
        "libstdc++.so.6",
    )
)
BUSYBOX_CANDIDATES = (Path("/bin/busybox"), Path("/usr/bin/busybox"))


class BaseImageError(RuntimeError):
    pass


def _requirement_closure(roots: tuple[str, ...]) -> list[metadata.Distribution]:
    seen: dict[str, metadata.Distribution] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an optional extra's requirement that is not installed
        seen[key] = dist
        for req in dist.requires or []:
            if "extra ==" in req:
                continue
            todo.append(re.split(r"[\s<>=!~;\[(]", req.strip(), maxsplit=1)[0])
    return sorted(seen.values(), key=lambda d: d.metadata["Name"].lower())


def _busybox() -> Path:
    for path in BUSYBOX_CANDIDATES:
        # ldd fails on a static executable: it needs no loader, so it runs in a bare rootfs.
        if path.is_file() and subprocess.run(["ldd", str(path)], capture_output=True).returncode:
            return path
    raise BaseImageError("a static busybox is needed: apt-get install -y busybox-static")


class RootFS:
    """A root filesystem under `root` that mirrors host paths."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def mirror_dirs(self, host_dir: Path) -> Path:
        """Create host_dir inside the rootfs, reproducing symlinked ancestors (/lib -> usr/lib)."""
        current = Path("/")
        for part in host_dir.parts[1:]:
            current = current / part
            inside = self.root / current.relative_to("/")
            if current.is_symlink():
                if not inside.is_symlink() and not inside.exists():
                    inside.parent.mkdir(parents=True, exist_ok=True)
                    inside.symlink_to(os.readlink(current))
                current = current.resolve()
                self.mirror_dirs(current)
            else:
                inside.mkdir(parents=True, exist_ok=True)
        return self.root / current.relative_to("/")

    def copy_file(self, host_path: Path, dest: Path | None = None) -> None:
        """Copy a file (following symlinks) to the same path inside, or to `dest`."""
        target = dest if dest is not None else host_path
        parent = self.mirror_dirs(target.parent)
        out = parent / target.name
        if not out.exists():
            shutil.copy2(host_path, out, follow_symlinks=True)


def _ldd(paths: list[Path]) -> set[Path]:
    libs: set[Path] = set()
    for chunk_start in range(0, len(paths), 200):
        chunk = [str(p) for p in paths[chunk_start : chunk_start + 200]]
        out = subprocess.run(["ldd", *chunk], capture_output=True, text=True)
        for line in out.stdout.splitlines():
            match = re.search(r"=>\s+(/\S+)\s+\(", line) or re.match(r"\s+(/\S+)\s+\(", line)
            if match:
                libs.add(Path(match.group(1)))
    return libs


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(4) == b"\x7fELF"
    except OSError:
        return False


def _standin_dist(site: Path, name: str, version: str) -> None:
    dist_dir = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist_dir.mkdir(parents=True)
    (dist_dir / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        "Summary: collectbot test stand-in: metadata only, no code\n"
    )
    (dist_dir / "INSTALLER").write_text("collectbot-tests\n")
    (dist_dir / "RECORD").write_text(
        f"{dist_dir.name}/METADATA,,\n{dist_dir.name}/INSTALLER,,\n{dist_dir.name}/RECORD,,\n"
    )


def assemble_rootfs(
    root: Path, standins: dict[str, str], roots: tuple[str, ...] = ROOT_DISTRIBUTIONS
) -> None:
    fs = RootFS(root)
    for d in ("tmp", "etc", "root", "proc", "sys", "dev", "bin"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    (root / "etc" / "passwd").write_text(
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
    )
    (root / "etc" / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
    busybox = root / "bin" / "busybox"
    shutil.copy2(_busybox(), busybox)
    applets = subprocess.run([str(busybox), "--list"], capture_output=True, text=True).stdout
    for applet in applets.split():
        link = root / "bin" / applet
        if not link.exists() and applet != "busybox":
            link.symlink_to("busybox")
    # The interpreter, at its own prefix, without its site-packages and test suites.
    prefix = Path(sys.base_prefix)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stdlib = prefix / "lib" / f"python{version}"
    fs.mirror_dirs(prefix)
    inside_prefix = root / prefix.relative_to("/")
    (inside_prefix / "bin").mkdir(parents=True, exist_ok=True)
    (inside_prefix / "lib").mkdir(parents=True, exist_ok=True)
    exe = prefix / "bin" / f"python{version}"
    shutil.copy2(exe, inside_prefix / "bin" / exe.name)
    for lib in (prefix / "lib").glob("libpython*"):
        shutil.copy2(lib, inside_prefix / "lib" / lib.name, follow_symlinks=True)
    shutil.copytree(
        stdlib,
        inside_prefix / "lib" / stdlib.name,
        symlinks=True,
        ignore=lambda d, names: [n for n in names if n in _SKIP_STDLIB or n.endswith(".pyc")],
    )
    usr_bin = fs.mirror_dirs(Path("/usr/local/bin"))
    for alias in ("python3", "python", f"python{version}"):
        (usr_bin / alias).symlink_to(prefix / "bin" / f"python{version}")
    # The distributions the CPU collector imports, into the base interpreter's site-packages.
    site_inside = inside_prefix / "lib" / stdlib.name / "site-packages"
    site_inside.mkdir(parents=True, exist_ok=True)
    elf: list[Path] = [exe, *(prefix / "lib").glob("libpython*.so*")]
    elf += [p for p in (stdlib / "lib-dynload").glob("*.so")]
    for dist in _requirement_closure(roots):
        base = Path(str(dist.locate_file("")))
        for entry in dist.files or []:
            rel = str(entry)
            if rel.startswith("..") or _SKIP.search(rel):
                continue
            src = base / rel
            if not src.is_file():
                continue
            dst = site_inside / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
            if src.suffix == ".so" or ".so." in src.name:
                elf.append(src)
    for name, ver in standins.items():
        _standin_dist(site_inside, name, ver)
    # Shared libraries outside the copied trees, at their host paths, and the loader's cache.
    own = (str(prefix), str(Path(sysconfig.get_paths()["purelib"])))
    for lib in sorted(_ldd([p for p in elf if _is_elf(p)])):
        if not str(lib).startswith(own):
            fs.copy_file(lib)
    # What every Debian-based Python image has, and wheels installed later may link against.
    for lib in _BASE_LIBRARIES:
        if lib.exists():
            fs.copy_file(lib)
    for loader in (Path("/lib64/ld-linux-x86-64.so.2"), Path("/lib/ld-linux-aarch64.so.1")):
        if loader.exists():
            fs.copy_file(loader)
    if Path("/etc/ld.so.cache").exists():
        shutil.copy2("/etc/ld.so.cache", root / "etc" / "ld.so.cache")


def inputs_hash(standins: dict[str, str], roots: tuple[str, ...] = ROOT_DISTRIBUTIONS) -> str:
    """Identity of a base built here: interpreter, distributions and stand-ins."""
    digest = hashlib.sha256()
    digest.update(sys.version.encode())
    digest.update(sys.base_prefix.encode())
    for dist in _requirement_closure(roots):
        digest.update(f"{dist.metadata['Name']}=={dist.version}\n".encode())
    digest.update(repr(sorted(standins.items())).encode())
    digest.update(Path(__file__).read_bytes())
    return digest.hexdigest()[:16]


def ensure_base_image(
    client: Any,
    standins: dict[str, str] | None = None,
    roots: tuple[str, ...] = ROOT_DISTRIBUTIONS,
    repository: str = BASE_REPOSITORY,
) -> str:
    """Build (or reuse) the local base image; returns its reference."""
    import docker.errors

    standins = dict(STANDINS if standins is None else standins)
    ref = f"{repository}:{inputs_hash(standins, roots)}"
    try:
        client.images.get(ref)
        return ref
    except docker.errors.ImageNotFound:
        pass
    with tempfile.TemporaryDirectory(prefix="collectbot-base-") as tmp:
        root = Path(tmp) / "rootfs"
        root.mkdir()
        assemble_rootfs(root, standins, roots)
        tar_path = Path(tmp) / "rootfs.tar"
        with tarfile.open(tar_path, "w") as tar:
            for child in sorted(root.iterdir()):
                tar.add(child, arcname=child.name)
        repository, tag = ref.split(":")
        if True:
            client.api.import_image_from_file(
                str(tar_path),
                repository=repository,
                tag=tag,
                changes=[
                    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    'CMD ["python3"]',
                ],
            )
    client.images.get(ref)
    return ref


def engine_or_skip() -> Any:
    """The Docker engine's client; skip without one, unless COLLECTBOT_REQUIRE_DOCKER=1 (CI)."""
    import pytest

    from bot.images.engine import connect
    from collector.errors import UserError

    try:
        return connect()
    except UserError as exc:
        if os.environ.get("COLLECTBOT_REQUIRE_DOCKER") == "1":
            pytest.fail(f"COLLECTBOT_REQUIRE_DOCKER=1 but {exc}")
        pytest.skip(f"{exc} (set COLLECTBOT_REQUIRE_DOCKER=1 to make this a failure)")


def ensure_python_base(client: Any) -> str:
    """A base with this machine's Python and pip only: the stand-in for python:3.X-slim."""
    return ensure_base_image(client, standins={}, roots=("pip",), repository=PYTHON_REPOSITORY)


def _main() -> None:
    import docker

    client = docker.from_env()
    sys.stdout.write(ensure_base_image(client) + "\n")


if __name__ == "__main__":
    _main()


def site_packages_inside() -> str:
    """Where the stand-in base image's interpreter reads .pth files (this interpreter's prefix)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    return f"{sys.base_prefix}/lib/python{version}/site-packages"


def add_startup_hook(client: Any, image: str, script: str, tag: str) -> Any:
    """What a hostile job can do with an engine it shares: build FROM `image` and add one layer
    whose `.pth` file runs `script` at every Python start inside. Returns the new image; its
    labels (the content hash among them) are inherited from `image`."""
    import io

    dockerfile = (
        f"FROM {image}\n"
        "COPY hook.py /opt/hook/hook.py\n"
        f"COPY hook.pth {site_packages_inside()}/zz_hook.pth\n"
    )
    files = {
        "Dockerfile": dockerfile.encode(),
        "hook.py": script.encode(),
        "hook.pth": b"import runpy; runpy.run_path('/opt/hook/hook.py')\n",
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    built, _ = client.images.build(
        fileobj=buf, custom_context=True, tag=tag, rm=True, network_mode="none", pull=False
    )
    return built
