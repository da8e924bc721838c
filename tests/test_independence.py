"""Permutation tests of independence (:mod:`mitool.independence`): calibration in miniature, power,
the +1 of Phipson & Smyth, the conditional schemes (local permutation, groups of a discrete Z), the
statistics equal to the estimators' values, per-feature q-values and scikit-learn's selectors, and
the command line (JSON, bad input in one line)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

import mitool
from mitool.checks import ParameterError
from mitool.cli.main import main
from mitool.estimators.discrete import plugin_mi
from mitool.estimators.frenzel_pompe import frenzel_pompe
from mitool.estimators.ksg import ksg
from mitool.estimators.neighbours import counts_within, fixed_points_counter
from mitool.estimators.preparation import normal_scores
from mitool.estimators.ross import ross_mi
from mitool.independence.permutations import local_permutation
from mitool.independence.pvalues import benjamini_hochberg, min_p_combination, permutation_pvalue
from mitool.independence.statistics import (
    frenzel_pompe_statistic,
    ksg_statistic,
    linear_statistic,
    other_neighbours,
    plugin_statistic,
)


@pytest.fixture(autouse=True)
def one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MITOOL_THREADS", "1")


def binomial_band(trials: int, rate: float, outside: float = 1e-3) -> tuple[int, int]:
    """The counts a Binomial(trials, rate) leaves with probability at most ``outside`` in all."""
    return int(stats.binom.ppf(outside / 2, trials, rate)), int(stats.binom.isf(outside / 2, trials, rate))


# --- the arithmetic ---------------------------------------------------------------------------------


def test_the_plus_one_correction_exactly() -> None:
    assert permutation_pvalue(1.0, np.zeros(99)) == 1 / 100
    assert permutation_pvalue(0.0, np.zeros(99)) == 1.0  # ties count as reaching it
    assert permutation_pvalue(0.5, np.array([0.1, 0.6, 0.7, 0.2])) == 3 / 5
    assert permutation_pvalue(0.3, np.array([0.3 - 1e-15])) == 1.0  # equal up to rounding


@pytest.mark.parametrize("permutations", [19, 99])
def test_a_perfect_dependence_gets_the_smallest_p_and_never_zero(permutations: int) -> None:
    x = np.random.default_rng(3).normal(size=200)
    result = mitool.independence_test(x, np.exp(x), permutations=permutations)
    assert result.pvalue == 1 / (permutations + 1) and result.permutations == permutations
    assert "the smallest p" in str(result)


def test_benjamini_hochberg_against_a_plain_implementation() -> None:
    def plain(pvalues: list[float]) -> list[float]:
        m = len(pvalues)
        ranked = sorted(range(m), key=lambda i: pvalues[i])
        q = [0.0] * m
        for position, index in enumerate(ranked):
            q[index] = min(1.0, min(pvalues[ranked[j]] * m / (j + 1) for j in range(position, m)))
        return q

    rng = np.random.default_rng(0)
    for pvalues in (
        rng.uniform(size=17),
        np.r_[rng.uniform(0, 0.01, 5), rng.uniform(size=20)],
        [0.5, 0.5, 0.01],
    ):
        assert np.allclose(benjamini_hochberg(pvalues), plain(list(pvalues)), rtol=0, atol=1e-15)


# --- the statistics are the estimators' values ----------------------------------------------------------


@pytest.mark.parametrize("dimension", [1, 2, 5])
def test_the_counts_on_kept_points_are_those_of_counts_within(dimension: int) -> None:
    rng = np.random.default_rng(1)
    points = np.round(rng.normal(size=(500, dimension)), 1)  # ties, and radii at exactly the gaps
    counter = fixed_points_counter(points)  # sorted values (one coordinate), sorted distances (more)
    for radius in (rng.uniform(0, 0.5, 500), np.full(500, 0.1), np.full(500, 0.2)):
        order = rng.permutation(500)
        reach = np.maximum(np.nextafter(radius, 0.0), 0.0)
        assert np.array_equal(counter(order, reach), counts_within(points[order], radius))


def test_the_statistics_equal_the_estimators() -> None:
    rng = np.random.default_rng(2)
    x, z = rng.normal(size=(300, 1)), rng.normal(size=(300, 1))
    y = x**2 + rng.normal(size=(300, 1))
    order = rng.permutation(300)
    assert ksg_statistic(x, y)(order) == pytest.approx(ksg(x, y[order], normalise="rank"), abs=1e-12)
    two = np.hstack([x, z])  # a tree for the marginal counts
    assert ksg_statistic(two, y, k=3, k_max=6)(order) == pytest.approx(
        ksg(two, y[order], k=3, k_max=6, normalise="rank"), abs=1e-12
    )
    scores = [normal_scores(part)[0] for part in (x, y, z)]
    assert frenzel_pompe_statistic(x, y, z)(order) == pytest.approx(
        frenzel_pompe(scores[0][order], scores[1], scores[2]), abs=1e-12
    )
    a, b = rng.integers(0, 4, size=(300, 1)), rng.integers(0, 3, size=(300, 1))
    assert plugin_statistic(a, b)(order) == pytest.approx(plugin_mi(a, b[order]), abs=1e-12)
    result = mitool.independence_test(x, y, permutations=9)
    same = mitool.estimate(x, y, estimator="ksg", normalise="rank", k=20)  # the test's statistic: k = 20
    assert result.statistic == pytest.approx(same.value, abs=1e-12)


def test_labels_are_tested_with_ross_and_counts_with_the_plug_in() -> None:
    rng = np.random.default_rng(4)
    labels = rng.choice(["a", "b", "c"], size=300)
    features = rng.normal(size=300) + (labels == "b")
    result = mitool.independence_test(features, labels, permutations=49)
    codes = np.unique(labels, return_inverse=True)[1].reshape(-1, 1).astype(float)
    assert result.estimator == "ross"
    assert result.statistic == pytest.approx(ross_mi(features[:, None], codes, k=20))  # TEST_DEFAULTS' k
    assert result.pvalue == 1 / 50
    counts = mitool.independence_test(rng.poisson(2, 300), rng.poisson(2, 300), permutations=49)
    assert counts.estimator == "plugin" and counts.pvalue > 0.01


# --- the linear statistic and the min-p combination ----------------------------------------------------


def test_the_linear_statistic_is_the_gaussian_mi_of_the_scores() -> None:
    """Against plain computations: the Gaussian MI of the rank normal scores (two continuous sides),
    -1/2 log of Wilks' lambda from the within- and total-scatter determinants (labels), and the
    Gaussian conditional MI of the scores (given Z)."""
    from mitool.estimators.gaussian import gaussian_conditional_mi, gaussian_mi

    rng = np.random.default_rng(11)
    x, z = rng.normal(size=(250, 2)), rng.normal(size=(250, 2))
    y = np.exp(x[:, :1] + z[:, :1] + rng.normal(size=(250, 1)))
    every = np.arange(250)
    scores = [normal_scores(part)[0] for part in (x, y, z)]
    plain = gaussian_mi(scores[0], scores[1], bias_correction=False)
    assert linear_statistic(x, y)(every) == pytest.approx(plain, rel=1e-9)
    given = gaussian_conditional_mi(*scores, bias_correction=False)
    assert linear_statistic(x, y, z)(every) == pytest.approx(given, rel=1e-9)
    order = rng.permutation(250)  # the pairing: y's row order[i] with x's row i
    assert linear_statistic(x, y)(order) == pytest.approx(
        gaussian_mi(scores[0], scores[1][order], bias_correction=False), rel=1e-9
    )
    labels = rng.choice(3, size=250)
    features = normal_scores(scores[0] + 0.3 * labels[:, None])[0]  # its own scores: the statistic's
    centred = features - features.mean(axis=0)
    groups = [features[labels == c] - features[labels == c].mean(axis=0) for c in range(3)]
    within = sum(group.T @ group for group in groups)
    wilks = np.linalg.det(within) / np.linalg.det(centred.T @ centred)
    statistic = linear_statistic(features, labels[:, None], y_discrete=True)(every)
    assert statistic == pytest.approx(-0.5 * np.log(wilks), rel=1e-6)


def test_min_p_of_one_statistic_is_its_permutation_p_value() -> None:
    rng = np.random.default_rng(12)
    null = rng.normal(size=(99, 1))
    for observed in (-1.0, 0.3, 2.5, float(null[5, 0])):
        combined, own = min_p_combination(np.array([observed]), null)
        assert combined == own[0] == permutation_pvalue(observed, null[:, 0])


def test_min_p_holds_its_level_on_exchangeable_rows() -> None:
    """Rows of two correlated statistics drawn i.i.d. (exchangeable, as under H0): P(p <= alpha)
    at most alpha, within the 0.999 binomial band over 2000 draws."""
    rng = np.random.default_rng(13)
    mixing = np.array([[1.0, 0.6], [0.0, 0.8]])
    pvalues = []
    for _ in range(2000):
        rows = rng.normal(size=(40, 2)) @ mixing
        pvalues.append(min_p_combination(rows[0], rows[1:])[0])
    for alpha in (0.05, 0.1, 0.25):
        low, high = binomial_band(2000, alpha)
        assert int(np.sum(np.array(pvalues) <= alpha + 1e-12)) <= high


def test_weighted_min_p_holds_its_level_and_reduces_to_the_heavy_statistic() -> None:
    """Weights [1, 3] keep the level on exchangeable rows; weights [1, 1] are no weights; a weight so
    large that its statistic's p-value always decides gives that statistic's own permutation p-value."""
    rng = np.random.default_rng(15)
    mixing = np.array([[1.0, 0.6], [0.0, 0.8]])
    pvalues = []
    for _ in range(2000):
        rows = rng.normal(size=(40, 2)) @ mixing
        pvalues.append(min_p_combination(rows[0], rows[1:], np.array([1.0, 3.0]))[0])
    for alpha in (0.05, 0.1, 0.25):
        assert int(np.sum(np.array(pvalues) <= alpha + 1e-12)) <= binomial_band(2000, alpha)[1]
    rows = rng.normal(size=(100, 3))
    assert min_p_combination(rows[0], rows[1:], np.ones(3))[0] == min_p_combination(rows[0], rows[1:])[0]
    for column in range(3):
        weights = np.where(np.arange(3) == column, 1e6, 1.0)
        combined, own = min_p_combination(rows[0], rows[1:], weights)
        assert combined == own[column] == permutation_pvalue(rows[0, column], rows[1:, column])


def test_the_default_test_adds_the_linear_statistic_on_the_same_permutations() -> None:
    """The k-NN component's own p-value is the p-value of the test without the companions (same
    seed, same permutations), the linear component's value is linear_statistic's, the KSG
    components at the other k (other_neighbours: 5 and n / 5 here) have KSG's value at that k and
    the p-value of the test of that k alone, and the combined p is at most the number of
    components times the smallest (the min-p is never worse than Bonferroni) and not below it."""
    rng = np.random.default_rng(14)
    x = rng.normal(size=300)
    y = 0.2 * x + rng.normal(size=300)
    both = mitool.independence_test(x, y, permutations=199)
    alone = mitool.independence_test(x, y, permutations=199, linear=False)
    assert other_neighbours(300, 20) == (5, 60)
    assert [part.name for part in both.components] == ["ksg", "linear", "ksg k=5", "ksg k=60"]
    assert not alone.components
    assert both.components[0].pvalue == alone.pvalue and both.statistic == alone.statistic
    linear = linear_statistic(x[:, None], y[:, None])(np.arange(300))
    assert both.components[1].statistic == pytest.approx(linear)
    for part, k in zip(both.components[2:], (5, 60), strict=True):
        assert part.statistic == pytest.approx(ksg(x[:, None], y[:, None], k=k, normalise="rank"), abs=1e-12)
        one_k = mitool.independence_test(x, y, permutations=199, estimator="ksg", normalise="rank", k=k)
        assert part.pvalue == one_k.pvalue
    smaller = min(part.pvalue for part in both.components)
    assert smaller <= both.pvalue <= len(both.components) * smaller
    named = mitool.independence_test(x, y, estimator="ksg", permutations=19)
    assert not named.components  # a named statistic is tested alone unless linear=True
    named = mitool.independence_test(x, y, estimator="ksg", permutations=19, linear=True).components
    assert [part.name for part in named] == ["ksg", "linear"]


def test_the_linear_statistic_finds_what_the_k_nn_statistic_misses() -> None:
    """A weak linear dependence (correlation 0.15, n = 400; bench/independence.py's weak-linear):
    over 20 data sets the combined test rejects at 0.05 far more often than KSG alone on the same
    permutations (measured over 50: 0.86 against 0.26)."""
    rng = np.random.default_rng(15)
    rejected = {True: 0, False: 0}
    for replicate in range(20):
        x = rng.normal(size=400)
        y = 0.15 * x + np.sqrt(1 - 0.15**2) * rng.normal(size=400)
        for linear in (True, False):
            result = mitool.independence_test(x, y, permutations=99, seed=replicate, linear=linear)
            rejected[linear] += result.pvalue <= 0.05
    assert rejected[True] >= 13 and rejected[False] <= 10, rejected


# --- calibration and power ---------------------------------------------------------------------------------


def test_calibration_in_miniature() -> None:
    """100 independent data sets (n = 200, 59 permutations each, so that 0.05 is a possible p):
    the rejections at 0.05 within the binomial band that a valid test leaves with probability
    0.999, and the p-values' mean within 3.4 standard errors of its value (their law is uniform on
    1/60 .. 1)."""
    rng = np.random.default_rng(20260)
    pvalues = []
    for replicate in range(100):
        x, y = rng.standard_t(3, size=200), rng.normal(size=200)
        pvalues.append(mitool.independence_test(x, y, permutations=59, seed=replicate).pvalue)
    low, high = binomial_band(100, 0.05)
    rejected = int(np.sum(np.array(pvalues) <= 0.05))
    assert low <= rejected <= high, (rejected, (low, high))
    assert abs(np.mean(pvalues) - 61 / 120) < 3.4 * np.sqrt((60**2 - 1) / 12) / 60 / 10
    assert min(pvalues) >= 1 / 60


def test_power_on_a_clear_alternative() -> None:
    rng = np.random.default_rng(5)
    angle = rng.uniform(0, 2 * np.pi, 300)  # a noisy circle: no correlation, strong dependence
    x, y = np.cos(angle) + 0.1 * rng.normal(size=300), np.sin(angle) + 0.1 * rng.normal(size=300)
    assert abs(np.corrcoef(x, y)[0, 1]) < 0.15
    assert mitool.independence_test(x, y, permutations=199).pvalue < 0.01


def test_the_seed_controls_everything() -> None:
    rng = np.random.default_rng(6)
    x, y = rng.normal(size=150), np.round(rng.normal(size=150), 1)  # ties: dequantised with the seed
    first, again = (mitool.independence_test(x, y, permutations=29, seed=7) for _ in range(2))
    other = mitool.independence_test(x, y, permutations=29, seed=8)
    assert first.pvalue == again.pvalue and np.array_equal(first.null_values, again.null_values)
    assert not np.array_equal(first.null_values, other.null_values)


# --- conditional tests ---------------------------------------------------------------------------------


def test_a_statistic_below_zero_is_not_printed_as_a_negative_mi() -> None:
    """KSG's estimate falls below 0 on about half of independent data sets (its bias); the
    sentence says so instead of printing a negative MI, and the p-value is unaffected."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        result = mitool.independence_test(rng.normal(size=200), rng.normal(size=200), permutations=19)
        if result.statistic < 0:
            break
    assert result.statistic < 0
    text = str(result)
    assert f"= {result.statistic:.4f}" not in text
    assert "is below 0" in text and "never negative" in text


