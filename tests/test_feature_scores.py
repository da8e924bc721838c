"""mitool.feature_scores as scikit-learn's selectors take it: by default the scores alone, no
permutations (fast inside cross_val_score and GridSearchCV), the same scores the test gives; with
permutations, (scores, p-values). feature_mi with permutations=0: the scores and intervals, p- and
q-values NaN (p = 1 for a constant column)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import mitool
from mitool.checks import ParameterError
from mitool.independence import features as feature_screening


@pytest.fixture(scope="module")
def table() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(54)
    features = rng.normal(size=(240, 6))
    features[:, 5] = 2.0  # constant
    features[:, 4] = rng.integers(0, 3, 240)  # a discrete column
    target = features[:, 0] + features[:, 2] ** 2 + features[:, 2] + 0.5 * rng.normal(size=240)
    return features, target


def test_the_default_is_the_scores_alone_and_runs_no_permutation(table, monkeypatch) -> None:
    features, target = table

    def refuse(*arguments, **options):
        raise AssertionError("the default ran the permutation test")

    monkeypatch.setattr(feature_screening, "run_test", refuse)
    scores = mitool.feature_scores(features, target)
    assert isinstance(scores, np.ndarray) and scores.shape == (6,)
    assert set(np.argsort(scores)[-2:]) == {0, 2}
    assert scores[5] == 0.0


def test_the_scores_are_the_tests_and_permutations_add_the_pvalues(table) -> None:
    features, target = table
    scores = mitool.feature_scores(features, target)
    with_p, pvalues = mitool.feature_scores(features, target, permutations=19)
    np.testing.assert_array_equal(scores, with_p)
    np.testing.assert_array_equal(scores, mitool.feature_mi(features, target, permutations=19).statistic)
    assert pvalues[0] == pvalues[2] == 1 / 20 and pvalues[5] == 1.0
    labels = (target > np.median(target)).astype(int)  # Ross's statistic and the plug-in's
    np.testing.assert_array_equal(
        mitool.feature_scores(features, labels), mitool.feature_scores(features, labels, permutations=9)[0]
    )


def test_feature_mi_without_permutations_keeps_the_intervals_and_leaves_p_unknown(table) -> None:
    features, target = table
    result = mitool.feature_mi(features, target, permutations=0)
    assert result.permutations == 0
    assert np.isnan(result.pvalue[:5]).all() and result.pvalue[5] == 1.0
    assert np.isnan(result.qvalue).all()
    assert np.all(result.ci_low[:5] <= result.statistic[:5]) and np.all(
        result.statistic[:5] <= result.ci_high[:5]
    )
    assert "without permutations" in result.method
    with pytest.raises(ParameterError, match="permutations"):
        mitool.feature_mi(features, target, permutations=-1)


def test_selection_inside_cross_validation_and_a_grid_search(table) -> None:
    pytest.importorskip("sklearn")
    from functools import partial

    from sklearn.feature_selection import SelectFdr, SelectKBest
    from sklearn.linear_model import LinearRegression
    from sklearn.model_selection import GridSearchCV, cross_val_score
    from sklearn.pipeline import make_pipeline

    features, target = table
    model = make_pipeline(SelectKBest(mitool.feature_scores, k=2), LinearRegression())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning on the way: a surprise in a pipeline
        r2 = cross_val_score(model, features, target, cv=3)
        search = GridSearchCV(model, {"selectkbest__k": [1, 2, 4]}, cv=3).fit(features, target)
    assert r2.shape == (3,) and np.isfinite(r2).all()
    assert search.best_params_["selectkbest__k"] in (2, 4)
    chosen = search.best_estimator_.named_steps["selectkbest"]
    assert chosen.pvalues_ is None and {0, 2} <= set(np.flatnonzero(chosen.get_support()))
    fdr = SelectFdr(partial(mitool.feature_scores, permutations=99), alpha=0.05).fit(features, target)
    assert set(np.flatnonzero(fdr.get_support())) == {0, 2}
