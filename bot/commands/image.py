"""`collectbot image build|ensure|verify|check`: the pinned collector image."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from bot.commands.options import TrustOpt
from bot.errors import one_line_errors
from collector.errors import UserError

image_app = typer.Typer(
    name="image",
    help=(
        "Build, reuse and verify the collector image pinned by images/manifest.yaml: a "
        "content-hash tag over everything that goes into it, and proof of what is inside."
    ),
    no_args_is_help=True,
)

ManifestOpt = Annotated[
    Path | None,
    typer.Option(
        "--manifest",
        help="Framework manifest (default: $COLLECTBOT_MANIFEST or images/manifest.yaml).",
    ),
]
FrameworkOpt = Annotated[str, typer.Option(help="Framework entry of the manifest to use.")]
RepositoryOpt = Annotated[
    str | None,
    typer.Option(
        help="Image repository, e.g. registry.example:5000/collectbot-vllm "
        "(default: collectbot-<framework>)."
    ),
]
BaseOpt = Annotated[
    str | None,
    typer.Option(
        "--base-image",
        help="Build FROM this image instead of the manifest's (a digest, or a local image "
        "that never came from a registry: tests and air-gapped mirrors).",
    ),
]
WheelsOpt = Annotated[
    Path | None,
    typer.Option(help="Wheel bundle for the collector's dependencies (offline runners)."),
]
PushOpt = Annotated[bool, typer.Option(help="Push the image to its repository's registry.")]
NetworkOpt = Annotated[
    str | None,
    typer.Option("--build-network", help="Network for the build's RUN steps (e.g. none, host)."),
]
LogOpt = Annotated[
    Path | None, typer.Option("--log", help="Write the full build output to this file.")
]
OutOpt = Annotated[
    Path | None,
    typer.Option("--out", help="Write the image record (ref, id, digest, versions) as JSON."),
]
VerifyOpt = Annotated[
    bool, typer.Option(help="Run the image and check the installed versions against the pins.")
]
QuietOpt = Annotated[bool, typer.Option(help="No progress display.")]
CollectorDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--collector-dir",
        help="The collector package to install in the image (default: this collectbot's own; "
        "the collector's own repository passes its checkout's collector/, the code under test).",
    ),
]


def _pins(manifest: Path | None, framework: str) -> tuple[Any, str]:
    from collector.pins import default_manifest_path, load_manifest

    path = manifest or default_manifest_path()
    return load_manifest(path).get(framework), str(path)


def _stage(
    *,
    force_build: bool,
    manifest: Path | None,
    framework: str,
    repository: str | None,
    base_image: str | None,
    wheels: Path | None,
    push: bool,
    build_network: str | None,
    log: Path | None,
    out: Path | None,
    verify: bool,
    quiet: bool,
    trust: str,
    collector_dir: Path | None = None,
) -> None:
    from rich.console import Console

    from bot.images.build import now, obtain, write_result
    from bot.images.engine import connect
    from bot.images.trust import parse_trust
    from bot.images.verify import verify_image

    trusted = parse_trust(trust) == "trusted"
    pins, source = _pins(manifest, framework)
    console = Console(stderr=True, quiet=quiet, soft_wrap=True)
    client = connect()
    from bot.joblog import workflow_commands_off

    with workflow_commands_off():  # the build's steps print what the Dockerfile runs
        result = obtain(
            client,
            pins,
            repository=repository or f"collectbot-{pins.name}",
            base_override=base_image,
            wheels_dir=wheels,
            force_build=force_build,
            push=push,
            network_mode=build_network,
            log_path=log,
            console=console,
            collector_dir=collector_dir,
            trusted=trusted,
        )
    how = "built" if result.built else ("pulled" if result.pulled else "reused")
    if result.built and trusted:
        how += " (trusted: no reuse, no layer cache)"
    elif result.built:
        how += f" ({result.cached_steps} of {result.total_steps} steps from cache)"
    console.print(f"{how}: {result.ref} ({result.id[:19]})", markup=False, highlight=False)
    if verify:
        installed = verify_image(client, result.id, pins, source)
        result.installed = installed.to_json()
        result.verified_at = now()
        versions = ", ".join(f"{k} {v}" for k, v in installed.distributions.items())
        console.print(f"verified: {versions}", markup=False, highlight=False)
    if out is not None:
        write_result(result, out)
    if result.repo_digest:
        typer.echo(f"{result.ref}@{result.digest}")
    else:
        # A trusted job runs what it built by id: a tag can be moved by any job on the engine.
        typer.echo(result.id if trusted else result.ref)


def _stage_command(force_build: bool, doc: str) -> Callable[..., None]:
    """`image ensure` and `image build`: one signature, the stage told whether to force."""

    def command(
        manifest: ManifestOpt = None,
        framework: FrameworkOpt = "vllm",
        repository: RepositoryOpt = None,
        base_image: BaseOpt = None,
        wheels: WheelsOpt = None,
        push: PushOpt = False,
        build_network: NetworkOpt = None,
        log: LogOpt = None,
        out: OutOpt = None,
        verify: VerifyOpt = True,
        quiet: QuietOpt = False,
        trust: TrustOpt = "untrusted",
        collector_dir: CollectorDirOpt = None,
    ) -> None:
        _stage(
            force_build=force_build,
            manifest=manifest,
            framework=framework,
            repository=repository,
            base_image=base_image,
            wheels=wheels,
            push=push,
            build_network=build_network,
            log=log,
            out=out,
            verify=verify,
            quiet=quiet,
            trust=trust,
            collector_dir=collector_dir,
        )

    command.__doc__ = doc
    return one_line_errors(command)


ensure = image_app.command("ensure")(
    _stage_command(
        False,
        """Reuse the image for the current inputs, or pull or build it; then verify it.

    The tag is <repository>:<version>-<content hash>; an unchanged input is never rebuilt.
    Prints the image reference on stdout (with --trust trusted: the id of the image this job
    built itself, without reusing any image or layer another job could have made).
    """,
    )
)
build = image_app.command("build")(
    _stage_command(
        True,
        "Build the image even if its tag exists (unchanged layers still come from the cache).",
    )
)


@image_app.command("verify")
@one_line_errors
def verify(
    image: Annotated[str, typer.Argument(help="Image reference or id to check.")],
    manifest: ManifestOpt = None,
    framework: FrameworkOpt = "vllm",
) -> None:
    """Run the image and fail unless its installed versions equal the manifest's pins.

    A mismatch ends in one line that names the installed and the pinned version.
    """
    from bot.images.engine import connect
    from bot.images.verify import verify_image

    pins, source = _pins(manifest, framework)
    installed = verify_image(connect(), image, pins, source)
    for name, version in installed.distributions.items():
        typer.echo(f"{name} {version}")
    typer.echo(f"torch CUDA {installed.torch_cuda or 'none (CPU build)'}")


@image_app.command("check")
@one_line_errors
def check(
    root: Annotated[
        Path, typer.Option(help="Repository root to scan (manifest, Dockerfiles, workflows).")
    ] = Path("."),
) -> None:
    """Fail unless every image reference in the manifest, Dockerfiles and workflows is
    pinned by digest."""
    from bot.images.pinning import check_repository, relative

    if not root.is_dir():
        raise UserError(f"--root {root}: not a directory")
    findings = relative(check_repository(root.resolve()), root.resolve())
    for finding in findings:
        typer.echo(str(finding), err=True)
    if findings:
        raise UserError(f"{len(findings)} image reference(s) not pinned by digest (listed above)")
    typer.echo("every image reference is pinned by digest")