def test_local_permutation_draws_among_the_neighbours_without_repeats_where_possible() -> None:
    rng = np.random.default_rng(7)
    z = rng.normal(size=(300, 1))
    from mitool.independence.permutations import neighbours_in_z

    candidates = neighbours_in_z(z, 5)
    assert np.array_equal(candidates[:, 0], np.arange(300))  # each row is its own first candidate
    drawn = local_permutation(candidates, rng)
    assert all(drawn[row] in candidates[row] for row in range(300))
    assert len(np.unique(drawn)) > 0.85 * 300  # repeats only where all candidates were taken
    pairs = np.array([[1, 0], [0, 1]])  # two rows that can swap: always a permutation
    assert sorted(local_permutation(pairs, rng).tolist()) == [0, 1]


def test_a_common_cause_is_not_rejected_too_often_and_a_direct_effect_is_found() -> None:
    rng = np.random.default_rng(8)
    rejected = 0
    for replicate in range(30):
        z = rng.normal(size=200)
        x = np.sin(2 * z) + z + 0.4 * rng.normal(size=200)  # both functions of Z, plus noise
        y = np.tanh(z) + 0.3 * rng.normal(size=200)
        rejected += mitool.independence_test(x, y, z, permutations=39, seed=replicate).pvalue <= 0.05
    assert rejected <= binomial_band(30, 0.05)[1] + 1, rejected  # the local scheme is close to exact
    z = rng.normal(size=300)
    x = z + 0.5 * rng.normal(size=300)
    y = z + x + 0.5 * rng.normal(size=300)  # and directly on X
    direct = mitool.independence_test(x, y, z, permutations=49)
    assert direct.pvalue == 1 / 50 and direct.conditional and "Runge" in direct.method
    assert str(direct).startswith("I(X - f(Z); Y - g(Z)) =")  # the residual scheme, the default
    local = mitool.independence_test(x, y, z, permutations=49, z_method="local")
    assert local.pvalue == 1 / 50 and str(local).startswith("I(X; Y | Z) =")


