"""The framework manifest, the version gate, image references and the digest-pinning check."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.images.pinning import check_repository, scan_dockerfile, scan_workflow
from collector.errors import UserError
from collector.imageref import parse_image_ref
from collector.pins import (
    FrameworkPins,
    Installed,
    check_versions,
    cuda_variant,
    enforce,
    load_manifest,
)
from tests.factories import framework_pins

ROOT = Path(__file__).resolve().parents[1]
DIGEST = "sha256:" + "ab" * 32
GOOD_ENTRY = f"""\
    version: "0.24.0"
    torch: "2.11.0"
    flashinfer: "0.6.12"
    cuda: "cu130"
    base_image: "docker.io/vllm/vllm-openai:v0.24.0@{DIGEST}"
"""
runner = CliRunner()


def _manifest(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "manifest.yaml"
    path.write_text(body)
    return path


def test_committed_manifest_is_valid_and_pins_vllm_exactly() -> None:
    manifest = load_manifest(ROOT / "images" / "manifest.yaml")
    vllm = manifest.get("vllm")
    assert (vllm.version, vllm.torch, vllm.flashinfer, vllm.cuda) == (
        "0.24.0",
        "2.11.0",
        "0.6.12",
        "cu130",
    )
    ref = parse_image_ref(vllm.base_image)
    assert ref.pinned and ref.registry == "docker.io" and ref.repository == "vllm/vllm-openai"
    assert vllm.expected() == {"vllm": "0.24.0", "torch": "2.11.0", "flashinfer-python": "0.6.12"}


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("schema_version: 2\nframeworks: {}\n", "schema_version 2 is not supported"),
        ("schema_version: 1\n", "'frameworks' must be a non-empty mapping"),
        ("schema_version: 1\nframeworks:\n  vllm: [1]\n", "frameworks.vllm: must be a mapping"),
        (
            "schema_version: 1\nframeworks:\n  vllm:\n" + GOOD_ENTRY.replace('"0.24.0"', "0.24"),
            "frameworks.vllm.version: 0.24 must be a non-empty quoted string",
        ),
        (
            "schema_version: 1\nframeworks:\n  vllm:\n"
            + GOOD_ENTRY.replace('"0.24.0"', '">=0.24"'),
            "frameworks.vllm.version: '>=0.24' is not an exact version",
        ),
        (
            "schema_version: 1\nframeworks:\n  vllm:\n" + GOOD_ENTRY.replace(f"@{DIGEST}", ""),
            "frameworks.vllm.base_image: 'docker.io/vllm/vllm-openai:v0.24.0' is not pinned",
        ),
        (
            "schema_version: 1\nframeworks:\n  vllm:\n" + GOOD_ENTRY.replace(DIGEST, "sha256:12"),
            "malformed digest 'sha256:12'",
        ),
        (
            "schema_version: 1\nframeworks:\n  vllm:\n" + GOOD_ENTRY.replace('"cu130"', '"cuda13"'),
            "frameworks.vllm.cuda: 'cuda13' must be 'cpu' or like 'cu130'",
        ),
        (
            "schema_version: 1\nframeworks:\n  vllm:\n"
            + "\n".join(ln for ln in GOOD_ENTRY.splitlines() if "torch" not in ln),
            "frameworks.vllm: missing field 'torch'",
        ),
        (
            "schema_version: 1\nframeworks:\n  vllm:\n"
            + GOOD_ENTRY
            + '    extra_image: "ghcr.io/x/y:1"\n',
            "frameworks.vllm.extra_image: 'ghcr.io/x/y:1' is not pinned",
        ),
        ("schema_version: 1\nframeworks: {vllm: [\n", "not valid YAML at line"),
        ("schema_version: 1\nfoo: 1\nframeworks: {}\n", "unknown top-level field 'foo'"),
    ],
)
def test_bad_manifests_are_one_line_errors(tmp_path: Path, body: str, needle: str) -> None:
    path = _manifest(tmp_path, body)
    with pytest.raises(UserError) as info:
        load_manifest(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert needle in message, message


def test_missing_manifest_and_unknown_framework(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="manifest not found"):
        load_manifest(tmp_path / "nope.yaml")
    manifest = load_manifest(
        _manifest(tmp_path, "schema_version: 1\nframeworks:\n  vllm:\n" + GOOD_ENTRY)
    )
    with pytest.raises(UserError, match=r"no framework 'sglang' \(the manifest has: vllm\)"):
        manifest.get("sglang")


def _installed(
    vllm: str | None = "0.24.0", torch: str = "2.11.0+cu130", cuda: str | None = "13.0"
) -> Installed:
    return Installed(
        distributions={"vllm": vllm, "torch": torch, "flashinfer-python": "0.6.12"},
        torch_cuda=cuda,
        python="3.12.3",
    )


def test_version_gate_is_exact() -> None:
    pins = framework_pins()
    assert check_versions(pins, _installed()) == []
    # The CUDA variant as a local label is the pinned variant, nothing else.
    assert check_versions(pins, _installed(vllm="0.24.0+cu130")) == []
    [m] = check_versions(pins, _installed(vllm="0.24.1"))
    assert m.message("images/manifest.yaml") == (
        "vllm: installed 0.24.1, images/manifest.yaml pins 0.24.0"
    )
    [m] = check_versions(pins, _installed(vllm="0.24.0+cu129"))
    assert "installed 0.24.0+cu129" in m.message()
    [m] = check_versions(pins, _installed(vllm=None))
    assert m.message() == "vllm: installed nothing (not installed), the manifest pins 0.24.0"
    mismatches = check_versions(pins, _installed(torch="2.11.0+cu129", cuda="12.9"))
    assert [(m.what, m.installed) for m in mismatches] == [
        ("torch", "2.11.0+cu129"),
        ("torch CUDA variant", "cu129"),
    ]
    mismatches = check_versions(pins, _installed(torch="2.11.0", cuda="12.8"))
    assert [(m.what, m.installed, m.pinned) for m in mismatches] == [
        ("torch CUDA variant", "cu128", "cu130")
    ]
    cpu = framework_pins(torch="2.13.0", cuda="cpu")
    assert check_versions(cpu, _installed(torch="2.13.0+cpu", cuda=None)) == []
    python_pinned = FrameworkPins(**{**framework_pins().__dict__, "extra": {"python": "3.12"}})
    assert check_versions(python_pinned, _installed()) == []
    bad_python = Installed({**_installed().distributions}, "13.0", "3.11.7")
    [m] = check_versions(python_pinned, bad_python)
    assert m.message() == "python: installed 3.11.7, the manifest pins 3.12"
    with pytest.raises(UserError, match=r"version gate for vllm: vllm: installed 0\.23\.1, x pins"):
        enforce(pins, _installed(vllm="0.23.1"), "x")


def test_cuda_variant() -> None:
    assert cuda_variant("13.0") == "cu130"
    assert cuda_variant("12.8") == "cu128"
    assert cuda_variant(None) == "cpu"


@pytest.mark.parametrize(
    ("text", "registry", "repository", "tag", "pinned"),
    [
        ("python:3.12", None, "python", "3.12", False),
        ("vllm/vllm-openai:v0.24.0", None, "vllm/vllm-openai", "v0.24.0", False),
        (f"docker.io/vllm/vllm-openai@{DIGEST}", "docker.io", "vllm/vllm-openai", None, True),
        (f"localhost:5000/a/b:1@{DIGEST}", "localhost:5000", "a/b", "1", True),
        ("ghcr.io/org/img", "ghcr.io", "org/img", None, False),
    ],
)
def test_image_refs(
    text: str, registry: str | None, repository: str, tag: str | None, pinned: bool
) -> None:
    ref = parse_image_ref(text)
    assert (ref.registry, ref.repository, ref.tag, ref.pinned) == (
        registry,
        repository,
        tag,
        pinned,
    )
    assert str(ref) == text


@pytest.mark.parametrize("text", ["", "UPPER/case", "a b", "img@sha256:xyz", "img:bad tag", "x:"])
def test_bad_image_refs(text: str) -> None:
    with pytest.raises(UserError, match="where"):
        parse_image_ref(text, where="where")


def test_repository_images_are_all_pinned() -> None:
    assert check_repository(ROOT) == []


def test_dockerfile_scan(tmp_path: Path) -> None:
    path = tmp_path / "x.Dockerfile"
    path.write_text(
        f"""\
