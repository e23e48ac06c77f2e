"""Offline wheel bundles: a framework's wheel and its import closure, for a runner without an index.

Built once on a connected machine from a spec (`images/vllm-bundle.yaml`):
1. `pip download --no-deps` of every exact pin for the target (Python, ABI, platforms);
2. each wheel checked: one per pin, the pinned version, a tag the target accepts;
3. the closure checked against the wheels' own metadata: every `Requires-Dist` of every
   bundled wheel (markers evaluated for the target) is bundled at a matching version,
   provided by the base image, or excluded in the spec with a reason;
4. written as `manifest.json` (every wheel's sha256 and size, the closure report, the
   install command), `SHA256SUMS`, a reproducible tar, and that tar split into parts of at
   most `part_bytes` each, one folder per part with `PARTS.sha256`, ready to carry.

Install on the runner (`bench/gpu/install_bundle.sh` does all of it):
    cat *.part* > bundle.tar && sha256sum -c PARTS.sha256 && tar -xf bundle.tar
    pip install --no-index --no-deps --target DIR bundle/wheels/*.whl
    export PYTHONPATH=$(cat DIR/.pythonpath)   # DIR and the folders its .pth files name
"""

from __future__ import annotations

import io
import json
import math
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from email.parser import Parser
from pathlib import Path
from typing import Any

import yaml
from packaging.markers import InvalidMarker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import (
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import Version

from collector.errors import UserError
from collector.record import sha256_file

MANIFEST = "manifest.json"
SHA256SUMS = "SHA256SUMS"
PARTS_SUMS = "PARTS.sha256"
BUNDLE_DIR = "bundle"
MB = 1_000_000
INSTALL_COMMAND = "pip install --no-index --no-deps --target DIR bundle/wheels/*.whl"


@dataclass(frozen=True)
class Target:
    python: str
    implementation: str
    abi: str
    platforms: tuple[str, ...]

    @property
    def version_tuple(self) -> tuple[int, int]:
        major, minor = self.python.split(".")[:2]
        return int(major), int(minor)

    def tags(self) -> set[Tag]:
        """Every wheel tag an interpreter of this target accepts."""
        version = self.version_tuple
        found = set(cpython_tags(version, abis=[self.abi], platforms=list(self.platforms)))
        found |= set(
            compatible_tags(
                version, interpreter=f"cp{version[0]}{version[1]}", platforms=self.platforms
            )
        )
        return found

    def marker_environment(self) -> dict[str, str]:
        """Environment markers of the target (PEP 508), for evaluating Requires-Dist."""
        return {
            "implementation_name": "cpython",
            "implementation_version": f"{self.python}.0",
            "os_name": "posix",
            "platform_machine": "x86_64",
            "platform_python_implementation": "CPython",
            "platform_release": "",
            "platform_system": "Linux",
            "platform_version": "",
            "python_full_version": f"{self.python}.0",
            "python_version": self.python,
            "sys_platform": "linux",
            "extra": "",
        }

    def pip_args(self) -> list[str]:
        args = [
            "--only-binary=:all:",
            "--python-version",
            self.python,
            "--implementation",
            self.implementation,
            "--abi",
            self.abi,
        ]
        for platform in self.platforms:
            args += ["--platform", platform]
        return args


@dataclass(frozen=True)
class BundleSpec:
    framework: str
    version: str
    target: Target
    pins: tuple[Requirement, ...]
    base: dict[NormalizedName, str | None]
    excluded: dict[NormalizedName, str]
    source: str

    def pinned_version(self, requirement: Requirement) -> str:
        (spec,) = requirement.specifier
        return spec.version


def _mapping(data: Any, key: str, source: str, required: bool = True) -> dict[str, Any]:
    value = data.get(key) if isinstance(data, dict) else None
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"{source}: '{key}' must be a mapping")
    return value


def _yaml_where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    where = f" line {mark.line + 1}" if mark is not None else ""
    return f"{where}{f' ({problem})' if problem else ''}"