def test_a_discrete_x_given_a_continuous_z_is_dequantised_for_the_k_nn_statistic() -> None:
    rng = np.random.default_rng(15)
    z = rng.normal(size=300)
    x = (z + rng.normal(size=300) > 0).astype(int)  # binary, through Z only
    y = z + 0.5 * rng.normal(size=300)
    result = mitool.independence_test(x, y, z, permutations=49)
    assert result.pvalue > 0.05 and any("x is discrete: dequantised" in note for note in result.notes)
    assert mitool.independence_test(x, y + x, z, permutations=49).pvalue == 1 / 50


def test_a_discrete_z_permutes_within_its_groups() -> None:
    rng = np.random.default_rng(9)
    z = rng.integers(0, 3, size=750)  # groups of 200 pairs or more: k = 20 within each (TEST_NEIGHBOURS)
    x, y = z + rng.normal(size=750), z + rng.normal(size=750)  # dependent through Z only
    assert mitool.independence_test(x, y, permutations=49).pvalue == 1 / 50
    given = mitool.independence_test(x, y, z, permutations=99)
    assert given.pvalue > 0.05 and "within each group" in given.method
    within = mitool.estimate(x, y, z, estimator="ksg", normalise="rank", k=20)  # the same statistic
    assert given.statistic == pytest.approx(within.details.get("raw_value", within.value), abs=1e-12)
    direct = mitool.independence_test(x, y + 0.8 * x, z, permutations=49)
    assert direct.pvalue == 1 / 50


