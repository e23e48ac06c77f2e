from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


# The local GitHub server fixture, for the tests of bot/github.
# Property tests: no per-example deadline (they read and write files, and CI machines vary);
# HYPOTHESIS_PROFILE=thorough runs ten times the examples (bench/fuzz.py runs far more).
import os  # noqa: E402

from hypothesis import HealthCheck, settings  # noqa: E402

from tests.github_fixtures import gh as gh  # noqa: E402

settings.register_profile(
    "collectbot", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile("thorough", parent=settings.get_profile("collectbot"), max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "collectbot"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="Rewrite tests/golden/ from the renderers instead of comparing (review the diff).",
    )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))