def load_spec(path: Path) -> BundleSpec:
    """Read and validate a bundle spec; every bad field is a one-line error."""
    source = str(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise UserError(f"{source}: cannot read the bundle spec ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise UserError(f"{source}:{_yaml_where(exc)} not valid YAML") from None
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a mapping")
    framework, version = data.get("framework"), data.get("version")
    if not isinstance(framework, str) or not isinstance(version, str):
        raise UserError(f"{source}: 'framework' and 'version' must be strings (quote versions)")
    target_data = _mapping(data, "target", source)
    platforms = target_data.get("platforms")
    if not isinstance(platforms, list) or not platforms:
        raise UserError(f"{source}: target.platforms must be a non-empty list")
    target = Target(
        python=str(target_data.get("python", "")),
        implementation=str(target_data.get("implementation", "cp")),
        abi=str(target_data.get("abi", "")),
        platforms=tuple(str(p) for p in platforms),
    )
    if not target.python.count(".") == 1 or not target.abi:
        raise UserError(f"{source}: target.python must look like 3.12 and target.abi be set")
    wheels = data.get("wheels")
    if not isinstance(wheels, list) or not wheels:
        raise UserError(f"{source}: 'wheels' must be a non-empty list of name==version pins")
    pins: list[Requirement] = []
    seen: set[str] = set()
    for item in wheels:
        try:
            req = Requirement(str(item))
        except InvalidRequirement:
            raise UserError(f"{source}: wheels: {item!r} is not a requirement") from None
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
            raise UserError(f"{source}: wheels: {item!r} must pin one exact version (name==X)")
        canonical = canonicalize_name(req.name)
        if canonical in seen:
            raise UserError(f"{source}: wheels: {req.name} is pinned twice")
        seen.add(canonical)
        pins.append(req)
    if canonicalize_name(framework) not in seen:
        raise UserError(f"{source}: wheels must pin the framework itself ({framework}=={version})")
    base_raw = _mapping(data, "base", source, required=False)
    excluded_raw = _mapping(data, "excluded", source, required=False)
    for key, reason in excluded_raw.items():
        if not isinstance(reason, str) or not reason.strip():
            raise UserError(f"{source}: excluded.{key} needs a reason")
    spec = BundleSpec(
        framework=framework,
        version=version,
        target=target,
        pins=tuple(pins),
        base={canonicalize_name(k): None if v is None else str(v) for k, v in base_raw.items()},
        excluded={canonicalize_name(k): str(v) for k, v in excluded_raw.items()},
        source=source,
    )
    framework_pin = next(p for p in pins if canonicalize_name(p.name) == framework)
    if spec.pinned_version(framework_pin) != version:
        raise UserError(
            f"{source}: wheels pins {framework_pin} but 'version' says {version}; make them agree"
        )
    return spec


def lacking(spec: BundleSpec, names: Sequence[str]) -> list[str]:
    """The distributions among `names` that the bundle neither pins nor finds in its base."""
    pinned = {canonicalize_name(p.name) for p in spec.pins}
    return [n for n in names if canonicalize_name(n) not in pinned | set(spec.base)]


@dataclass
class WheelInfo:
    path: Path
    name: NormalizedName
    version: str
    tags: frozenset[Tag]
    sha256: str
    size: int
    requires: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.path.name,
            "name": str(self.name),
            "version": self.version,
            "sha256": self.sha256,
            "bytes": self.size,
        }


def read_wheel(path: Path) -> WheelInfo:
    """Name, version and tags from the file name; requirements from its METADATA."""
    try:
        name, version, _, tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename:
        raise UserError(f"{path}: not a wheel file name") from None
    try:
        with zipfile.ZipFile(path) as zf:
            metas = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
            if len(metas) != 1:
                raise UserError(f"{path}: expected one .dist-info/METADATA, found {len(metas)}")
            text = zf.read(metas[0]).decode("utf-8", "replace")
    except zipfile.BadZipFile:
        raise UserError(f"{path}: not a valid wheel (bad zip)") from None
    message = Parser().parsestr(text, headersonly=True)
    requires = [str(r) for r in (message.get_all("Requires-Dist") or [])]
    return WheelInfo(
        path=path,
        name=name,
        version=str(version),
        tags=frozenset(tags),
        sha256=sha256_file(path),
        size=path.stat().st_size,
        requires=requires,
    )


Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def _run(cmd: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, check=False)


def _present(spec: BundleSpec, wheel_dir: Path) -> set[NormalizedName]:
    have: set[NormalizedName] = set()
    for path in wheel_dir.glob("*.whl"):
        try:
            name, version, _, _ = parse_wheel_filename(path.name)
        except InvalidWheelFilename:
            continue
        for pin in spec.pins:
            if canonicalize_name(pin.name) == name and str(version) == spec.pinned_version(pin):
                have.add(name)
    return have


def download(
    spec: BundleSpec,
    wheel_dir: Path,
    *,
    find_links: Sequence[Path] = (),
    no_index: bool = False,
    run: Runner = _run,
) -> list[str]:
    """`pip download` the pins not already in `wheel_dir`; returns the pins it fetched."""
    wheel_dir.mkdir(parents=True, exist_ok=True)
    have = _present(spec, wheel_dir)
    missing = [str(p) for p in spec.pins if canonicalize_name(p.name) not in have]
    if not missing:
        return []
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check"]
    cmd += [*spec.target.pip_args(), "-d", str(wheel_dir)]
    for link in find_links:
        cmd += ["--find-links", str(link)]
    if no_index:
        cmd.append("--no-index")
    proc = run(cmd + missing)
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or "").splitlines() if ln.startswith("ERROR")]
        reason = lines[0] if lines else f"exit code {proc.returncode}"
        raise UserError(f"pip download failed for {len(missing)} pin(s): {reason}")
    return missing


