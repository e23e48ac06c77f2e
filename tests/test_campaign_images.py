"""A paired campaign in image mode against a real Docker engine (on the CPU).

Two collector images stand for a repository's base and head (tests/docker_support.py builds
the framework stand-in offline): the head's differs by a collector change, so each side has
its own image. Every round of a side runs `collect --image` of that side's image; the host
driver alternates them, checks the device and merges.
"""

from __future__ import annotations

import json
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot.campaign.runner import Campaign, CampaignConfig
from bot.cli import app
from bot.images.context import COLLECTOR_DIR
from collector.errors import UserError
from collector.record import read_record
from tests.docker_support import engine_or_skip, ensure_base_image
from tests.test_images_docker import _torch_version, _write_manifest

runner = CliRunner()
ROUND = ["--runs", "2", "--no-confirm", "--limit", "1", "--samples", "3", "--warmup", "1"]
ROUND += ["--target-sample-ms", "0.3", "--idle-ratio", "0", "--memory", "4g", "--quiet"]


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """`image ensure` twice: the base's collector and the head's (each one line changed)."""
    client = engine_or_skip()
    base = ensure_base_image(client)
    work = tmp_path_factory.mktemp("campaign-images")
    manifest = _write_manifest(work / "manifest.yaml", _torch_version())
    repository = f"collectbot-test-{uuid.uuid4().hex[:8]}"
    refs = {}
    for side in ("base", "head"):
        # Each side's own collector (unique to this test: the engine is shared, and another
        # test's clean-up of an identical image would remove this one's tag with it).
        changed = work / f"collector-{side}"
        shutil.copytree(COLLECTOR_DIR, changed, ignore=shutil.ignore_patterns("__pycache__"))
        with (changed / "record.py").open("a") as fh:
            fh.write(f"\n# {side} {repository}: a collector change\n")
        extra = ["--collector-dir", str(changed)]
        args = ["image", "ensure", "--manifest", str(manifest), "--base-image", base]
        args += ["--repository", repository, "--build-network", "none", *extra]
        args += ["--out", str(work / f"{side}.json")]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        refs[side] = json.loads((work / f"{side}.json").read_text())["ref"]
    assert refs["base"] != refs["head"]
    yield refs
    for image in client.images.list(name=repository):
        for tag in image.tags:
            client.images.remove(tag, force=True)


@pytest.mark.slow
@pytest.mark.timeout(2400)  # four container rounds, each a torch start (minutes on a busy CPU)
def test_a_campaign_of_two_images_alternates_and_names_each_sides_image(
    images: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "campaign"
    args = ["campaign", "--base-image", images["base"], "--head-image", images["head"]]
    args += ["--base", "a" * 40, "--head", "b" * 40, "--out", str(out), *ROUND]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    manifest: dict[str, Any] = json.loads((out / "campaign.json").read_text())
    assert manifest["mode"] == "image" and manifest["repo"] is None
    assert manifest["base"]["image"] == images["base"]
    assert manifest["head"]["image"] == images["head"]
    rounds = manifest["rounds"]
    # A B, B A: alternated, each round in its side's image, through `collect --image`.
    assert [r["side"] for r in rounds] == ["base", "head", "head", "base"]
    for r in rounds:
        assert r["image"] == images[r["side"]]
        meta = read_record(out / r["path"]).meta
        assert meta["image"]["ref"] == images[r["side"]] == meta["container"]["image_ref"]
        assert meta["container"]["network"] == "none" and meta["container"]["trust"] == "untrusted"
        assert meta["container"]["limits"]["memory"] == "4g"
    assert rounds[0]["image_id"] != rounds[1]["image_id"]
    for side in ("base", "head"):
        merged = read_record(out / "main" / f"{side}-run")
        assert merged.meta["campaign"]["image"] == images[side]
    assert (out / "comparison" / "comparison.json").is_file()


def test_image_mode_needs_both_images_and_limits_need_image_mode(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["campaign", "--base-image", "x:1", "--out", str(tmp_path / "o"), "--quiet"]
    )
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: --base-image and --head-image: give both (image mode) or neither"
    ]
    result = runner.invoke(app, ["campaign", "--base", "HEAD", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and result.output.startswith("error: --base and --head")
    args = ["campaign", "--base", "HEAD", "--head", "HEAD", "--memory", "2g"]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "only with --base-image" in result.output


# A stand-in for the host's interpreter that drops `--image` and the container options: the
# round collects on the host, so its record names no image (a round that escaped its image).
ESCAPED = """
import os, sys
args, skip = [], 0
for a in sys.argv[1:]:
    if skip:
        skip -= 1
    elif a in ("--image", "--trust", "--memory", "--cpus", "--shm-size", "--container-timeout"):
        skip = 1
    else:
        args.append(a)
os.execv(sys.executable, [sys.executable, *args])
"""


def test_a_round_whose_record_names_another_image_is_refused(tmp_path: Path) -> None:
    wrapper = tmp_path / "python"
    wrapper.write_text(f"#!{sys.executable}\n{ESCAPED}")
    wrapper.chmod(0o755)
    cfg = CampaignConfig(
        repo=tmp_path,
        base_ref="",
        head_ref="",
        out=tmp_path / "ab",
        base_image="collectbot-test:base",
        head_image="collectbot-test:head",
        runs=2,
        collect_args=["--case-set", "smoke", "--samples", "2", "--warmup", "0", "--limit", "1"],
        confirm=False,
        python=str(wrapper),
    )
    with pytest.raises(UserError, match="image None is not the base side's 'collectbot-test:base'"):
        Campaign(cfg).run()
    manifest = json.loads((tmp_path / "ab" / "campaign.json").read_text())
    assert manifest["rounds"] == [] and manifest["mode"] == "image"
