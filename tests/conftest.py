from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


# The local GitHub server fixture, for the tests of bot/github.
from tests.github_fixtures import gh as gh  # noqa: E402
