"""Training ends when the held-out value stops rising, or at a stated cap of steps or time, and the
result says which (issue 50): a cap reached while the value still rose is a note that the
estimate may be low."""

from __future__ import annotations

import numpy as np
import pytest

from mitool import estimators
from mitool.checks import ParameterError
from mitool.estimators.critic_training import ENDINGS

pytest.importorskip("torch")

SMALL = {"hidden": 32, "hidden_layers": 2, "ensemble": 1}


@pytest.fixture(scope="module")
def pairs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1500, 3))
    return x, x + 0.3 * rng.normal(size=(1500, 3))


def test_a_cap_reached_while_rising_says_so(pairs) -> None:
    result = estimators.get("infonce", steps=100, **SMALL).estimate(*pairs, seed=0)
    assert result.details["ended_by"] == ["steps"]
    assert result.details["best_step"] == result.details["steps"] == 100
    assert any("still rising" in note and "cap of 100 steps" in note for note in result.notes)


def test_patience_ends_a_training_that_has_stopped_improving(pairs) -> None:
    result = estimators.get("infonce", steps=20_000, **SMALL).estimate(*pairs, seed=0)
    details = result.details
    assert details["ended_by"] == ["patience"]
    # the rule: patience (10) scores of eval_every (50) steps after the best one, and no more
    assert details["steps"] == details["best_step"] + 10 * 50
    assert not any("still rising" in note for note in result.notes)


def test_the_time_budget_ends_training_at_the_next_score(pairs) -> None:
    result = estimators.get("infonce", steps=20_000, max_seconds=1e-3, **SMALL).estimate(*pairs, seed=0)
    assert result.details["ended_by"] == ["seconds"] and result.details["steps"] == 50
    assert set(result.details["ended_by"]) <= set(ENDINGS)


def test_the_budget_is_checked_in_one_line() -> None:
    with pytest.raises(ParameterError, match="^max_seconds must be a number > 0, or inf for no limit"):
        estimators.get("infonce", max_seconds=0)
    assert estimators.get("infonce", max_seconds="inf").settings.max_seconds == float("inf")
