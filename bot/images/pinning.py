"""`collectbot image check`: every image reference we commit is pinned by digest.

Scanned: the framework manifest (each entry's `base_image` and any other `*image` field),
every Dockerfile (`Dockerfile`, `*.Dockerfile`, `Dockerfile.*`: FROM lines, with ARG defaults
substituted, and `COPY --from=<image>`), and the workflows under `.github/workflows/` (job
`container`, `services`, and `uses: docker://`). A reference without a registry host names
Docker Hub, so it names a registry too. Exempt: `scratch`, earlier build stages, and a FROM
whose ARG has no default (the builder supplies it, from the manifest or a local base).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from collector.errors import UserError
from collector.imageref import parse_image_ref
from collector.pins import load_manifest

_ARG_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-+][^}]*)?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class Finding:
    file: Path
    line: int
    reference: str
    problem: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reference}: {self.problem}"


def _check_ref(file: Path, line: int, ref: str) -> Finding | None:
    try:
        parsed = parse_image_ref(ref, where=f"{file}:{line}")
    except UserError as exc:
        return Finding(file, line, ref, str(exc).split(": ", 2)[-1])
    if not parsed.pinned:
        where = parsed.registry or "Docker Hub"
        return Finding(file, line, ref, f"names a registry ({where}) but is not pinned by digest")
    return None


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Dockerfile instructions with continuations joined, and the line each starts on."""
    buf: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue
        if not buf:
            start = number
        if stripped.endswith("\\"):
            buf.append(stripped[:-1])
            continue
        buf.append(stripped)
        yield start, " ".join(buf)
        buf = []
    if buf:
        yield start, " ".join(buf)


def scan_dockerfile(path: Path) -> list[Finding]:
    findings: list[Finding] = []
    args: dict[str, str | None] = {}
    stages: set[str] = set()
    seen_from = False
    for line, instruction in _logical_lines(path.read_text(encoding="utf-8")):
        keyword, _, rest = instruction.partition(" ")
        keyword = keyword.upper()
        if keyword == "ARG" and not seen_from:
            name, eq, default = rest.strip().partition("=")
            args[name.strip()] = default.strip().strip("\"'") if eq else None
        elif keyword == "FROM":
            seen_from = True
            words = [w for w in rest.split() if not w.startswith("--")]
            if not words:
                findings.append(Finding(path, line, instruction, "FROM without an image"))
                continue
            ref = words[0]
            if len(words) >= 3 and words[1].lower() == "as":
                stages.add(words[2].lower())
            unresolved = False

            def substitute(match: re.Match[str]) -> str:
                nonlocal unresolved
                name = match.group(1) or match.group(2)
                value = args.get(name)
                if value is None:
                    unresolved = True
                    return ""
                return value

            resolved = _ARG_REF.sub(substitute, ref)
            if unresolved or resolved.lower() == "scratch" or resolved.lower() in stages:
                continue
            finding = _check_ref(path, line, resolved)
            if finding:
                findings.append(finding)
        elif keyword in ("COPY", "ADD"):
            for word in rest.split():
                if word.startswith("--from="):
                    source = word.removeprefix("--from=")
                    if source.lower() in stages or source.isdigit():
                        continue
                    finding = _check_ref(path, line, source)
                    if finding:
                        findings.append(finding)
    return findings


def _line_of(text: str, needle: str) -> int:
    for number, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return number
    return 1


def scan_workflow(path: Path) -> list[Finding]:
    text = path.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return [Finding(path, 1, "-", f"not valid YAML ({exc})")]
    refs: list[str] = []
    jobs = data.get("jobs", {}) if isinstance(data, dict) else {}
    for job in (jobs or {}).values():
        if not isinstance(job, dict):
            continue
        container = job.get("container")
        if isinstance(container, str):
            refs.append(container)
        elif isinstance(container, dict) and isinstance(container.get("image"), str):
            refs.append(container["image"])
        for service in (job.get("services") or {}).values():
            if isinstance(service, str):
                refs.append(service)
            elif isinstance(service, dict) and isinstance(service.get("image"), str):
                refs.append(service["image"])
        for step in job.get("steps") or []:
            uses = step.get("uses") if isinstance(step, dict) else None
            if isinstance(uses, str) and uses.startswith("docker://"):
                refs.append(uses.removeprefix("docker://"))
    findings = []
    for ref in refs:
        if "${{" in ref:
            findings.append(
                Finding(path, _line_of(text, ref), ref, "an expression; pin a literal digest")
            )
            continue
        finding = _check_ref(path, _line_of(text, ref), ref)
        if finding:
            findings.append(finding)
    return findings


def scan_manifest(path: Path) -> list[Finding]:
    try:
        load_manifest(path)
    except UserError as exc:
        return [Finding(path, 1, "-", str(exc).removeprefix(f"{path}: "))]
    return []


def dockerfiles(root: Path) -> list[Path]:
    found: set[Path] = set()
    for pattern in ("Dockerfile", "*.Dockerfile", "Dockerfile.*", "*.dockerfile"):
        for path in root.rglob(pattern):
            parts = set(path.relative_to(root).parts)
            if not parts & {".git", ".venv", "node_modules"} and path.is_file():
                found.add(path)
    return sorted(found)


def check_repository(root: Path, manifest: Path | None = None) -> list[Finding]:
    findings: list[Finding] = []
    manifest = manifest or root / "images" / "manifest.yaml"
    if manifest.exists():
        findings += scan_manifest(manifest)
    for path in dockerfiles(root):
        findings += scan_dockerfile(path)
    workflows = root / ".github" / "workflows"
    if workflows.is_dir():
        for path in sorted([*workflows.glob("*.yml"), *workflows.glob("*.yaml")]):
            findings += scan_workflow(path)
    return findings


def relative(findings: list[Finding], root: Path) -> list[Finding]:
    out = []
    for f in findings:
        try:
            out.append(Finding(f.file.relative_to(root), f.line, f.reference, f.problem))
        except ValueError:
            out.append(f)
    return out
