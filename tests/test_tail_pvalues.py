"""Tail p-values from a generalized Pareto fit to the null (:func:`mitool.independence.tail_pvalue`,
Knijnenburg et al. 2009), and their use for the shared null of :func:`mitool.matrix.mi_matrix`:
their accuracy against a known survival function, their calibration on the KSG rank null, the
planted pairs that Benjamini-Hochberg then finds among many, and ``tail="none"`` giving the
permutation p-values exactly as before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import mitool
from mitool.checks import ParameterError
from mitool.independence import (
    TAIL_METHODS,
    benjamini_hochberg,
    fit_tail,
    min_p_combination,
    permutation_pvalue,
    tail_pvalue,
)
from mitool.matrix import mi_matrix, shared_null_block

LEVELS = np.array([1e-3, 1e-4, 1e-5, 1e-6])


@pytest.fixture(autouse=True)
def one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MITOOL_THREADS", "1")


def log2_errors(distribution: stats.rv_continuous, size: int, seeds: int) -> np.ndarray:
    """log2(tail p / exact survival) at the points where the survival is LEVELS, one row per null
    of ``size`` draws (the tail fitted once per null, as tail_pvalue fits it)."""
    points = distribution.isf(LEVELS)
    rows = []
    for seed in range(seeds):
        fitted = fit_tail(distribution.rvs(size, random_state=seed))
        assert fitted is not None
        rows.append(
            np.log2([fitted.pvalue(point) / level for point, level in zip(points, LEVELS, strict=True)])
        )
    return np.array(rows)


def test_the_tail_p_value_follows_a_known_survival_function() -> None:
    # 999 draws of chi-square(3): the tail is extrapolated from the largest 250 (p ~ 0.25) down to
    # 1e-6. Over 40 nulls the median error is within a factor of 2 at 1e-3 and 1e-4 and
    # conservative beyond (the fitted shapes are negative, the tail extrapolated as exponential,
    # heavier than chi-square's): a factor 3.6 at 1e-6. No null errs low by a factor of 2 or more.
    errors = log2_errors(stats.chi2(3), 999, 40)
    median = np.median(errors, axis=0)
    assert np.all(np.abs(median[:2]) <= 1.0) and np.all((median[2:] >= 0) & (median[2:] <= 2.0))
    assert errors.min() > -1.0
    # 9999 draws of chi-square(1): the threshold at p ~ 0.025, the median within a factor of 2 over
    # the whole of [1e-6, 1e-3] (0.06 in log2 at most). A single null's fit errs more, by the
    # sampling error of its shape: from 999 draws, a factor of 2 to 5 at 1e-6 in the median.
    errors = log2_errors(stats.chi2(1), 9999, 20)
    assert np.all(np.abs(np.median(errors, axis=0)) <= 1.0)


@pytest.mark.parametrize("column", [0, 1], ids=["ksg", "linear"])
def test_the_tail_p_values_of_the_rank_nulls_are_not_anti_conservative(column: int) -> None:
    # the shared null of mi_matrix at n = 300, B = 999, and 2000 fresh statistics of the same null
    nulls = np.concatenate([shared_null_block(300, [20], 0, block, 100) for block in range(10)])[:999]
    fresh_rows = np.concatenate([shared_null_block(300, [20], 1, block, 100) for block in range(20)])
    null, fresh = nulls[:, column], fresh_rows[:, column]
    pvalues, methods = zip(*(tail_pvalue(value, null) for value in fresh), strict=True)
    pvalues = np.array(pvalues)
    assert "gpd" in methods and pvalues.min() > 0
    for alpha in (0.01, 0.001):
        limit = stats.binom.ppf(0.999, len(fresh), alpha) / len(fresh)
        assert np.mean(pvalues <= alpha) <= limit, alpha
    # where the permutation p-value decides (10 or more null values reach), it is the same number
    for value, pvalue, method in zip(fresh[:200], pvalues[:200], methods[:200], strict=True):
        if method == "permutation":
            assert pvalue == permutation_pvalue(value, null)


def test_no_fit_no_extrapolation() -> None:
    rng = np.random.default_rng(3)
    small = rng.normal(size=199)  # B < 397: fewer than 100 exceedances in its upper quarter
    assert fit_tail(small) is None
    assert tail_pvalue(9.0, small) == (permutation_pvalue(9.0, small), "permutation-no-fit")
    lattice = rng.integers(0, 4, size=999).astype(float)  # ties at every threshold
    assert tail_pvalue(9.0, lattice) == (1 / 1000, "permutation-no-fit")
    broken = rng.normal(size=999)
    broken[5] = np.nan
    assert tail_pvalue(9.0, broken)[1] == "permutation-no-fit"
    # a bounded tail (uniform: shape -1) is not extrapolated to its end point: never p = 0
    uniform = rng.uniform(size=999)
    fitted = fit_tail(uniform)
    if fitted is not None:
        assert fitted.tail_shape >= 0
        assert 0 < tail_pvalue(5.0, uniform)[0] < 1e-3
    far, method = tail_pvalue(1e6, rng.exponential(size=999))
    assert method == "gpd" and far > 0
    with pytest.raises(ParameterError, match="exceedances"):
        tail_pvalue(9.0, uniform, exceedances=50)
    assert set(TAIL_METHODS) == {"permutation", "gpd", "permutation-no-fit"}


def test_independence_test_offers_the_tail_and_keeps_its_p_value_by_default() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=300)
    y = 0.5 * x + rng.normal(size=300)
    plain = mitool.independence_test(x, y)
    none = mitool.independence_test(x, y, tail="none")
    tailed = mitool.independence_test(x, y, tail="gpd")
    assert plain.pvalue == none.pvalue == 1 / 1000 and plain.tail == none.tail == "none"
    assert plain.method == none.method and plain.notes == none.notes
    np.testing.assert_array_equal(plain.null_values, tailed.null_values)
    assert tailed.statistic == plain.statistic and tailed.tail == "gpd"
    assert 0 < tailed.pvalue < 1e-4
    names = [part.name for part in tailed.components]  # Bonferroni over the components' tails
    assert names == ["ksg", "linear", "ksg k=5", "ksg k=60"]
    assert tailed.pvalue == min(1.0, len(names) * min(tail_pvalue(part.statistic, part.null_values)[0]
                                                      for part in tailed.components))  # fmt: skip
    assert tailed.components[0].statistic == tailed.statistic
    assert "generalized Pareto tail" in tailed.method and "generalized Pareto" in str(tailed)
    assert tailed.as_dict()["tail"] == "gpd"
    with pytest.raises(ParameterError, match="tail"):
        mitool.independence_test(x, y, tail="normal")
    # where 10 or more permutations reach the data in the min-p order, the tail leaves the min-p p-value
    weak = rng.normal(size=300)
    resolved = mitool.independence_test(x, weak, tail="gpd")
    assert resolved.pvalue == mitool.independence_test(x, weak).pvalue > 11 / 1000
    assert resolved.tail == "permutation"


def planted(
    columns: int = 60, rows: int = 500, pairs: int = 6, rho: float = 0.45, seed: int = 1
) -> np.ndarray:
    """Independent normal columns, and ``pairs`` planted dependent pairs (2i, 2i + 1): linear with
    correlation rho, a sine, a square in turn (MI about 0.1 to 0.2 nats at n = 500)."""
    rng = np.random.default_rng(seed)
    data = rng.normal(size=(rows, columns))
    noise = np.sqrt(1 - rho**2)
    for index in range(pairs):
        x = data[:, 2 * index]
        signal = [rho * x, rho * np.sin(2 * x) / 0.6, 1.6 * rho * (x**2 - 1) / np.sqrt(2)][index % 3]
        data[:, 2 * index + 1] = signal + noise * rng.normal(size=rows)
    return data


def test_bh_finds_the_planted_pairs_with_tail_p_values_and_tail_none_is_the_old_matrix(
    tmp_path: Path,
) -> None:
    # 60 columns (1770 pairs), 6 planted: BH at 0.05 needs p <= 0.05 * 6 / 1770 = 1.7e-4 for all
    # six, below the 1/1000 that 999 permutations can give
    data = planted()
    tailed = mi_matrix(data, permutations=999, workers=1, seed=1, out=tmp_path)
    plain = mi_matrix(data, permutations=999, workers=1, seed=1, out=tmp_path, tail="none")
    assert tailed.reused_blocks == 0 and plain.reused_blocks == len(list(tmp_path.glob("*/block-*")))
    upper = np.triu_indices(60, 1)
    planted_pairs = np.zeros((60, 60), dtype=bool)
    planted_pairs[np.arange(0, 12, 2), np.arange(1, 12, 2)] = True
    truth = planted_pairs[upper]
    found_tail, found_plain = tailed.qvalue[upper] <= 0.05, plain.qvalue[upper] <= 0.05
    assert found_tail[truth].all() and not found_tail[~truth].any()
    assert not found_plain.any()
    assert tailed.tail == "gpd" and tailed.tail_fit is not None and tailed.tail_fit.tail_shape >= 0
    assert tailed.tail_pairs[upper][truth].all() and tailed.tail_pairs[upper].sum() < 60
    assert "generalized Pareto" in tailed.method and any("x0 ~ x1" in note for note in tailed.notes)
    assert "GPD tail" in str(tailed)
    # tail="none": the permutation p-values, every number as before the tail existed
    for name in (
        "statistic",
        "ci_low",
        "ci_high",
        "null_values",
        "linear_null_values",
        "linear",
        "shared_pairs",
    ):
        np.testing.assert_array_equal(getattr(plain, name), getattr(tailed, name), err_msg=name)
    null_rows = np.column_stack([plain.null_values, plain.linear_null_values])
    expected = [min_p_combination(np.array(observed), null_rows)[0]
                for observed in zip(plain.statistic[upper], plain.linear[upper], strict=True)]  # fmt: skip
    np.testing.assert_array_equal(plain.pvalue[upper], expected)
    np.testing.assert_array_equal(plain.qvalue[upper], benjamini_hochberg(expected))
    same = ~tailed.tail_pairs[upper]
    np.testing.assert_array_equal(tailed.pvalue[upper][same], plain.pvalue[upper][same])
    assert plain.tail == "none" and not plain.tail_pairs.any() and plain.tail_fit is None
    with pytest.raises(ParameterError, match="tail"):
        mi_matrix(data[:, :3], tail="normal")


def test_the_pearson_tail_equals_scipys() -> None:
    """pearson3_sf (the incomplete gamma functions, and the normal near skewness 0) against
    scipy.stats.pearson3.sf, which the test once imported at every call (a third of a second)."""
    from scipy import stats

    from mitool.independence.pvalues import pearson3_sf

    rng = np.random.default_rng(0)
    standard = 3 * rng.normal(size=5000)
    skew = rng.choice([-3.0, -1.0, -0.2, -1e-6, 0.0, 1e-6, 0.3, 1.0, 4.0], size=5000) * rng.random(5000)
    np.testing.assert_allclose(
        pearson3_sf(standard, skew), stats.pearson3.sf(standard, skew), rtol=1e-9, atol=1e-12
    )


def test_a_tail_p_value_stops_at_its_floor_and_says_below() -> None:
    """Far past the null, the exponential tail's survival underflows; the p-value stays at
    TAIL_FLOOR, and the matrix prints it as a bound ('<2e-12', Bonferroni over two statistics)."""
    from mitool.independence.tails import TAIL_FLOOR
    from mitool.matrix import COMBINED_FLOOR

    null = np.random.default_rng(4).exponential(size=999)
    p, method = tail_pvalue(1000.0, null)
    assert method == "gpd" and p == TAIL_FLOOR
    p_near, _ = tail_pvalue(12.0, null)  # exp(-12) / 4 ~ 1.5e-6 of a unit exponential: above the floor
    assert TAIL_FLOOR < p_near < 1e-4
    rng = np.random.default_rng(5)
    x = rng.normal(size=2000)
    data = np.column_stack([x, x + 0.01 * rng.normal(size=2000), rng.normal(size=2000)])
    result = mi_matrix(data, permutations=999, workers=1, seed=0)
    assert result.pvalue[0, 1] == COMBINED_FLOOR and "<2e-12" in str(result)
    assert any("floor" in note for note in result.notes)
