"""The repository config file (.github/collectbot.yml): thresholds, overrides, case sets.

A prepared pair of records (every case 3% slower) is compared through the CLI with and
without config files: the file changes the verdict; a bad value is one line naming the key.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.ci_config import CiConfig, load_ci_config
from bot.cli import app
from bot.compare.stats import MinEffectOverride, Settings
from collector.errors import UserError
from tests.factories import gemm_case, simulated_runs, write_record
from tests.github_fixtures import PR, gh  # noqa: F401  (the local server fixture)
from tests.github_server import GitHubServer

runner = CliRunner()
CASES = [gemm_case(m, dtype=d) for m in (1, 2, 4, 8) for d in ("bfloat16", "float32")]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("pair")
    rng = np.random.default_rng(7)
    base = write_record(tmp / "base", CASES, lambda c: simulated_runs(rng, 1.0, run_spread=0.002))
    cand = write_record(tmp / "cand", CASES, lambda c: simulated_runs(rng, 1.03, run_spread=0.002))
    return base, cand


def _compare(pair: tuple[Path, Path], out: Path, *extra: str) -> dict[str, str]:
    result = runner.invoke(app, ["compare", str(pair[0]), str(pair[1]), "--out", str(out), *extra])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "comparison.json").read_text())
    cases = {c["key"]: c for c in data["latency"]["cases"]}
    return {c.key: cases[c.key]["verdict"] if c.key in cases else "same" for c in CASES}


def test_the_config_file_changes_the_verdict(pair: tuple[Path, Path], tmp_path: Path) -> None:
    default = _compare(pair, tmp_path / "default")
    assert set(default.values()) == {"regressed"}  # +3% clears the default 1%
    config = tmp_path / "collectbot.yml"
    config.write_text("min_effect: 0.05\nalpha: 0.01\n")
    loose = _compare(pair, tmp_path / "loose", "--config", str(config))
    assert "regressed" not in loose.values()
    # A per-dtype override: float32 keeps a 1% minimum, the rest 5%.
    config.write_text(
        "min_effect: 0.05\nmin_effect_overrides:\n  - {dtype: float32, min_effect: 0.01}\n"
    )
    mixed = _compare(pair, tmp_path / "mixed", "--config", str(config))
    assert {k for k, v in mixed.items() if v == "regressed"} == {
        c.key for c in CASES if c.dtype == "float32"
    }
    # An option given on the command line wins over the file.
    flag = _compare(pair, tmp_path / "flag", "--config", str(config), "--min-effect", "0.01")
    assert set(flag.values()) == {"regressed"}
    # The comment states the settings used and where they came from.
    out = tmp_path / "comment.md"
    result = runner.invoke(app, ["render", str(tmp_path / "mixed"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    body = out.read_text()
    assert f"Settings from `{config}`: minimum effect 5%, FDR 5%" in body
    assert "float32: minimum effect 1%" in body
    result = runner.invoke(app, ["render", str(tmp_path / "default"), "--out", str(out)])
    assert "Settings (defaults): minimum effect 0.75%, FDR 5%" in out.read_text()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("min_effect: -0.5\n", "key 'min_effect': -0.5 is less than the minimum of 0"),
        ("alpha: lots\n", "key 'alpha': 'lots' is not of type 'number'"),
        ("bootstrap: 1.5\n", "key 'bootstrap': 1.5 is not of type 'integer'"),
        ("seed: true\n", "key 'seed': True is not of type 'integer'"),
        ("min_efect: 0.02\n", "unknown key 'min_efect'"),
        ("min_effect_overrides:\n  - {min_effect: 0.02}\n", "key 'min_effect_overrides'"),
        (
            "min_effect_overrides:\n  - {op: gemmm, min_effect: 0.02}\n",
            "key 'min_effect_overrides': unknown op 'gemmm'",
        ),
        ("case_sets:\n  collect/vllm: 'a b'\n", "key 'case_sets': 'collect/vllm' must map"),
        ("- 1\n- 2\n", "must be a mapping of settings, not list"),
        ("min_effect: [\n", "not valid YAML"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_key(
    pair: tuple[Path, Path], tmp_path: Path, text: str, message: str
) -> None:
    config = tmp_path / "collectbot.yml"
    config.write_text(text)
    result = runner.invoke(
        app, ["compare", *map(str, pair), "--out", str(tmp_path / "o"), "--config", str(config)]
    )
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {config}: "), result.output
    assert message in lines[0], lines[0]
    assert "Traceback" not in result.output


def test_a_missing_named_file_is_an_error_and_the_default_path_is_optional(
    tmp_path: Path,
) -> None:
    with pytest.raises(UserError, match="config file not found"):
        load_ci_config(tmp_path / "nope.yml")
    assert load_ci_config(None, default=tmp_path / "absent.yml") is None


def test_every_setting_is_declared_once_and_the_file_covers_all_of_them() -> None:
    # Each Settings field is a config key whose default is Settings' own.
    for f in fields(Settings):
        cfg = CiConfig.from_json({}, "x")
        assert getattr(cfg.apply(), f.name) == getattr(Settings(), f.name)
    cfg = CiConfig.from_json(
        {"noise_mult": 3, "min_effect_overrides": [{"op": "gemm", "min_effect": 0.02}]}, "x"
    )
    settings = cfg.apply()
    assert settings.noise_mult == 3 and settings.min_effect == Settings().min_effect
    assert settings.min_effect_overrides == (MinEffectOverride(0.02, op="gemm"),)


def test_the_most_specific_override_wins() -> None:
    s = Settings(
        min_effect=0.01,
        min_effect_overrides=(
            MinEffectOverride(0.04, op="gemm", dtype="fp8"),
            MinEffectOverride(0.02, op="gemm"),
            MinEffectOverride(0.03, dtype="fp8"),
        ),
    )
    assert s.min_effect_for("gemm", "fp8") == 0.04
    assert s.min_effect_for("gemm", "bfloat16") == 0.02
    assert s.min_effect_for("context_attention", "fp8") == 0.03
    assert s.min_effect_for("context_attention", "bfloat16") == 0.01


def test_the_overrides_are_a_command_line_option_too(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    # --min-effect-for is the declared field's option: the file's override, spelt as a flag.
    flagged = _compare(
        pair, tmp_path / "cli", "--min-effect", "0.05", "--min-effect-for", "*/float32=0.01"
    )
    assert {k for k, v in flagged.items() if v == "regressed"} == {
        c.key for c in CASES if c.dtype == "float32"
    }
    data = json.loads((tmp_path / "cli" / "comparison.json").read_text())
    assert data["settings"]["min_effect_overrides"] == [
        {"min_effect": 0.01, "op": None, "dtype": "float32"}
    ]
    for spec in ("gemm=0.02", "gemm/fp8=0.04", "*/fp8=0.03"):
        assert MinEffectOverride.parse(spec).spec() == spec
    # A bad item names itself; an unknown op lists the known ones.
    for bad, message in (("gemmm=0.02", "unknown op 'gemmm'"), ("gemm=-1", "want OP=VALUE")):
        result = runner.invoke(
            app,
            ["compare", *map(str, pair), "--out", str(tmp_path / "o"), "--min-effect-for", bad],
        )
        assert result.exit_code == 2 and message in result.output, result.output
        assert "Traceback" not in result.output


def test_the_case_set_per_label_applies_only_when_the_label_names_none() -> None:
    cfg = CiConfig.from_json({"case_sets": {"collect/torch:gemm": "smoke"}}, "x")
    assert cfg.case_set_for("collect/torch:gemm") == "smoke"
    assert cfg.case_set_for("collect/torch:gemm@default") is None
    assert cfg.case_set_for("collect/vllm") is None
    # A plan carries the validated copy; conclude reads it back the same.
    again = CiConfig.from_json(cfg.to_json(), "plan")
    assert again.case_sets == cfg.case_sets and again.apply() == cfg.apply()


def test_the_plan_carries_the_base_branchs_config_to_conclude(
    gh: GitHubServer,  # noqa: F811
    tmp_path: Path,
    rng: np.random.Generator,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The plan job (base branch checkout) reads the file: the label's case set comes from
    it, and conclude judges with its thresholds even when the PR's checkout has none."""
    from bot.store import RunStore
    from tests.github_fixtures import payload
    from tests.test_result_publish import CASES as PR_CASES
    from tests.test_result_publish import LABEL, _shard, run_conclude

    config = tmp_path / "base-branch.yml"
    config.write_text(f"min_effect: 0.07\ncase_sets:\n  {LABEL}: smoke\n")
    data = payload("pull_request.labeled")
    data["label"]["name"] = LABEL
    data["pull_request"]["labels"][0]["name"] = LABEL
    data["sender"]["login"] = "Codertocat"
    gh.pulls[PR].labels = [LABEL]
    event = tmp_path / "labeled.json"
    event.write_text(json.dumps(data))
    plan = tmp_path / "plan.json"
    result = runner.invoke(
        app,
        [
            *("plan", "--event", str(event), "--out", str(plan), "--dry-run"),
            *("--backends", "torch", "--config", str(config)),
        ],
    )
    assert result.exit_code == 0, result.output
    decided = json.loads(plan.read_text())
    assert decided["trigger"] is True and decided["case_set"] == "smoke"
    assert decided["ci_config"]["settings"] == {"min_effect": 0.07}
    store = str(tmp_path / "store")
    base = write_record(tmp_path / "base", PR_CASES, lambda c: simulated_runs(rng, 1.0))
    RunStore(store).put(base, ref=decided["base_ref"])
    for i in (1, 2):
        _shard(tmp_path, rng, i)
    out = tmp_path / "concluded"
    run_conclude(tmp_path, plan, store, out)
    cmp = json.loads((out / "comparison" / "comparison.json").read_text())
    assert cmp["settings"]["min_effect"] == 0.07
    assert cmp["settings_source"] == str(config)
    assert "minimum effect 7%" in (out / "comment.md").read_text()
    # A plan without a copy (the base branch has no file): the defaults, never the file in
    # the pull request's checkout, where conclude runs.
    pr_checkout = tmp_path / "pr-checkout"
    (pr_checkout / ".github").mkdir(parents=True)
    (pr_checkout / ".github" / "collectbot.yml").write_text("min_effect: 10\n")
    decided.pop("ci_config")
    plan.write_text(json.dumps(decided))
    monkeypatch.chdir(pr_checkout)
    out = tmp_path / "concluded-again"
    run_conclude(tmp_path, plan, store, out)
    cmp = json.loads((out / "comparison" / "comparison.json").read_text())
    assert cmp["settings"]["min_effect"] == Settings().min_effect
    assert cmp["settings_source"] is None