ARG FREE
ARG PINNED=python:3.12@{DIGEST}
ARG LOOSE=python:3.12
FROM ${{FREE}} AS a
FROM $PINNED AS b
FROM ${{LOOSE}}
FROM a
FROM scratch
FROM --platform=linux/amd64 \\
    ghcr.io/org/tool:1 AS tool
COPY --from=b /x /x
COPY --from=busybox:1.36 /bin/busybox /bin/
COPY --from=0 /y /y
"""
    )
    findings = scan_dockerfile(path)
    assert [(f.line, f.reference) for f in findings] == [
        (6, "python:3.12"),
        (9, "ghcr.io/org/tool:1"),
        (12, "busybox:1.36"),
    ]
    assert "names a registry (Docker Hub) but is not pinned by digest" in str(findings[0])
    assert "(ghcr.io)" in str(findings[1])


def test_workflow_scan(tmp_path: Path) -> None:
    path = tmp_path / "wf.yml"
    path.write_text(
        f"""\
on: push
jobs:
  a:
    runs-on: ubuntu-latest
    container: node:20
    services:
      db: {{image: "postgres@{DIGEST}"}}
      cache: redis:7
    steps:
      - uses: actions/checkout@v4
      - uses: docker://alpine:3.20
  b:
    runs-on: ubuntu-latest
    container:
      image: ${{{{ matrix.image }}}}
