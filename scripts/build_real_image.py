"""Build the real collector image for the manifest's vLLM entry, from PyPI wheels, on a CPU host.

The manifest's base (the vLLM release image) is the production path. Where that registry
cannot be reached, this script makes its stand-in from public packages only, then runs the
same `collectbot image ensure` a runner would run, with `--base-image` naming the local base:

1. `os`: a minimal Debian root file system (mmdebstrap, Debian's packages: Python, venv,
   CA certificates), imported into the engine as `collectbot-debian:<suite>-python<X.Y>`;
2. `download`: `pip download` of the framework's closure (vLLM, torch, FlashInfer at the
   manifest's pins, and everything they require) for that Python, and of the collector's
   own requirements, into --wheels (reused when present; never inside the repository);
3. `framework`: a venv at /opt/venv in a container with no network, filled from those wheels
   alone, committed as `collectbot-vllm-base:<version>-<suite>` (the release image's role);
4. `collectbot image ensure --manifest <derived> --base-image <that> --wheels <collector
   wheels> --build-network none`, timed, then again (reuse by content hash), timed;
5. the collector's version gate run inside the image (the check `python -m collector run`
   makes before measuring), and `docker history` of the result.

The derived manifest is the real one with `python` set to the base's Python: Debian ships no
3.12, so the pinned `python` cannot hold on a Debian base; every other pin is unchanged.
Figures go to <workdir>/figures.json. Slow (about 30 minutes on 2 cores, with 4.2 GB of
wheels to download): not part of .ci/run. Recorded in docs/benchmarks.md.

    python scripts/build_real_image.py --wheels /path/outside/repo --workdir /path/for/build
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from collector.pins import FrameworkPins, load_manifest  # noqa: E402

DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEBIAN_PACKAGES = ("python3", "python3-venv", "ca-certificates")
VENV = "/opt/venv"
MACHINE = "x86_64"


def run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, text=True, **kw)


def timed(cmd: list[str], **kw: Any) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.monotonic()
    proc = run(cmd, **kw)
    return round(time.monotonic() - start, 1), proc


def image_exists(ref: str) -> bool:
    probe = ["docker", "image", "inspect", ref]
    return subprocess.run(probe, capture_output=True).returncode == 0


def image_size(ref: str) -> int:
    out = run(["docker", "image", "inspect", "--format", "{{.Size}}", ref], capture_output=True)
    return int(out.stdout.strip())


def build_os(suite: str, workdir: Path, fresh: bool) -> tuple[str, str, dict[str, Any]]:
    """The Debian base; returns (image ref, its Python as X.Y, figures)."""
    tar = workdir / f"debian-{suite}.tar"
    probe_ref = f"collectbot-debian:{suite}"
    figures: dict[str, Any] = {}
    if fresh or not image_exists(probe_ref):
        include = ",".join(DEBIAN_PACKAGES)
        figures["mmdebstrap_s"], _ = timed(
            ["mmdebstrap", "--variant=minbase", f"--include={include}", suite, str(tar),
             DEBIAN_MIRROR]
        )  # fmt: skip
        figures["rootfs_tar_bytes"] = tar.stat().st_size
        figures["import_s"], _ = timed(
            ["docker", "import", "--change", "ENV LANG=C.UTF-8", "--change", 'CMD ["python3"]',
             str(tar), probe_ref]
        )  # fmt: skip
        tar.unlink()
    python = run(
        ["docker", "run", "--rm", "--network", "none", probe_ref, "python3", "-c",
         "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
    ).stdout.strip()  # fmt: skip
    ref = f"collectbot-debian:{suite}-python{python}"
    run(["docker", "tag", probe_ref, ref])
    figures["image"] = ref
    figures["image_bytes"] = image_size(ref)
    return ref, python, figures


def pip_download(pip_python: str, dest: Path, python: str, requirements: list[str]) -> float | None:
    """Binary wheels of `requirements` and their closure for CPython `python` on glibc x86_64.

    pip runs under `pip_python`, an interpreter of the same X.Y: pip evaluates markers such
    as `six; python_version > "3.11"` for the interpreter it runs under, not --python-version.
    None when an earlier run already downloaded exactly this (its marker file says what).
    """
    marker = dest / "DOWNLOADED"
    wanted = json.dumps({"python": python, "requirements": requirements})
    if marker.is_file() and marker.read_text() == wanted:
        return None
    dest.mkdir(parents=True, exist_ok=True)
    abi = "cp" + python.replace(".", "")
    platforms = [f"manylinux_2_{n}_{MACHINE}" for n in range(5, 42)] + [
        f"manylinux{tag}_{MACHINE}" for tag in ("1", "2010", "2014")
    ]
    seconds, _ = timed(
        [pip_python, "-m", "pip", "--isolated", "download", "--only-binary=:all:",
         "--progress-bar", "off", "--python-version", python, "--implementation", "cp",
         "--abi", abi, "--abi", "abi3", "--abi", "none",
         *(arg for p in platforms for arg in ("--platform", p)),
         "--dest", str(dest), *requirements]
    )  # fmt: skip
    marker.write_text(wanted)
    return seconds


def dir_bytes(path: Path) -> tuple[int, int]:
    files = list(path.glob("*.whl"))
    return sum(p.stat().st_size for p in files), len(files)


def framework_requirements(pins: FrameworkPins) -> list[str]:
    return [
        f"{pins.distribution}=={pins.version}",
        f"torch=={pins.torch}",
        f"flashinfer-python=={pins.flashinfer}",
    ]


def build_framework(
    os_ref: str, pins: FrameworkPins, wheels: Path, suite: str, fresh: bool
) -> tuple[str, dict[str, Any]]:
    """The release image's stand-in: the framework closure in a venv, installed offline."""
    ref = f"collectbot-{pins.name}-base:{pins.version}-{suite}"
    figures: dict[str, Any] = {"image": ref}
    if fresh or not image_exists(ref):
        name = f"collectbot-framework-install-{os.getpid()}"
        install = (
            f"python3 -m venv {VENV} && {VENV}/bin/pip install --no-index --find-links /wheels "
            f"--no-compile --disable-pip-version-check --progress-bar off "
            + " ".join(framework_requirements(pins))
        )
        try:
            figures["install_s"], _ = timed(
                ["docker", "run", "--name", name, "--network", "none",
                 "-v", f"{wheels}:/wheels:ro", os_ref, "sh", "-ec", install]
            )  # fmt: skip
            figures["commit_s"], _ = timed(
                ["docker", "commit",
                 "--change", f"ENV VIRTUAL_ENV={VENV}",
                 "--change", f"ENV PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                             "/usr/bin:/sbin:/bin",
                 "--change", 'CMD ["python3"]', name, ref]
            )  # fmt: skip
        finally:
            subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    figures["image_bytes"] = image_size(ref)
    return ref, figures


