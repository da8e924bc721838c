"""Feature screening: each column against a target, as :func:`feature_mi` (with q-values) and as
:func:`feature_scores` for scikit-learn's ``SelectKBest``.

**Feature screening** (:func:`feature_mi`): each column j of X against y, its MI with the
estimator's interval, its p-value and the Benjamini-Hochberg q-value (Benjamini & Hochberg 1995):
with the m p-values sorted, p_(1) <= ... <= p_(m),

    q_(i) = min_{j >= i} min(1, m p_(j) / j),

and the columns with q <= alpha are a selection whose expected false discovery rate is at most
alpha m_0 / m when the true nulls' p-values are independent, or positively regression dependent on
a subset (Benjamini & Yekutieli 2001, Theorem 1.2). Under any other dependence between the
columns, ``fdr="by"`` gives Benjamini & Yekutieli's q-values, the same with m replaced by
m sum_{i<=m} 1/i, whose bound holds whatever the dependence (:func:`benjamini_yekutieli`). A
constant column carries no information: MI 0 and p = 1, with a note (scikit-learn's
``mutual_info_classif`` once scored a constant column above its target's entropy: its issue 30772).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mitool import checks
from mitool.estimation import Prepared, is_discrete, prepare
from mitool.estimators.base import ArrayLike, as_rows, holds_labels
from mitool.independence.permutation_test import DEFAULT_PERMUTATIONS, check_size, plus_one, run_test
from mitool.independence.pvalues import FDR_METHODS, FDR_NAMES, fdr_qvalues
from mitool.independence.results import FeatureMI
from mitool.independence.statistics import TEST_DEFAULTS, unconditional_statistic


def column_names(features: Any, width: int, columns: Sequence[str] | None) -> tuple[str, ...]:
    if columns is not None:
        if len(columns) != width:
            raise checks.ParameterError(
                "columns", f"must name each of the {width} columns, got {len(columns)} names"
            )
        return tuple(str(name) for name in columns)
    if hasattr(features, "columns"):  # a pandas DataFrame
        return tuple(str(name) for name in features.columns)
    return tuple(f"x{index}" for index in range(width))


def feature_columns(features: Any) -> list[Any]:
    """The columns of X: a DataFrame's Series (their dtype says labels), or an array's columns."""
    if hasattr(features, "iloc") and hasattr(features, "columns"):
        return [features.iloc[:, index] for index in range(features.shape[1])]
    if hasattr(features, "detach"):
        features = features.detach().cpu().numpy()
    array = np.asarray(features)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise checks.ParameterError(
            "X", f"must be a table of one row per sample (n, d), got shape {array.shape}"
        )
    return [array[:, index] for index in range(array.shape[1])]


def _declared_features(discrete_features: Any, width: int) -> list[bool | None]:
    """Each column: declared discrete (True), continuous (False) or left to the auto rule (None);
    ``discrete_features`` as scikit-learn takes it: "auto", a bool, a boolean mask or indices."""
    if isinstance(discrete_features, str):
        checks.choice("discrete_features", discrete_features, ("auto",))
        return [None] * width
    if isinstance(discrete_features, (bool, np.bool_)):
        return [bool(discrete_features)] * width
    chosen = np.asarray(discrete_features)
    if chosen.dtype == bool:
        if chosen.shape != (width,):
            raise checks.ParameterError(
                "discrete_features", f"as a mask must have {width} entries, got {chosen.shape}"
            )
        return chosen.tolist()
    declared = [False] * width
    for index in chosen.reshape(-1).tolist():
        checks.whole_number("discrete_features", index, -width, width - 1)
        declared[index] = True
    return declared


def _is_discrete_side(data: Any, declared: bool | None, parameter: str, name: str) -> bool:
    """Whether a side is discrete: labels always; declared; or by :func:`mitool.estimation.is_discrete`."""
    if holds_labels(data):
        return True
    rows = as_rows(data, data, missing="drop")[0]
    if declared is None:
        return is_discrete(rows)
    if declared and not np.all(rows == np.round(rows)):
        raise checks.ParameterError(parameter, f"declares {name} discrete, but it holds non-integer values")
    return declared


def _column_discrete(
    column: Any, target: Any, feature: bool | None, target_declared: bool | None, name: str
) -> str:
    """The ``discrete`` argument of the test of one column against the target."""
    if feature is None and target_declared is None:
        return "auto"
    sides = [
        "x" if _is_discrete_side(column, feature, "discrete_features", f"column {name}") else "",
        "y" if _is_discrete_side(target, target_declared, "discrete_target", "the target") else "",
    ]
    return ",".join(side for side in sides if side) or "none"


def feature_mi(
    X: Any,
    y: ArrayLike,
    *,
    discrete_features: Any = "auto",
    discrete_target: str | bool = "auto",
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
    ties: str = "auto",
    columns: Sequence[str] | None = None,
    missing: str = "drop",
    fdr: str = "bh",
    intervals: bool = True,
    **settings: Any,
) -> FeatureMI:
    """Each column of X against y: its MI, the estimator's interval, the permutation p-value of
    :func:`independence_test` and the Benjamini-Hochberg (or, ``fdr="by"``, Benjamini-Yekutieli)
    q-value over the columns (see the module).

    Parameters
    ----------
    X : array_like or pandas DataFrame, shape (n, d)
        The features, one column each (a DataFrame's column names become ``.columns``).
    y : array_like, shape (n,) or (n, dy)
        The target: numbers or labels.
    discrete_features : "auto", bool or array_like
        As scikit-learn's ``mutual_info_classif`` takes it: "auto" (labels, and whole numbers with
        at most max(2, sqrt(n)) distinct values, are discrete), all or none, a boolean mask or the
        indices of the discrete columns.
    discrete_target : "auto" or bool
        Whether y is discrete (labels always are).
    permutations : int
        B per column; 0: no test, the statistics alone (``.pvalue`` and ``.qvalue`` NaN), each
        the value the test would give (the same numbers, at the cost of one statistic a column).
    seed : int
        All the randomness (column j's permutations are their own stream).
    ties : str
        As :func:`mitool.estimate` reads it.
    columns : sequence of str, optional
        The columns' names (default: a DataFrame's, else x0, x1, ...).
    missing : str
        "drop" (default): each column's rows with a missing value (in it or in y) are left out of
        that column's test, with a note; "refuse": a missing value is an error.
    fdr : "bh" or "by"
        The q-values: "bh" (default), Benjamini-Hochberg, whose false discovery rate bound needs
        the null columns' p-values independent or positively dependent (PRDS); "by",
        Benjamini-Yekutieli, a bound under any dependence between the columns at the price of a
        factor sum_{i<=m} 1/i on the q-values (:func:`benjamini_yekutieli`).
    intervals : bool
        The estimator's interval of each column (default); False: NaN, one estimate a column fewer.
    **settings
        The statistics' own settings (``k=20``: more neighbours, more power against weak
        dependence; see :func:`independence_test`).

    Returns
    -------
    FeatureMI
        Arrays ``.statistic``, ``.ci_low``, ``.ci_high``, ``.pvalue``, ``.qvalue`` and ``.columns``;
        ``print(result)`` shows the table. For scikit-learn: :func:`feature_scores`.

    Examples
    --------
    >>> import numpy as np, mitool
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 4))
    >>> X[:, 3] = 1.0                                          # a constant column
    >>> y = (X[:, 0] + 0.3 * rng.normal(size=300) > 0).astype(int)
    >>> result = mitool.feature_mi(X, y, permutations=99)
    >>> result.columns
    ('x0', 'x1', 'x2', 'x3')
    >>> bool(result.qvalue[0] < 0.05), float(result.statistic[3]), float(result.pvalue[3])
    (True, 0.0, 1.0)
    """
    width = len(feature_columns(X))
    names = column_names(X, width, columns)
    declared = _declared_features(discrete_features, width)
    if not isinstance(discrete_target, (bool, np.bool_)):
        checks.choice("discrete_target", discrete_target, ("auto",))
    target_declared = None if isinstance(discrete_target, str) else bool(discrete_target)
    checks.whole_number("permutations", permutations, 0)
    checks.choice("fdr", fdr, FDR_METHODS)
    settings = {**settings, "missing": missing}
    rows: list[tuple[float, float, float, float, tuple[str, ...]]] = []
    for index, column in enumerate(feature_columns(X)):
        discrete = _column_discrete(column, y, declared[index], target_declared, names[index])
        if permutations:
            result, prepared = run_test(column, y, permutations=permutations, seed=seed, ties=ties,
                                        discrete=discrete, settings=settings, stream=(index,))  # fmt: skip
            value, pvalue, notes = result.statistic, result.pvalue, result.notes
        else:
            value, prepared = _feature_statistic(column, y, seed, ties, discrete, settings)
            pvalue, notes = math.nan, prepared.notes
        if prepared.exact is not None:
            low = high = 0.0
            if any(note.startswith("x is constant") for note in prepared.exact.notes):
                notes = (f"column {names[index]} is constant: it carries no information, MI 0 and p = 1 (no "
                         "permutations needed)", *notes)  # fmt: skip
                pvalue = 1.0
        elif intervals:
            interval = prepared.estimator.estimate(prepared.x, prepared.y, seed=seed)
            low, high = interval.ci_low, interval.ci_high
        else:
            low = high = math.nan
        rows.append((value, low, high, pvalue, notes))
    statistic, low, high, pvalue = (np.array([row[j] for row in rows], dtype=float) for j in range(4))
    if permutations:
        method = (f"Each column against y by independence_test ({permutations} permutations of y per column; "
                  f"{plus_one(permutations)}); the interval is the estimator's (the sampling noise of the "
                  f"pairs); q: {FDR_NAMES[fdr]} over the columns.")  # fmt: skip
        qvalue = fdr_qvalues(pvalue, fdr)
    else:
        method = ("Each column against y: independence_test's statistic on the data, without permutations "
                  "(p-values NaN, but 1 for a constant column; q-values NaN); the interval is the "
                  "estimator's (the sampling noise of the pairs).")  # fmt: skip
        qvalue = np.full(len(pvalue), math.nan)
    if not intervals:
        method += " No intervals were computed (NaN)."
    return FeatureMI(names, statistic, low, high, pvalue, qvalue, permutations, method,
                     tuple(row[4] for row in rows))  # fmt: skip


def _feature_statistic(
    column: Any, y: ArrayLike, seed: int, ties: str, discrete: str, settings: dict[str, Any]
) -> tuple[float, Prepared]:
    """The statistic that :func:`run_test` computes on the data of one column and y, the data
    prepared as it prepares them, without the permutations; 0 where a side is constant."""
    options = {"estimator": None, "ties": ties, "seed": seed, **settings}
    prepared = prepare(column, y, None, discrete=discrete, defaults=TEST_DEFAULTS, **options)
    if prepared.exact is not None:
        return 0.0, prepared
    check_size(prepared.estimator, prepared)
    statistic, _ = unconditional_statistic(prepared.estimator, prepared.x, prepared.y, seed)
    value = float(statistic(np.arange(len(prepared.x))))
    if not math.isfinite(value):
        raise checks.ParameterError(
            "estimator", f"{prepared.estimator.name} gives a statistic that is not a finite number on the "
            f"data ({len(prepared.x)} pairs); use the default statistic (k-NN on ranks)",
        )  # fmt: skip
    return value, prepared


def feature_scores(
    X: Any, y: ArrayLike, *, permutations: int = 0, **options: Any
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """The MI of each column of X against y (:func:`feature_mi`'s ``.statistic``, with ``options``),
    as scikit-learn's univariate selectors take a ``score_func``.

    By default (``permutations=0``) the scores alone, one k-NN statistic a column and no
    permutations nor intervals, fast enough to sit inside ``cross_val_score`` or ``GridSearchCV``;
    with ``permutations`` B > 0, the pair (scores, permutation p-values), B permutations a column,
    which the selectors by p-value need::

        SelectKBest(mitool.feature_scores, k=3)                             # the 3 columns of highest MI
        SelectFdr(partial(mitool.feature_scores, permutations=999), alpha=0.05)   # BH at 5% on p-values
        cross_val_score(make_pipeline(SelectKBest(mitool.feature_scores, k=3), Ridge()), X, y)  # per fold

    The scores are the numbers the test gives (``permutations`` changes only whether p-values come
    with them), the same in every call on the same data (``seed``); a constant column scores 0.

    Examples
    --------
    >>> import numpy as np, mitool
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); y = X[:, 1] + 0.5 * rng.normal(size=200)
    >>> scores = mitool.feature_scores(X, y)
    >>> int(np.argmax(scores)), scores.shape
    (1, (3,))
    >>> scores, pvalues = mitool.feature_scores(X, y, permutations=49)
    >>> int(np.argmax(scores)), float(pvalues[1])
    (1, 0.02)
    """
    result = feature_mi(X, y, permutations=permutations, intervals=False, **options)
    return (result.statistic, result.pvalue) if permutations else result.statistic