"""
    )
    refs = [(f.line, f.reference) for f in scan_workflow(path)]
    assert refs == [
        (5, "node:20"),
        (8, "redis:7"),
        (11, "alpine:3.20"),
        (15, "${{ matrix.image }}"),
    ]


def test_image_check_command(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM debian:bookworm\n")
    result = runner.invoke(app, ["image", "check", "--root", str(tmp_path)])
    assert result.exit_code == 2
    assert "Dockerfile:1: debian:bookworm: names a registry (Docker Hub)" in result.output
    assert "error: 1 image reference(s) not pinned by digest" in result.output
    (tmp_path / "Dockerfile").write_text(f"FROM debian:bookworm@{DIGEST}\n")
    result = runner.invoke(app, ["image", "check", "--root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "every image reference is pinned" in result.output


def _ranges(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        line = line.split("#")[0].strip()
        if line:
            name = re.split(r"[<>=!~\[ ]", line, maxsplit=1)[0].lower()
            out[name] = line[len(name) :].strip()
    return out


def test_image_requirements_follow_pyproject() -> None:
    """The collector's requirements inside the image are pyproject's ranges, never torch."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = _ranges(project["dependencies"] + project["optional-dependencies"]["collector"])
    image = _ranges((ROOT / "images" / "collector-requirements.txt").read_text().splitlines())
    assert image and "torch" not in image
    for name, spec in image.items():
        assert declared.get(name) == spec, (
            f"{name}: image {spec!r}, pyproject {declared.get(name)!r}"
        )


def test_image_commands_explain_every_option() -> None:
    import typer

    group = typer.main.get_command(app).commands["image"]  # type: ignore[attr-defined]
    assert set(group.commands) == {"build", "ensure", "verify", "check"}
    for name, command in group.commands.items():
        assert command.help and len(command.help) > 20, name
        for param in command.params:
            assert getattr(param, "help", None), f"image {name} {param.name} has no help"
        result = runner.invoke(app, ["image", name, "--help"])
        assert result.exit_code == 0, result.output


def test_no_engine_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no.sock")
    result = runner.invoke(app, ["image", "verify", "x:1"])
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(
        "error: cannot reach the Docker engine at unix://"
    )