def derived_manifest(manifest: Path, framework: str, python: str, workdir: Path) -> Path:
    """The manifest with the framework's `python` set to the base's; all else unchanged."""
    data = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    data["frameworks"][framework]["python"] = python
    out = workdir / "manifest.yaml"
    out.write_text(
        f"# Derived from {manifest.name}: python set to the Debian base's ({python}).\n"
        + yaml.safe_dump(data, sort_keys=False)
    )
    return out


def ensure(manifest: Path, framework: str, base: str, collector_wheels: Path,
           workdir: Path, name: str) -> tuple[float, dict[str, Any]]:  # fmt: skip
    out = workdir / f"{name}.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    seconds, _ = timed(
        [sys.executable, "-m", "bot", "image", "ensure", "--manifest", str(manifest),
         "--framework", framework, "--base-image", base, "--wheels", str(collector_wheels),
         "--build-network", "none", "--quiet", "--log", str(workdir / f"{name}.log"),
         "--out", str(out)],
        env=env, cwd=ROOT,
    )  # fmt: skip
    return seconds, json.loads(out.read_text())


GATE = """
import json
from collector.pins import enforce, load_image_pins, probe_installed
pins = load_image_pins()
installed = probe_installed(list(pins.expected()))
enforce(pins, installed, "/opt/collectbot/pins.json")
print(json.dumps({"pins": pins.to_json(), "installed": installed.to_json(), "gate": "passed"}))
"""