# --- refusals and notes --------------------------------------------------------------------------------


def test_a_constant_column_gives_p_one_with_a_note() -> None:
    rng = np.random.default_rng(10)
    result = mitool.independence_test(np.ones(100), rng.normal(size=100))
    assert result.pvalue == 1.0 and result.statistic == 0.0 and any("constant" in n for n in result.notes)
    features = np.column_stack([rng.normal(size=200), np.full(200, 3.0)])
    table = mitool.feature_mi(features, rng.integers(0, 2, size=200), permutations=19)
    assert (
        table.pvalue[1] == 1.0 and table.statistic[1] == 0.0 and (table.ci_low[1], table.ci_high[1]) == (0, 0)
    )
    assert "constant" in table.notes[1][0]


def test_bad_input_is_one_line() -> None:
    rng = np.random.default_rng(11)
    with pytest.raises(ParameterError, match="needs at least 20"):
        mitool.independence_test(rng.normal(size=10), rng.normal(size=10))
    with pytest.raises(ParameterError, match="same number of rows"):
        mitool.independence_test(rng.normal(size=50), rng.normal(size=49))
    with pytest.raises(ParameterError, match="trains a network for each permutation") as refused:
        mitool.independence_test(rng.normal(size=50), rng.normal(size=50), estimator="infonce")
    assert "\n" not in str(refused.value)
    with pytest.raises(ParameterError, match="permutations must be a whole number"):
        mitool.independence_test(rng.normal(size=50), rng.normal(size=50), permutations=0)


