"""The Gaussian critic, the selection of critics on validation pairs and cross-fitting (issue 16's
routes), each against what it must equal."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from mitool.critics.gaussian import GaussianCritics, canonical_fit, fit_gaussian_critics, infonce_of_scores
from mitool.estimation import estimate
from mitool.estimators.neural import _Runs
from mitool.tasks import CorrelatedGaussian


def _correlated_rows(n: int, dim_x: int, dim_y: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    generator = np.random.default_rng(seed)
    mixing = generator.normal(size=(dim_x + dim_y, dim_x + dim_y))
    joint = generator.normal(size=(n, dim_x + dim_y)) @ mixing.T + generator.normal(size=dim_x + dim_y)
    return joint[:, :dim_x], joint[:, dim_x:]


def test_the_gaussian_critic_is_the_log_density_ratio_of_the_fitted_gaussian() -> None:
    """At full rank, f(x_i, y_j) = log N([x_i, y_j]; m, C) - log N(x_i; m_x, C_xx) - log N(y_j; m_y, C_yy)
    with the rows' mean and covariance (ddof 1), computed here by scipy on the joint."""
    x, y = _correlated_rows(400, 3, 2, seed=0)
    critic = GaussianCritics(*(torch.as_tensor(part)[None] for part in canonical_fit(x, y)))
    scores = critic.run(0)(torch.as_tensor(x[:7]), torch.as_tensor(y[:5])).numpy()
    joint = np.hstack([x, y])
    mean, covariance = joint.mean(0), np.cov(joint.T)
    pairs = np.array([[*x[i], *y[j]] for i in range(7) for j in range(5)])
    expected = (
        stats.multivariate_normal(mean, covariance).logpdf(pairs)
        - stats.multivariate_normal(mean[:3], covariance[:3, :3]).logpdf(pairs[:, :3])
        - stats.multivariate_normal(mean[3:], covariance[3:, 3:]).logpdf(pairs[:, 3:])
    ).reshape(7, 5)
    np.testing.assert_allclose(scores, expected, rtol=1e-8, atol=1e-8)


def test_the_rank_kept_is_the_one_whose_validation_value_is_highest() -> None:
    """20 x 20 dimensions, one correlated pair (rho 0.8, MI 0.511): the 19 sampled others only cost
    on held-out pairs, so the rank kept is small, its validation value is InfoNCE of its scores, it
    is at least the full rank's and near the truth."""
    generator = np.random.default_rng(1)
    x, y = generator.normal(size=(2, 4000, 20))
    y[:, 0] = 0.8 * x[:, 0] + 0.6 * y[:, 0]
    fit = (x[:2000], y[:2000])
    validation = tuple(torch.as_tensor(side[2000:], dtype=torch.float32) for side in (x, y))
    critic, (rank,), (value,) = fit_gaussian_critics([fit], [validation], block=2000)
    assert 1 <= rank <= 3
    scores = critic.run(0)(*validation)
    assert value == pytest.approx(infonce_of_scores(scores), abs=1e-5)
    parts = canonical_fit(*fit)
    full = GaussianCritics(*(torch.as_tensor(part, dtype=torch.float32)[None] for part in parts))
    assert value > infonce_of_scores(full.run(0)(*validation)) + 0.01
    assert value == pytest.approx(-0.5 * math.log(1 - 0.64), abs=0.06)


class _RadialCandidates:
    """Stands in for the radial Gaussian critics: run r is the string "radial r"."""

    def run(self, index: int) -> str:
        return f"radial {index}"


def test_selection_keeps_each_runs_candidate_of_the_higher_validation_value() -> None:
    runs = _Runs(fit=None, validation=[None] * 3, test=[], splits=[], member_seeds=[], members=1,
                 n_pairs=0, dims=(1, 1), radial=_RadialCandidates(), radial_ranks=[2, 2, 2])  # fmt: skip
    radial_values = [0.4, 0.6, 0.3]
    chosen = runs.chosen_critics(
        ["net 0", "net 1", "net 2"], [0.5, 0.2, 0.3], lambda critics, _: radial_values
    )
    assert chosen == ["net 0", "radial 1", "net 2"]  # a tie keeps the network
    assert runs.kept[0] == "the network alone"
    assert runs.kept[1] == "the gaussian critic on radial features, rank 2"


def test_selection_picks_the_radial_critic_where_the_dependence_is_through_the_norm() -> None:
    """y = x (|x|^2 / 2 - 2) + noise is uncorrelated with x, so the plain Gaussian critic (the base of
    an untrained network) is worth about 0 nats; y is linear in the radial features of x, and that
    candidate, higher on the validation pairs, is kept."""
    generator = np.random.default_rng(2)
    x = generator.normal(size=(3000, 2))
    y = x * ((x**2).sum(1, keepdims=True) / 2 - 2) + 0.3 * generator.normal(size=(3000, 2))
    settings = {"steps": 1, "eval_every": 1, "batch_size": 64, "ensemble": 1, "seed": 0}
    plain = estimate(x, y, estimator="infonce", radial=False, **settings)
    selected = estimate(x, y, estimator="infonce", radial=True, **settings)
    assert abs(plain.value) < 0.1
    assert selected.value > plain.value + 0.3
    assert selected.details["kept"][0].startswith("the gaussian critic on radial features")


def test_cross_fitting_agrees_with_the_plain_split_and_scores_every_pair() -> None:
    """A 2 x 2 Gaussian of 0.5 nats: 3 folds and the one split give the truth within their noise;
    the folds score all n pairs, the split its 20%."""
    sample = CorrelatedGaussian(2, mi=0.5).sample(3000, generator=torch.Generator().manual_seed(3))
    x, y = (side.numpy() for side in sample)
    settings = {"steps": 300, "hidden": 32, "batch_size": 128, "eval_every": 50, "ensemble": 1, "seed": 1}
    split, folds = (
        estimate(x, y, estimator="infonce", **settings),
        estimate(x, y, estimator="infonce", folds=3, **settings),
    )
    assert (split.details["n_test"], folds.details["n_test"]) == (600, 3000)
    assert split.value == pytest.approx(0.5, abs=0.1) and folds.value == pytest.approx(0.5, abs=0.1)
    assert folds.ci_low <= 0.5 + 0.05 and "3 folds" in folds.interval
