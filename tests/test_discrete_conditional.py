"""Discrete, mixed and conditional data: each estimator against a plain computation of its formula,
the tasks' truths against independent computations, and what estimate() decides and refuses."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.special import digamma

from mitool import estimators
from mitool.benchmark.conditional import CommonCause, DiscreteCause, NonlinearCause, gaussian_cmi
from mitool.benchmark.discrete import (
    BinomialThinning,
    DiscreteTable,
    GaussianClasses,
    PoissonRate,
    PoissonSum,
    Rounded,
    ZeroInflated,
    table_mi,
)
from mitool.checks import ParameterError
from mitool.estimation import estimate, is_discrete
from mitool.estimators.discrete import plugin_mi
from mitool.estimators.frenzel_pompe import frenzel_pompe
from mitool.estimators.mixed_ksg import mixed_ksg
from mitool.estimators.ross import ross_mi


def max_norm(a: np.ndarray) -> np.ndarray:
    return np.abs(a[:, None, :] - a[None, :, :]).max(-1)


def standard(a: np.ndarray) -> np.ndarray:
    return (a - a.mean(0)) / a.std(0)


def test_plugin_is_the_table_formula_with_the_miller_madow_terms() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 3, 400), rng.integers(0, 4, 400)
    y = np.where(rng.random(400) < 0.5, x, y)
    joint = np.zeros((3, 4))
    np.add.at(joint, (x, y), 1)
    n, cells = 400, (joint > 0).sum()
    expected = table_mi(joint) + (
        (joint.sum(1) > 0).sum() - 1 + (joint.sum(0) > 0).sum() - 1 - (cells - 1)
    ) / (2 * n)
    assert plugin_mi(x[:, None], y[:, None]) == pytest.approx(expected, abs=1e-12)
    assert plugin_mi(x[:, None], y[:, None], correction=False) == pytest.approx(table_mi(joint), abs=1e-12)


def test_ross_is_the_plain_formula() -> None:
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 3, 120)
    x = rng.normal(size=(120, 2)) + labels[:, None]
    distance, k = max_norm(standard(x)), 3
    np.fill_diagonal(distance, np.inf)
    radius = np.array([np.sort(distance[i, labels == labels[i]])[k - 1] for i in range(120)])
    counts = (distance <= radius[:, None]).sum(1)
    sizes = np.bincount(labels)[labels]
    expected = digamma(120) - digamma(sizes).mean() + digamma(k) - digamma(counts).mean()
    assert ross_mi(x, labels[:, None], k) == pytest.approx(expected, abs=1e-9)


def test_mixed_ksg_is_the_plain_formula_on_tied_data() -> None:
    rng = np.random.default_rng(2)
    x = rng.poisson(2.0, (150, 1)).astype(float)
    y = x + rng.poisson(1.0, (150, 1))
    xs, ys, k = standard(x), standard(y), 4
    dx, dy = max_norm(xs), max_norm(ys)
    joint = np.maximum(dx, dy)
    np.fill_diagonal(joint, np.inf)
    rho = np.sort(joint, axis=1)[:, k - 1]
    tied = (joint == 0).sum(1)
    own_k = np.where(rho == 0, tied, k)
    np.fill_diagonal(dx, np.inf)
    np.fill_diagonal(dy, np.inf)
    count_x, count_y = (dx <= rho[:, None]).sum(1), (dy <= rho[:, None]).sum(1)
    expected = np.mean(digamma(own_k) + np.log(150) - np.log(count_x + 1) - np.log(count_y + 1))
    assert mixed_ksg(x, y, k) == pytest.approx(expected, abs=1e-9)


def test_frenzel_pompe_is_the_plain_formula() -> None:
    rng = np.random.default_rng(3)
    z = rng.normal(size=(130, 1))
    x, y = z + rng.normal(size=(130, 1)), z + rng.normal(size=(130, 1))
    parts = [standard(a) for a in (x, y, z)]
    distances = [max_norm(a) for a in parts]
    joint = np.maximum.reduce(distances)
    np.fill_diagonal(joint, np.inf)
    eps, k = np.sort(joint, axis=1)[:, 4][:, None], 5

    def within(*index: int) -> np.ndarray:
        d = np.maximum.reduce([distances[i] for i in index])
        np.fill_diagonal(d, np.inf)
        return (d < eps).sum(1)

    expected = digamma(k) - np.mean(
        digamma(within(0, 2) + 1) + digamma(within(1, 2) + 1) - digamma(within(2) + 1)
    )
    assert frenzel_pompe(x, y, z, k) == pytest.approx(expected, abs=1e-9)


def test_the_discrete_truths_against_independent_computations() -> None:
    rng = np.random.default_rng(4)
    table = rng.dirichlet(np.ones(6)).reshape(2, 3)
    px, py = table.sum(1), table.sum(0)
    plain = sum(table[i, j] * math.log(table[i, j] / (px[i] * py[j])) for i in range(2) for j in range(3))
    assert DiscreteTable(table, "t").mi == pytest.approx(plain, abs=1e-12)
    poisson = PoissonSum(4.0, 2.0)
    assert poisson.mi == pytest.approx(0.5944, abs=1e-4)  # the 0.594 nats
    x, y = poisson._rows(400_000, rng)
    assert plugin_mi(x[:, None], y[:, None]) == pytest.approx(poisson.mi, abs=0.01)
    thinning = BinomialThinning(20, 0.5, 0.5)
    x, y = thinning._rows(400_000, rng)
    assert plugin_mi(x[:, None], y[:, None]) == pytest.approx(thinning.mi, abs=0.01)
    classes = GaussianClasses(2.0 * np.arange(3)[:, None], "c", draws=1_000_000)
    standard_error = float(classes.note.split("standard error ")[1].split()[0])
    assert standard_error < 0.002
    # one class's exact MI in 1-D by a fine grid: I = H(Y) + E log p(y|x)
    grid = np.linspace(-8, 12, 40001)
    densities = (
        np.stack([np.exp(-0.5 * (grid - m) ** 2) / math.sqrt(2 * math.pi) for m in (0.0, 2.0, 4.0)]) / 3
    )
    mixture = densities.sum(0)
    exact = math.log(3) + np.sum(densities * np.log(densities / mixture)) * (grid[1] - grid[0])
    assert classes.mi == pytest.approx(exact, abs=4 * standard_error)


def test_the_mixed_truths_against_independent_computations() -> None:
    rng = np.random.default_rng(5)
    inflated = ZeroInflated(0.3, 0.5)
    x, y = inflated._rows(400_000, rng)
    # the exact log density ratio: 0 where y = 0 (the coin, independent of x), else the Gaussian channel's
    ratio = np.where(y == 0, 0.0, -0.5 * math.log(0.25 / 1.25) - (y - x) ** 2 / 0.5 + y**2 / 2.5)
    assert ratio.mean() == pytest.approx(inflated.mi, abs=0.01)
    from scipy.stats import norm, poisson

    grid = np.linspace(-8, 8, 16001)
    weights = norm.pdf(grid) * (grid[1] - grid[0])
    for task, conditional in (
        (Rounded(2.0), lambda k: norm.cdf(k + 0.5 - 2 * grid) - norm.cdf(k - 0.5 - 2 * grid)),
        (PoissonRate(0.7), lambda k: poisson.pmf(k, np.exp(0.7 * grid))),
    ):  # a Riemann sum on a grid: independent of the task's Gauss-Hermite quadrature
        given = np.stack([conditional(k) for k in range(-40, 60)], axis=1)
        marginal = weights @ given
        terms = np.where(
            given > 0, given * np.log(np.where(given > 0, given, 1) / np.where(marginal > 0, marginal, 1)), 0
        )
        assert weights @ terms.sum(1) == pytest.approx(task.mi, abs=1e-4)


def test_the_conditional_truths_against_independent_computations() -> None:
    rng = np.random.default_rng(6)
    covariance = np.array([[1.0, 0.6, 0.5], [0.6, 1.0, 0.4], [0.5, 0.4, 1.0]])
    partial = (0.6 - 0.5 * 0.4) / math.sqrt((1 - 0.25) * (1 - 0.16))
    assert gaussian_cmi(covariance, (1, 1, 1)) == pytest.approx(-0.5 * math.log(1 - partial**2), abs=1e-12)
    cause = CommonCause(3, 0.5)
    x, y, z = cause._rows(200_000, rng)
    residuals = [v - z @ np.linalg.lstsq(z, v, rcond=None)[0] for v in (x, y)]
    assert cause.mi == 0 and abs(np.corrcoef(*residuals)[0, 1]) < 0.01 and cause.marginal_mi() > 0.9
    for task in (NonlinearCause(1.0), DiscreteCause((0.3, 0.5, 0.2), (0.0, 0.5, 0.9))):
        x, y, z = task._rows(400_000, rng)
        if isinstance(task, DiscreteCause):
            rho = task.correlations[z]
            log_ratio = -0.5 * np.log(1 - rho**2) - (rho**2 * (x**2 + y**2) - 2 * rho * x * y) / (
                2 * (1 - rho**2)
            )
        else:  # given z, (x - f(z), y - g(z)) is Gaussian with the task's covariance
            f = np.sin(2 * z[:, 0]) + z[:, -1] ** 2
            g = np.cos(z[:, 0]) * z[:, -1]
            cov = np.array(
                [[0.25, 0.25 * task.coupling], [0.25 * task.coupling, 0.25 * task.coupling**2 + 0.25]]
            )
            u = np.stack([x - f, y - g], 1)
            quadratic = np.einsum("ni,ij,nj->n", u, np.linalg.inv(cov), u)
            log_ratio = (-0.5 * quadratic - 0.5 * np.log(np.linalg.det(cov))
                         + 0.5 * u[:, 0] ** 2 / cov[0, 0] + 0.5 * np.log(cov[0, 0])
                         + 0.5 * u[:, 1] ** 2 / cov[1, 1] + 0.5 * np.log(cov[1, 1]))  # fmt: skip
        assert log_ratio.mean() == pytest.approx(task.mi, abs=0.01)


def test_the_auto_rule_and_the_cases_it_gives() -> None:
    rng = np.random.default_rng(7)
    counts = rng.poisson(4, 5000)
    assert is_discrete(counts[:, None]) and not is_discrete(rng.normal(size=(5000, 1)))
    assert not is_discrete(np.arange(5000)[:, None])  # whole numbers, but too many values
    result = estimate(counts, counts + rng.poisson(2, 5000))
    assert result.estimator == "plugin" and abs(result.value - 0.594) < 0.03
    labels = rng.integers(0, 3, 3000)
    features = rng.normal(size=(3000, 2)) + labels[:, None]
    swapped = estimate(labels, features)
    assert swapped.estimator == "ross" and any("swapped" in note for note in swapped.notes)
    assert swapped.value == pytest.approx(estimate(features, labels).value, abs=1e-12)
    inflated = np.where(rng.random(3000) < 0.3, 0.0, features[:, 0] + rng.normal(size=3000))
    assert estimate(features[:, :1], inflated).estimator == "atoms"


def test_a_discrete_z_is_the_weighted_mi_within_its_groups() -> None:
    task = DiscreteCause((0.3, 0.5, 0.2), (0.0, 0.5, 0.9))
    x, y, z = task._rows(6000, np.random.default_rng(8))
    result = estimate(x, y, estimator="gaussian", z=z)
    within = [estimate(x[z == g], y[z == g], estimator="gaussian") for g in range(3)]
    raw = [part.details.get("raw_value", part.value) for part in within]  # the groups add raw values
    manual = sum((z == g).mean() * raw[g] for g in range(3))
    assert result.value == pytest.approx(manual, abs=1e-12) and abs(result.value - task.mi) < 0.03
    assert any("within each of its 3 groups" in note for note in result.notes)


def test_what_estimate_refuses_or_notes() -> None:
    rng = np.random.default_rng(9)
    x = rng.normal(size=(500, 2))
    constant = estimate(x, np.ones(500))
    assert constant.value == 0.0 and not math.isnan(constant.stderr) and "constant" in constant.notes[-1]
    with_constant = estimate(
        np.hstack([x, np.ones((500, 1))]), x[:, :1] + rng.normal(size=(500, 1)), estimator="gaussian"
    )
    assert math.isfinite(with_constant.value) and "x: column(s) 2 are constant" in with_constant.notes[0]
    with pytest.raises(ParameterError, match="^discrete declares y discrete, but y holds non-integer values"):
        estimate(x, x[:, 0] * 0.5, discrete="y")
    with pytest.raises(
        ParameterError, match="^z must be samples .* got the text 'gaussian'.* estimator='gaussian'"
    ):
        estimate(x, x, "gaussian")  # the third argument is z: an estimator is named by keyword
    with pytest.raises(ParameterError, match="^z must have the same number of rows"):
        estimate(x, x, z=np.ones(499))
    labels = np.concatenate([rng.integers(0, 2, 499), [7]])
    alone = estimate(x, labels)
    assert any("seen once" in note for note in alone.notes)
    with pytest.raises(ParameterError, match="^estimator 'ksg' does not take X and Y discrete"):
        estimate(labels, labels, estimator="ksg")
    counts = rng.poisson(3, 800).astype(float)
    for name in estimators.names():
        cases = estimators.estimator_class(name).cases
        for case, declared in (("discrete", "auto"), ("ties", "none")):  # counts as counts, or as atoms
            if case in cases:
                value = estimate(counts, counts, estimator=name, discrete=declared, ties="atoms").value
                assert math.isfinite(value) and value > -0.05, (name, case)


def test_the_atoms_estimator_is_its_parts_and_finds_the_truth_of_a_zero_inflated_y() -> None:
    from mitool.benchmark.discrete import ZeroInflated
    from mitool.estimators.atoms import atoms_mi
    from mitool.estimators.ksg import ksg
    from mitool.estimators.mixed_ksg import mixed_ksg
    from mitool.estimators.ross import ross_mi

    rng = np.random.default_rng(3)
    x = rng.normal(size=(2000, 1))
    y = x + rng.normal(size=(2000, 1))
    assert atoms_mi(x, y) == pytest.approx(ksg(x, y, normalise="rank"), abs=1e-12)  # no atoms: KSG
    labels = rng.integers(0, 3, size=(2000, 1)).astype(float)
    assert atoms_mi(x, labels) == pytest.approx(ross_mi(x, labels), abs=1e-12)  # all atoms: Ross
    task = ZeroInflated(0.3, 0.5)
    x, y = (part.numpy() for part in task.sample(5000, generator=torch.Generator().manual_seed(0)))
    result = estimate(x, y)
    assert result.estimator == "atoms" and abs(result.value - task.mi) < 0.04
    counts = rng.poisson(3.0, size=(2000, 1)).astype(float)
    more = counts + rng.poisson(1.0, size=(2000, 1))
    both = estimate(counts, more, discrete="none", ties="atoms")
    assert both.estimator == "mixed-ksg" and any("both X and Y have ties" in note for note in both.notes)
    assert both.value == pytest.approx(mixed_ksg(counts, more, 5), abs=1e-12)


def test_the_atoms_estimator_hands_its_subsets_and_level_to_the_mixture_estimator() -> None:
    """With ties on both sides atoms answers with mixed-ksg, at the user's subsets and level (it
    once passed only k)."""
    rng = np.random.default_rng(5)
    counts = rng.poisson(3.0, size=(1000, 1)).astype(float)
    more = counts + rng.poisson(1.0, size=(1000, 1))
    result = estimators.get("atoms", k=4, subsets=4, level=0.8).estimate(counts, more, seed=2)
    alone = estimators.get("mixed-ksg", k=4, subsets=4, level=0.8).estimate(counts, more, seed=2)
    assert result.estimator == "mixed-ksg" and result.ci_level == 0.8
    assert "from 4 disjoint subsets" in result.interval
    assert (result.value, result.ci_low, result.ci_high) == (alone.value, alone.ci_low, alone.ci_high)