# --- per feature, and scikit-learn ---------------------------------------------------------------------


def test_feature_mi_q_values_are_benjamini_hochberg_of_its_p_values() -> None:
    rng = np.random.default_rng(12)
    features = rng.normal(size=(250, 5))
    target = features[:, 1] + 0.5 * features[:, 3] ** 2 + 0.5 * rng.normal(size=250)
    table = mitool.feature_mi(features, target, permutations=49)
    assert table.columns == ("x0", "x1", "x2", "x3", "x4")
    assert np.array_equal(table.qvalue, benjamini_hochberg(table.pvalue))
    assert set(np.flatnonzero(table.qvalue <= 0.05)) == {1, 3}
    assert np.all(table.ci_low <= table.statistic) and np.all(table.statistic <= table.ci_high)
    assert "x1" in str(table)


def test_select_k_best_picks_the_informative_columns() -> None:
    pytest.importorskip("sklearn")
    from functools import partial

    from sklearn.feature_selection import SelectFdr, SelectKBest

    rng = np.random.default_rng(13)
    features = rng.normal(size=(300, 6))  # |x4| has no linear part: the k-NN statistic alone sees it
    labels = (features[:, 2] + np.abs(features[:, 4]) > 1).astype(int)
    scores = partial(mitool.feature_scores, permutations=39)
    best = SelectKBest(scores, k=2).fit(features, labels)
    assert set(np.flatnonzero(best.get_support())) == {2, 4}
    assert best.pvalues_ is not None and best.pvalues_.min() == 1 / 40
    finer = partial(mitool.feature_scores, permutations=99)  # BH at 5% of 6 needs p below 0.05 / 3
    assert set(np.flatnonzero(SelectFdr(finer, alpha=0.05).fit(features, labels).get_support())) == {2, 4}