def gate(image: str) -> dict[str, Any]:
    """The collector's own gate (what `python -m collector run` checks first), in the image."""
    proc = run(
        ["docker", "run", "--rm", "--network", "none", image, "python3", "-c", GATE],
        capture_output=True,
    )
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def history(image: str) -> list[dict[str, str]]:
    proc = run(
        ["docker", "history", "--no-trunc", "--format", "{{json .}}", image], capture_output=True
    )
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return [{"size": r["Size"], "created_by": r["CreatedBy"][:160]} for r in rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, required=True, help="wheel folder (kept)")
    parser.add_argument("--workdir", type=Path, required=True, help="build folder")
    parser.add_argument("--manifest", type=Path, default=ROOT / "images" / "manifest.yaml")
    parser.add_argument("--framework", default="vllm")
    parser.add_argument("--suite", default="trixie", help="Debian suite of the base")
    parser.add_argument("--fresh", action="store_true", help="rebuild the two base images")
    parser.add_argument(
        "--pip-python", help="interpreter of the base's X.Y that runs pip (default: pythonX.Y)"
    )
    args = parser.parse_args()
    wheels, workdir = args.wheels.resolve(), args.workdir.resolve()
    if wheels.is_relative_to(ROOT) or workdir.is_relative_to(ROOT):
        parser.error("--wheels and --workdir must lie outside the repository")
    if shutil.which("docker") is None or shutil.which("mmdebstrap") is None:
        parser.error("needs the docker CLI and mmdebstrap (apt-get install mmdebstrap)")
    workdir.mkdir(parents=True, exist_ok=True)
    pins = load_manifest(args.manifest).get(args.framework)
    figures: dict[str, Any] = {"pins": pins.to_json()}

    os_ref, python, figures["os"] = build_os(args.suite, workdir, args.fresh)
    pip_python = args.pip_python or shutil.which(f"python{python}")
    have = (
        pip_python
        and run(
            [pip_python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
        ).stdout.strip()
    )
    if not pip_python or have != python:
        parser.error(f"--pip-python: need a Python {python} to run pip (got {have or 'none'})")
    requirements = (ROOT / "images" / "collector-requirements.txt").read_text().splitlines()
    collector_reqs = [r for r in (line.split("#")[0].strip() for line in requirements) if r]
    download = {
        "framework_s": pip_download(
            pip_python, wheels / "framework", python, framework_requirements(pins)
        ),
        "collector_s": pip_download(pip_python, wheels / "collector", python, collector_reqs),
    }
    download["framework_bytes"], download["framework_wheels"] = dir_bytes(wheels / "framework")
    download["collector_bytes"], download["collector_wheels"] = dir_bytes(wheels / "collector")
    figures["download"] = download
    base, figures["framework"] = build_framework(
        os_ref, pins, wheels / "framework", args.suite, args.fresh
    )
    manifest = derived_manifest(args.manifest, args.framework, python, workdir)
    collector_wheels = wheels / "collector"
    first_s, first = ensure(manifest, args.framework, base, collector_wheels, workdir, "build")
    second_s, second = ensure(manifest, args.framework, base, collector_wheels, workdir, "reuse")
    figures["ensure"] = {
        "build_s": first_s,
        "built": first["built"],
        "steps": first["total_steps"],
        "cached_steps": first["cached_steps"],
        "reuse_s": second_s,
        "reused": not second["built"] and second["id"] == first["id"],
        "ref": first["ref"],
        "id": first["id"],
        "image_bytes": image_size(first["ref"]),
        "installed": first["installed"],
    }
    figures["gate"] = gate(first["ref"])
    figures["history"] = history(first["ref"])
    (workdir / "figures.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
