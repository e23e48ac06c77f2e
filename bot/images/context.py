"""The collector image's build context and its content hash (pure: no engine).

The context holds exactly what goes into the image, and nothing else is sent to the engine:
the Dockerfile, the dependency requirements, an optional wheel bundle, the collector's sources
and case files, and the framework's pins. The content hash covers every file's path and
bytes plus the build arguments and the base image's identity (its digest, or the local image
id of an unpinned local base), so an unchanged input maps to the same tag and is never
rebuilt, and any change maps to a new one. Tar headers are normalised (mtime, owner, mode),
so the engine's layer cache sees the same bytes for the same files.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from collector.errors import UserError
from collector.pins import FrameworkPins

REPO_ROOT = Path(__file__).resolve().parents[2]
# A checkout's images/, else the copy an installed wheel carries (pyproject's force-include).
_CHECKOUT_IMAGES = REPO_ROOT / "images"
IMAGES_DIR = (
    _CHECKOUT_IMAGES
    if (_CHECKOUT_IMAGES / "collector.Dockerfile").is_file()
    else Path(__file__).resolve().parent / "data"
)
DOCKERFILE = IMAGES_DIR / "collector.Dockerfile"
REQUIREMENTS = IMAGES_DIR / "collector-requirements.txt"
COLLECTOR_DIR = REPO_ROOT / "collector"
HASH_VERSION = "collectbot-image-context-v1"


@dataclass(frozen=True)
class BuildInputs:
    pins: FrameworkPins
    # The reference FROM uses, and what identifies its bytes (a digest or a local image id).
    base_ref: str
    base_identity: str
    dockerfile: Path = DOCKERFILE
    requirements: Path = REQUIREMENTS
    collector_dir: Path = COLLECTOR_DIR
    wheels_dir: Path | None = None


@dataclass
class BuildContext:
    files: dict[str, bytes]
    build_args: dict[str, str]
    content_hash: str
    base_identity: str
    wheels: list[str] = field(default_factory=list)

    def tar_bytes(self) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            dirs: set[str] = set()
            for name in sorted(self.files):
                parts = name.split("/")[:-1]
                for i in range(1, len(parts) + 1):
                    d = "/".join(parts[:i])
                    if d not in dirs:
                        dirs.add(d)
                        info = tarfile.TarInfo(d)
                        info.type = tarfile.DIRTYPE
                        info.mode = 0o755
                        tar.addfile(_normalise(info))
                data = self.files[name]
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(_normalise(info), io.BytesIO(data))
        return buf.getvalue()


def _normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UserError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None


def collector_files(collector_dir: Path) -> dict[str, bytes]:
    """The collector's sources and case files, as the image gets them."""
    if not (collector_dir / "__init__.py").is_file():
        raise UserError(f"{collector_dir}: not the collector package (no __init__.py)")
    out = {}
    for path in sorted(collector_dir.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".yaml") and "__pycache__" not in path.parts:
            out[f"collector/{path.relative_to(collector_dir).as_posix()}"] = path.read_bytes()
    return out


def pins_json(pins: FrameworkPins) -> bytes:
    return (json.dumps(pins.to_json(), indent=2, sort_keys=True) + "\n").encode()


def assemble(inputs: BuildInputs) -> BuildContext:
    files: dict[str, bytes] = {
        "Dockerfile": _read(inputs.dockerfile, "Dockerfile"),
        "requirements.txt": _read(inputs.requirements, "requirements file"),
        "pins.json": pins_json(inputs.pins),
    }
    files.update(collector_files(inputs.collector_dir))
    wheels: list[str] = []
    if inputs.wheels_dir is not None:
        if not inputs.wheels_dir.is_dir():
            raise UserError(f"--wheels {inputs.wheels_dir}: not a directory")
        for whl in sorted(inputs.wheels_dir.glob("*.whl")):
            files[f"wheels/{whl.name}"] = whl.read_bytes()
            wheels.append(whl.name)
        if not wheels:
            raise UserError(f"--wheels {inputs.wheels_dir}: holds no .whl files")
    # COPY wheels/ needs the folder even when there is no bundle.
    files.setdefault("wheels/README", b"Wheel bundle for offline builds: none given.\n")
    build_args = {
        "BASE_IMAGE": inputs.base_ref,
        "BASE_REF": inputs.base_ref,
        "FRAMEWORK": inputs.pins.name,
        "FRAMEWORK_VERSION": inputs.pins.version,
    }
    digest = hashlib.sha256()
    digest.update(f"{HASH_VERSION}\nbase={inputs.base_identity}\n".encode())
    for key in sorted(build_args):
        digest.update(f"arg {key}={build_args[key]}\n".encode())
    for name in sorted(files):
        digest.update(f"file {name} {hashlib.sha256(files[name]).hexdigest()}\n".encode())
    content_hash = digest.hexdigest()
    build_args["CONTENT_HASH"] = content_hash
    return BuildContext(
        files=files,
        build_args=build_args,
        content_hash=content_hash,
        base_identity=inputs.base_identity,
        wheels=wheels,
    )


def image_tag(repository: str, pins: FrameworkPins, content_hash: str) -> str:
    """`<repository>:<framework version>-<16 hex of the content hash>`."""
    return f"{repository}:{pins.version}-{content_hash[:16]}"