# --- the command line -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("independence")
    rng = np.random.default_rng(14)
    x = rng.normal(size=(200, 2))
    y = x[:, 0] + 0.5 * rng.normal(size=200)
    paths = {name: folder / f"{name}.npy" for name in ("x", "y", "x1", "short", "y199")}
    np.save(paths["x"], x)
    np.save(paths["y"], y)
    np.save(paths["x1"], x[:, 1])
    np.save(paths["short"], y[:10])
    np.save(paths["y199"], y[:199])
    paths["table"] = folder / "table.csv"
    np.savetxt(paths["table"], x, delimiter=",", header="signal,noise", comments="")
    return paths


def test_the_command_line_json(files: dict[str, Path]) -> None:
    result = CliRunner().invoke(main, ["test", str(files["x"]), str(files["y"]), "--permutations", "49",
                                       "--json"], catch_exceptions=False)  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["pvalue"] == 1 / 50 and report["statistic"] > 0.3 and report["permutations"] == 49
    assert set(report["null"]) == {"mean", "std", "median", "q95", "q99"} and "Phipson" in report["method"]
    sentence = CliRunner().invoke(main, ["test", str(files["x1"]), str(files["y"]), "--permutations", "49",
                                         "--k", "8", "--explain"])  # fmt: skip
    assert sentence.exit_code == 0 and sentence.stdout.startswith("I(X; Y) = ") and "k = 8" in sentence.stdout
    short = CliRunner().invoke(main, ["test", str(files["x1"]), str(files["y"]), "--permutations", "49"])
    assert len(short.stdout.strip().splitlines()) == 1 and len(short.stdout) < 250  # one line by default
    assert [part["name"] for part in report["components"]] == ["ksg", "linear"]  # X of 2 columns: one k
    one_a_side = CliRunner().invoke(main, ["test", str(files["x1"]), str(files["y"]), "--permutations", "49",
                                           "--json"], catch_exceptions=False)  # fmt: skip
    names = [part["name"] for part in json.loads(one_a_side.stdout)["components"]]
    assert names == ["ksg", "linear", "ksg k=5", "ksg k=40"]  # k = 20 at most n / 10: 5 and n / 5 beside
    alone = CliRunner().invoke(main, ["test", str(files["x"]), str(files["y"]), "--permutations", "49",
                                      "--no-linear", "--json"])  # fmt: skip
    report_alone = json.loads(alone.stdout)
    assert report_alone["components"] == [] and report_alone["pvalue"] == report["components"][0]["pvalue"]


