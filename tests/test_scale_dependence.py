"""The default's check of dependence through the scale (mitool.trust.scale_estimate,
through_the_scale): I(|X|; |Y|) <= I(X; Y), estimated in one coordinate a side, reported where it
is higher than the neural estimate."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mitool
from mitool.estimators import DEFAULTS
from mitool.estimators.base import Estimate
from mitool.tasks import StudentT, dense_normal, student_t
from mitool.trust import scale_estimate, scale_of, through_the_scale


def _estimate(value: float, estimator: str) -> Estimate:
    return Estimate(value, 0.05, value - 0.1, value + 0.1, 0.95, "a test interval", estimator, 1000, 1.0)


def test_a_rows_scale_is_the_norm_of_its_z_scores_whatever_the_units() -> None:
    """scale_of z-scores each column, so a column's units (an affine map) leave it unchanged; by hand
    on three rows."""
    rows = np.array([[1.0, 10.0], [2.0, 30.0], [3.0, 20.0]])
    z = (rows - rows.mean(0)) / rows.std(0)
    assert np.allclose(scale_of(rows)[:, 0], np.sqrt((z**2).sum(1)))
    assert scale_of(rows).shape == (3, 1)
    assert np.allclose(scale_of(rows * [1000.0, 0.01] + [5.0, -7.0]), scale_of(rows))
    assert np.allclose(scale_of(np.c_[rows, np.ones(3)]), scale_of(rows))  # a constant column adds 0


def test_the_higher_of_the_two_is_reported_with_the_other_in_details() -> None:
    """The scales' estimate replaces the default's where it is higher (both fall short of the MI),
    saying so and keeping the default's value; where lower, the default's stays, with the scales'
    value beside it; where KSG refused the scales (None), unchanged."""
    neural, scale = _estimate(0.25, "infonce"), _estimate(0.40, "ksg")
    chosen = through_the_scale(neural, scale)
    assert chosen.value == 0.40 and chosen.estimator == "ksg" and chosen.ci_low == scale.ci_low
    assert chosen.details["infonce"] == 0.25 and chosen.details["scale"] == 0.40
    assert any("I(|X|; |Y|)" in note and "0.2500" in note for note in chosen.notes)
    kept = through_the_scale(_estimate(0.5, "infonce"), scale)
    assert kept.value == 0.5 and kept.estimator == "infonce" and kept.details["scale"] == 0.40
    assert not kept.notes
    assert through_the_scale(neural, None) is neural


@pytest.mark.slow
def test_on_a_spherical_student_t_the_scales_hold_all_of_the_mi() -> None:
    """A spherical Student-t's X and Y share one scale and nothing else (their directions are
    independent of everything): I(|X|; |Y|) = I(X; Y), 0.448 nats in 5 + 5 dimensions with two
    degrees of freedom. KSG on the scales is within 0.1 of it at n = 2000 on three seeds; the
    default, whose critics get 60 steps here, reports it, above its own InfoNCE."""
    task = student_t(5, 5, 2.0)
    assert isinstance(task, StudentT)
    for seed in range(3):
        x, y = (part.numpy() for part in task.sample(2000, generator=torch.Generator().manual_seed(seed)))
        assert abs(scale_estimate(x, y, seed=seed).value - task.mi) < 0.1
    result = mitool.estimate(x, y, steps=60, eval_every=20)
    assert result.estimator == DEFAULTS["low-dimension"].name and result.details["infonce"] < result.value
    assert abs(result.value - task.mi) < 0.1


@pytest.mark.slow
def test_on_a_gaussian_the_scales_hold_less_and_the_default_keeps_its_own() -> None:
    """Correlated Gaussians carry their dependence in the directions too: I(|X|; |Y|) is well below
    the MI (0.59 nats in 5 + 5 dimensions at correlation 0.5), and the default keeps InfoNCE."""
    task = dense_normal(5, 5, 0.5)
    x, y = (part.numpy() for part in task.sample(2000, generator=torch.Generator().manual_seed(0)))
    result = mitool.estimate(x, y, steps=60, eval_every=20)
    assert result.estimator == "infonce" and result.details["scale"] < task.mi / 2 < result.value
    assert "scale" not in mitool.estimate(x, y, estimator="infonce", steps=60, eval_every=20).details