def resolve(spec: BundleSpec, wheel_dir: Path) -> list[WheelInfo]:
    """Exactly one target-compatible wheel per pin, at the pinned version."""
    accepted = spec.target.tags()
    by_name: dict[NormalizedName, list[WheelInfo]] = {}
    for path in sorted(wheel_dir.glob("*.whl")):
        info = read_wheel(path)
        by_name.setdefault(info.name, []).append(info)
    chosen: list[WheelInfo] = []
    for pin in spec.pins:
        name, version = canonicalize_name(pin.name), spec.pinned_version(pin)
        candidates = [w for w in by_name.get(name, []) if w.version == version]
        if not candidates:
            raise UserError(f"{wheel_dir}: no wheel for {pin} (download it or check the pin)")
        usable = [w for w in candidates if w.tags & accepted]
        if not usable:
            tags = ", ".join(sorted(str(t) for t in candidates[0].tags))
            raise UserError(
                f"{candidates[0].path.name}: tags {tags} do not run on "
                f"cp{spec.target.python.replace('.', '')} {spec.target.platforms[0]}"
            )
        if len(usable) > 1:
            names = ", ".join(w.path.name for w in usable)
            raise UserError(f"{wheel_dir}: several wheels for {pin}: {names}; keep one")
        chosen.append(usable[0])
    return chosen


@dataclass
class ClosureReport:
    bundled: list[str] = field(default_factory=list)
    from_base: list[str] = field(default_factory=list)
    assumed_from_base: list[str] = field(default_factory=list)
    excluded: dict[str, str] = field(default_factory=dict)
    unused_exclusions: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def check_closure(spec: BundleSpec, wheels: Sequence[WheelInfo]) -> ClosureReport:
    """Every requirement of every bundled wheel must be met, provided, or excluded."""
    env = spec.target.marker_environment()
    bundled = {w.name: w for w in wheels}
    report = ClosureReport()
    used_exclusions: set[NormalizedName] = set()
    for wheel in wheels:
        for text in wheel.requires:
            try:
                req = Requirement(text)
                applies = req.marker is None or req.marker.evaluate(env)
            except (InvalidRequirement, InvalidMarker):
                report.problems.append(f"{wheel.path.name}: unreadable Requires-Dist {text!r}")
                continue
            if not applies:
                continue
            name = canonicalize_name(req.name)
            who = f"{wheel.name} {wheel.version} requires {req}"
            if name in bundled:
                have = bundled[name].version
                if not req.specifier.contains(Version(have), prereleases=True):
                    report.problems.append(f"{who}, but the bundle pins {name}=={have}")
                else:
                    report.bundled.append(who)
            elif name in spec.base:
                base_version = spec.base[name]
                if base_version is None:
                    report.assumed_from_base.append(who)
                elif not req.specifier.contains(Version(base_version), prereleases=True):
                    report.problems.append(f"{who}, but the base image has {name} {base_version}")
                else:
                    report.from_base.append(who)
            elif name in spec.excluded:
                used_exclusions.add(name)
                report.excluded[who] = spec.excluded[name]
            else:
                report.problems.append(
                    f"{who}: not bundled, not in the base image, not excluded "
                    f"(add it to {spec.source})"
                )
    report.unused_exclusions = sorted(set(spec.excluded) - used_exclusions)
    return report