def test_the_command_line_per_feature_names_the_columns(files: dict[str, Path]) -> None:
    args = ["test", str(files["table"]), str(files["y"]), "--per-feature", "--permutations", "29"]
    table = CliRunner().invoke(main, args, catch_exceptions=False)
    assert table.exit_code == 0, table.output
    assert table.stdout.splitlines()[1].startswith("signal") and "noise" in table.stdout
    report = json.loads(CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False).stdout)
    assert report["columns"] == ["signal", "noise"] and report["pvalue"][0] == 1 / 30


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["short", "short"], "X has too few samples (10; the test with ksg needs at least 20)"),
        (["x", "y199"], "Y must have the same number of rows"),
        (["x", "y", "--estimator", "nwj"], "--permutations must be given to test with nwj"),
        (["x", "y", "--permutations", "0"], "--permutations must be a whole number"),
    ],
)
def test_the_command_line_bad_input_is_one_line_and_exit_2(files, arguments: list[str], message: str) -> None:
    paths = [str(files[name]) for name in arguments[:2]]
    result = CliRunner().invoke(main, ["test", *paths, *arguments[2:]])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and message in result.output, result.output


def test_the_docstring_examples_run() -> None:
    import doctest
    import importlib
    import pkgutil

    import mitool.independence

    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    for module in pkgutil.iter_modules(mitool.independence.__path__, "mitool.independence."):
        for test in doctest.DocTestFinder().find(importlib.import_module(module.name)):
            runner.run(test, out=report.append)
    assert runner.tries >= 10 and runner.failures == 0, "".join(report)


def test_the_help_loads_no_heavy_module() -> None:
    code = ("import sys; from click.testing import CliRunner; from mitool.cli.main import main; "
            "r = CliRunner().invoke(main, ['test', '--help']); "
            "heavy = ('torch._C', 'torchvision', 'matplotlib'); "
            "print(r.exit_code, [m for m in heavy if m in sys.modules])")  # fmt: skip
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "0 []", found.stdout + found.stderr
