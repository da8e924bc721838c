"""KSG and the Gaussian (CCA) estimator against analytic values and plain implementations, and
the protocol they share (settings, intervals from disjoint subsets, refusals)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mitool import estimators
from mitool.checks import ParameterError
from mitool.estimators.gaussian import gaussian_conditional_mi, gaussian_mi
from mitool.estimators.ksg import ksg
from mitool.estimators.neighbours import joint_neighbour_counts
from mitool.tasks import dense_normal, sparse_normal


def normal_pairs(task, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    x, y = task.sample(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return x.numpy(), y.numpy()


def plain_counts(x: np.ndarray, y: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """KSG's n_x, n_y from full max-norm distance matrices (numpy, no trees, no chunks)."""
    distance_x = np.abs(x[:, None, :] - x[None, :, :]).max(-1)
    distance_y = np.abs(y[:, None, :] - y[None, :, :]).max(-1)
    joint = np.maximum(distance_x, distance_y)
    np.fill_diagonal(joint, np.inf)
    radius = np.sort(joint, axis=1)[:, k - 1][:, None]
    return (distance_x < radius).sum(1) - 1, (distance_y < radius).sum(1) - 1


def plain_rectangle_counts(x: np.ndarray, y: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """KSG estimator II's n_x, n_y: the other points within each space's distance to the farthest of
    the k nearest joint neighbours (full distance matrices, an explicit loop over the points)."""
    distance_x = np.abs(x[:, None, :] - x[None, :, :]).max(-1)
    distance_y = np.abs(y[:, None, :] - y[None, :, :]).max(-1)
    joint = np.maximum(distance_x, distance_y)
    np.fill_diagonal(joint, np.inf)
    count_x, count_y = np.empty(len(x), int), np.empty(len(x), int)
    for i in range(len(x)):
        nearest = np.argsort(joint[i])[:k]
        count_x[i] = (distance_x[i] <= distance_x[i, nearest].max()).sum() - 1
        count_y[i] = (distance_y[i] <= distance_y[i, nearest].max()).sum() - 1
    return count_x, count_y


@pytest.mark.parametrize("rectangles", [False, True])
@pytest.mark.parametrize(("dim_x", "dim_y"), [(1, 1), (2, 3), (8, 8)])
def test_neighbour_counts_of_trees_and_all_pairs_equal_a_plain_count(
    dim_x: int, dim_y: int, rectangles: bool
) -> None:
    rng = np.random.default_rng(dim_x)
    x, y = rng.normal(size=(300, dim_x)), rng.normal(size=(300, dim_y))
    expected = (plain_rectangle_counts if rectangles else plain_counts)(x, y, 4)
    for method in ("tree", "all-pairs"):
        (counts,) = joint_neighbour_counts([x, y], [4], method, rectangles=rectangles)
        np.testing.assert_array_equal(counts[0], expected[0])
        np.testing.assert_array_equal(counts[1], expected[1])
    if rectangles:  # the k joint neighbours lie within each side
        assert counts[0].min() >= 4 and counts[1].min() >= 4


def test_the_threads_of_the_neighbour_searches_do_not_change_the_counts(monkeypatch) -> None:
    """The k-d tree queries run on the threads the command line chose; the counts are the same."""
    from mitool import runtime

    rows = np.random.default_rng(4).normal(size=(3000, 3))
    parts = (rows[:, :2], rows[:, 2:])
    one = joint_neighbour_counts(parts, [3, 5])
    monkeypatch.setattr(runtime, "_chosen", 2)
    assert runtime.chosen_threads() == 2
    two = joint_neighbour_counts(parts, [3, 5])
    for counts_one, counts_two in zip(one, two, strict=True):
        for side_one, side_two in zip(counts_one, counts_two, strict=True):
            np.testing.assert_array_equal(side_one, side_two)


@pytest.mark.parametrize("variant", [1, 2])
def test_ksg_on_a_bivariate_gaussian_and_on_independent_data(variant: int) -> None:
    task = dense_normal(1, 1, 0.75)
    assert ksg(*normal_pairs(task, 3000, 0), variant=variant) == pytest.approx(task.mi, abs=0.06)
    rng = np.random.default_rng(1)
    assert abs(ksg(rng.normal(size=(2000, 2)), rng.normal(size=(2000, 2)), variant=variant)) < 0.05


def test_ksg_estimator_ii_reaches_its_own_ceiling_on_a_near_copy() -> None:
    """y a copy of x up to 1e-9: every point's k joint neighbours are its k nearest in x and in y,
    so n_x = n_y = k and estimator II is psi(n) - psi(k) - 1/k exactly (estimator I stays below its
    own ceiling: its cube's side is the larger of the two distances, so one count may be k - 1, the
    other k); the estimator says it is a lower bound there."""
    from mitool.estimators.ksg import ksg_ceiling

    x = np.random.default_rng(5).normal(size=(1000, 1))
    y = x + 1e-9 * np.random.default_rng(6).normal(size=(1000, 1))
    assert ksg(x, y, k=3, variant=2) == pytest.approx(ksg_ceiling(1000, 3, variant=2), abs=1e-9)
    assert ksg(x, y, k=3) <= ksg_ceiling(1000, 3)
    assert ksg_ceiling(1000, 3, variant=2) == pytest.approx(ksg_ceiling(1000, 3) - 1 / 3, abs=1e-12)
    result = estimators.get("ksg", k=3, variant=2).estimate(x, y)
    assert result.details["saturating"] and math.isinf(result.ci_high)
    assert any("psi(n) - psi(k) - 1/k" in note for note in result.notes)


def test_ksg_refuses_a_variant_it_does_not_have_naming_the_setting() -> None:
    with pytest.raises(ParameterError, match="variant must be a whole number from 1 to 2, got 3"):
        estimators.get("ksg", variant=3)


def test_ksg_is_unchanged_by_scaling_a_coordinate() -> None:
    x, y = normal_pairs(sparse_normal(2, 2), 500, 2)
    scaled = x * np.array([1000.0, 0.001])
    assert ksg(scaled, y) == pytest.approx(ksg(x, y), abs=1e-9)


def test_gaussian_mi_is_the_canonical_correlation_formula() -> None:
    """-1/2 sum log(1 - rho_i^2) over canonical correlations from an SVD of the whitened
    cross-covariance (an independent computation)."""
    x, y = normal_pairs(dense_normal(3, 2, 0.4), 400, 3)
    x, y = x - x.mean(0), y - y.mean(0)

    def inverse_root(matrix: np.ndarray) -> np.ndarray:
        values, vectors = np.linalg.eigh(matrix)
        return vectors @ np.diag(values**-0.5) @ vectors.T

    whitened = inverse_root(x.T @ x) @ (x.T @ y) @ inverse_root(y.T @ y)
    rho = np.linalg.svd(whitened, compute_uv=False)
    expected = -0.5 * np.sum(np.log1p(-(rho**2)))
    assert gaussian_mi(x, y, bias_correction=False) == pytest.approx(expected, rel=1e-9)


def test_the_bias_correction_removes_the_small_sample_bias() -> None:
    """n = 40 pairs of a 3 x 3 Gaussian: the plug-in estimate is biased upwards by about
    dx dy / (2n); over 300 draws the corrected one averages to the truth."""
    task = sparse_normal(3, 3, pairs=1, correlation=0.6)
    plain, corrected = [], []
    for seed in range(300):
        x, y = normal_pairs(task, 40, seed)
        plain.append(gaussian_mi(x, y, bias_correction=False))
        corrected.append(gaussian_mi(x, y))
    assert np.mean(plain) - task.mi > 0.08
    assert np.mean(corrected) == pytest.approx(task.mi, abs=0.02)


def test_standard_errors_come_from_disjoint_subsets() -> None:
    task = dense_normal(2, 2)
    x, y = normal_pairs(task, 2000, 4)
    result = estimators.get("gaussian", subsets=10).estimate(x, y)
    assert "from 10 disjoint subsets" in result.interval and 0.005 < result.stderr < 0.05
    assert abs(result.value - task.mi) < 4 * result.stderr + 0.01
    assert (
        "from 2 disjoint subsets" in estimators.get("ksg").estimate(x[:50], y[:50]).interval
    )  # 20 pairs each
    rough = estimators.get("ksg").estimate(
        x[:30], y[:30]
    )  # fewer than 2 x 20: subsets of 8 or more, k scaled
    assert "from 3 disjoint subsets of 10 pairs each, k scaled down" in rough.interval
    assert 0 < rough.stderr < 1
    with pytest.raises(ParameterError, match=r"^x has too few samples \(10; ksg needs at least 20\)"):
        estimators.get("ksg").estimate(x[:10], y[:10])
    with pytest.raises(ParameterError, match="^bias_correction is not a setting of ksg"):
        estimators.get("ksg", bias_correction=False)


def test_small_subsets_take_the_same_share_of_the_pairs_as_neighbours() -> None:
    """On 178 pairs with k = 20, the 8 subsets of 22 pairs take k = 2 (20 x 22 / 178 rounded): the
    standard error is that of KSG with k = 2 on them, computed here by hand; with k = 20 kept, every
    subset's neighbourhoods were nearly the whole subset and the standard error was 9 to 15 times
    smaller than the spread over draws. Here it is within a factor 2 of that spread (over 40 draws)
    on the conservative side: at least 0.7 times it, at most 2.5 times."""
    from scipy import stats

    from mitool.estimators.ksg import ksg

    rng = np.random.default_rng(0)
    values, stderrs = [], []
    for draw in range(40):
        x = rng.normal(size=(178, 1))
        y = 0.6 * x + 0.8 * rng.normal(size=(178, 1))
        result = estimators.get("ksg", k=20, normalise="rank").estimate(x, y, seed=draw)
        values.append(result.value)
        stderrs.append(result.stderr)
        if draw == 0:
            order = np.random.default_rng(draw).permutation(178)
            by_hand = [
                ksg(x[rows], y[rows], k=2, normalise="rank") for rows in np.array_split(order[:176], 8)
            ]
            assert result.stderr == pytest.approx(np.std(by_hand, ddof=1) * math.sqrt(22 / 178))
            assert "from 8 disjoint subsets" in result.interval
            quantile = stats.t.ppf(0.975, 7)
            assert result.ci_high - result.ci_low == pytest.approx(2 * quantile * result.stderr)
    assert 0.7 * np.std(values) < np.median(stderrs) < 2.5 * np.std(values)


def test_ksg_ensemble_over_k_is_the_mean_of_the_single_k_estimates() -> None:
    """k_max > k averages the estimates for k .. k_max, each the plain formula on plain counts."""
    from scipy.special import digamma

    task = dense_normal(2, 2)
    x, y = normal_pairs(task, 400, 3)
    standard = [(a - a.mean(0)) / a.std(0) for a in (x, y)]
    singles = []
    for k in (3, 4, 5, 6):
        count_x, count_y = plain_counts(*standard, k)
        singles.append(digamma(k) + digamma(400) - np.mean(digamma(count_x + 1) + digamma(count_y + 1)))
    assert ksg(x, y, k=3, k_max=6) == pytest.approx(np.mean(singles), abs=1e-9)
    assert ksg(x, y, k=3, k_max=3) == pytest.approx(singles[0], abs=1e-9) == ksg(x, y, k=3)
    result = estimators.get("ksg", k=3, k_max=6).estimate(x, y)
    assert result.value == pytest.approx(np.mean(singles), abs=1e-9) and result.details["k_max"] == 6
    with pytest.raises(ParameterError, match="k_max must be 0 .k alone. or at least k = 5, got 2"):
        ksg(x, y, k=5, k_max=2)


def test_gaussian_conditional_mi_is_the_partial_correlation_formula() -> None:
    """X = Z + e1, Y = Z + 0.5 e1 + e2 (a path through X besides Z): I(X; Y | Z) of the Gaussian is
    -1/2 log(1 - r^2) with r the partial correlation of X and Y given Z, here computed from the
    residuals of least-squares regressions on Z (an independent computation)."""
    rng = np.random.default_rng(5)
    z = rng.normal(size=(4000, 1))
    x = z + rng.normal(size=(4000, 1))
    y = z + 0.5 * (x - z) + rng.normal(size=(4000, 1))
    residual_x = x - z @ np.linalg.lstsq(z, x, rcond=None)[0]
    residual_y = y - z @ np.linalg.lstsq(z, y, rcond=None)[0]
    r = np.corrcoef(residual_x[:, 0], residual_y[:, 0])[0, 1]
    expected = -0.5 * math.log(1 - r**2)
    assert gaussian_conditional_mi(x, y, z, bias_correction=False) == pytest.approx(expected, rel=1e-6)
    assert estimators.get("gaussian").estimate(x, y, z).value == pytest.approx(expected, abs=0.01)


def test_ksg_refuses_tied_data_and_points_to_the_mixture_estimator() -> None:
    rng = np.random.default_rng(0)
    counts = rng.poisson(4.0, size=(500, 1)).astype(float)
    with pytest.raises(ParameterError, match="^x has .* rows that repeat .* use estimator='mixed-ksg'"):
        estimators.get("ksg").estimate(counts, counts + rng.poisson(2.0, size=(500, 1)))


def test_the_subsets_of_large_data_give_the_standard_error_of_the_subsets_that_cover_it() -> None:
    """Beyond 10 x 5000 pairs the subsets are 5000 pairs each, their spread scaled by sqrt(5000 / n):
    the same standard error as ten subsets covering the data, within the noise of a spread of ten."""
    from mitool import estimators

    rng = np.random.default_rng(5)
    x = rng.normal(size=(200_000, 1))
    y = x + rng.normal(size=(200_000, 1))
    capped = estimators.get("ksg").estimate(x, y).stderr
    covering = np.std(
        [ksg(x[rows], y[rows]) for rows in np.array_split(rng.permutation(200_000), 10)], ddof=1
    )
    assert 0.4 < capped / (covering / np.sqrt(10)) < 2.5