def write_tar(path: Path, members: Sequence[tuple[str, Path | bytes]]) -> None:
    """A reproducible tar: sorted members, zero times and owners, 0644."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for arcname, content in sorted(members, key=lambda m: m[0]):
            info = tarfile.TarInfo(arcname)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            info.mode = 0o644
            if isinstance(content, bytes):
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
            else:
                info.size = content.stat().st_size
                with content.open("rb") as fh:
                    tar.addfile(info, fh)


def split_file(path: Path, part_bytes: int) -> list[Path]:
    """Split into equal parts of at most `part_bytes`: `<name>.partKKofNN`."""
    size = path.stat().st_size
    count = max(1, math.ceil(size / part_bytes))
    chunk = math.ceil(size / count)
    parts: list[Path] = []
    with path.open("rb") as src:
        for index in range(1, count + 1):
            part = path.with_name(f"{path.name}.part{index:02d}of{count:02d}")
            with part.open("wb") as dst:
                remaining = chunk
                while remaining > 0:
                    block = src.read(min(remaining, 1 << 20))
                    if not block:
                        break
                    dst.write(block)
                    remaining -= len(block)
            parts.append(part)
    return parts


@dataclass
class BundleResult:
    out: Path
    manifest: dict[str, Any]
    parts: list[Path]
    carry_dirs: list[Path]
    downloaded: list[str]

    @property
    def total_bytes(self) -> int:
        return int(sum(p.stat().st_size for p in self.parts))


def build_bundle(
    spec_path: Path,
    out: Path,
    *,
    part_bytes: int = 60 * MB,
    find_links: Sequence[Path] = (),
    no_index: bool = False,
    fetch: bool = True,
    run: Runner = _run,
) -> BundleResult:
    """Download, check and package a bundle under `out` (see the module docstring)."""
    if part_bytes < MB:
        raise UserError(f"--part-mb: parts must be at least 1 MB, got {part_bytes} bytes")
    spec = load_spec(spec_path)
    wheel_dir = out / "wheels"
    downloaded = (
        download(spec, wheel_dir, find_links=find_links, no_index=no_index, run=run)
        if fetch
        else []
    )
    wheels = resolve(spec, wheel_dir)
    report = check_closure(spec, wheels)
    if report.problems:
        more = f" (and {len(report.problems) - 1} more)" if len(report.problems) > 1 else ""
        raise UserError(f"closure check failed: {report.problems[0]}{more}")
    stem = f"{spec.framework}-{spec.version}-{spec.target.abi}-bundle"
    manifest: dict[str, Any] = {
        "schema_version": 1,
        "framework": spec.framework,
        "version": spec.version,
        "spec": Path(spec.source).name,
        "target": {**asdict(spec.target), "platforms": list(spec.target.platforms)},
        "wheels": [w.to_json() for w in wheels],
        "total_wheel_bytes": sum(w.size for w in wheels),
        "closure": report.to_json(),
        "install": INSTALL_COMMAND,
    }
    sums = "".join(f"{w.sha256}  wheels/{w.path.name}\n" for w in wheels)
    manifest_bytes = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
    (out / MANIFEST).write_bytes(manifest_bytes)
    (out / SHA256SUMS).write_text(sums)
    members: list[tuple[str, Path | bytes]] = [
        (f"{BUNDLE_DIR}/{MANIFEST}", manifest_bytes),
        (f"{BUNDLE_DIR}/{SHA256SUMS}", sums.encode()),
    ]
    members += [(f"{BUNDLE_DIR}/wheels/{w.path.name}", w.path) for w in wheels]
    carry_root = out / "carry"
    shutil.rmtree(carry_root, ignore_errors=True)
    for old in out.glob(f"{stem}.tar*"):
        old.unlink()
    tar_path = out / f"{stem}.tar"
    write_tar(tar_path, members)
    tar_sha = sha256_file(tar_path)
    parts = split_file(tar_path, part_bytes)
    part_sums = "".join(f"{sha256_file(p)}  {p.name}\n" for p in parts)
    part_sums += f"{tar_sha}  {tar_path.name}\n"
    tar_path.unlink()
    carry_dirs = []
    for index, part in enumerate(parts, start=1):
        folder = carry_root / f"{index:02d}"
        folder.mkdir(parents=True)
        part = part.rename(folder / part.name)
        (folder / PARTS_SUMS).write_text(part_sums)
        parts[index - 1] = part
        carry_dirs.append(folder)
    (out / PARTS_SUMS).write_text(part_sums)
    return BundleResult(out, manifest, parts, carry_dirs, downloaded)
