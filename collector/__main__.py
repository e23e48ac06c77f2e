"""The collector's entry inside an image: `python -m collector run|versions`.

    python -m collector run CONFIG.json      collect as the config says (the host wrote it)
    python -m collector versions [DIST ...]  print installed versions as JSON

`run` first applies the version gate: inside an image built by `collectbot image build`, the
framework's pins live in /opt/collectbot/pins.json and the installed versions must equal them,
else nothing is measured. Exit codes: 0 done (the record may still be partial after SIGTERM),
2 bad input, 3 version gate failed. Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from collector.errors import UserError

EXIT_USER_ERROR = 2
EXIT_VERSION_GATE = 3


class VersionGateError(UserError):
    """The installed framework is not the pinned one."""


def _versions(args: argparse.Namespace) -> int:
    from collector.pins import load_image_pins, probe_installed

    names = list(args.dist)
    if not names:
        pins = load_image_pins(Path(args.pins))
        names = list(pins.expected()) if pins else ["vllm", "torch", "flashinfer-python"]
    print(json.dumps(probe_installed(names).to_json(), sort_keys=True))
    return 0


def _run(args: argparse.Namespace) -> int:
    from collector.config_io import read_config
    from collector.engine import run_collection
    from collector.pins import enforce, load_image_pins, probe_installed

    cfg = read_config(Path(args.config))
    pins = load_image_pins(Path(args.pins))
    if pins is not None:
        try:
            enforce(pins, probe_installed(list(pins.expected())), str(args.pins))
        except UserError as exc:
            raise VersionGateError(str(exc)) from None
    run_json = run_collection(cfg)
    print(str(run_json.parent))
    return 0


def main(argv: list[str] | None = None) -> int:
    from collector.pins import IMAGE_PINS_PATH

    parser = argparse.ArgumentParser(prog="python -m collector", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="collect as a JSON config says")
    run.add_argument("config", help="collection config (JSON, written by the host)")
    run.add_argument("--pins", default=str(IMAGE_PINS_PATH), help="pins file for the gate")
    versions = sub.add_parser("versions", help="print installed versions as JSON")
    versions.add_argument("dist", nargs="*", help="distributions (default: the pinned ones)")
    versions.add_argument("--pins", default=str(IMAGE_PINS_PATH), help="pins file")
    args = parser.parse_args(argv)
    try:
        return _run(args) if args.command == "run" else _versions(args)
    except VersionGateError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_VERSION_GATE
    except UserError as exc:
        print(f"error: {str(exc).splitlines()[0] if str(exc) else exc!r}", file=sys.stderr)
        return EXIT_USER_ERROR


if __name__ == "__main__":
    sys.exit(main())
