"""The one-sided lower confidence bound of the bounds (issue 52): given for the estimators whose
held-out value is a lower bound of the MI for a fixed critic (InfoNCE, NWJ, JS), never for an
estimate that is not one (DV, SMILE, an extrapolated InfoNCE), between the two-sided interval's
low end and the value, and below the truth on a law of known MI."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mitool import bounds, estimators

pytest.importorskip("torch")

QUICK = {"steps": 300, "hidden": 32, "batch_size": 128, "eval_every": 50, "ensemble": 1}


@pytest.fixture(scope="module")
def pairs() -> tuple[np.ndarray, np.ndarray, float]:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(1200, 2))
    y = x + rng.normal(size=(1200, 2))  # two independent pairs with correlation 1/sqrt(2)
    return x, y, -2 * 0.5 * math.log(1 - 0.5)


def test_the_table_says_which_bounds_are_lower_bounds() -> None:
    assert {name for name, bound in bounds.BOUNDS.items() if bound.lower_bound} == {"infonce", "nwj", "js"}


@pytest.mark.parametrize("name", ["infonce", "nwj"])
def test_a_lower_bound_gets_a_one_sided_bound_below_the_truth(pairs, name) -> None:
    x, y, truth = pairs
    result = estimators.get(name, **QUICK).estimate(x, y, seed=0)
    lowest = result.details["lower_confidence_bound"]
    assert result.ci_low < lowest < result.value  # the 95% one-sided point is inside the 95% two-sided one
    assert lowest <= truth
    assert any("one-sided 95% lower confidence bound" in note for note in result.notes)


@pytest.mark.parametrize("name, settings", [("dv", {}), ("infonce", {"extrapolate_negatives": True})])
def test_an_estimate_that_is_no_bound_gets_none(pairs, name, settings) -> None:
    x, y, _ = pairs
    result = estimators.get(name, **QUICK, **settings).estimate(x, y, seed=0)
    assert "lower_confidence_bound" not in result.details
    assert not any("lower confidence bound" in note for note in result.notes)
