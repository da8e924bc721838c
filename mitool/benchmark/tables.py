"""The ``tables`` suite: mitool on real tables, against three references that need no truth.

The tables are the data sets shipped inside scikit-learn (offline): iris, wine, breast cancer and
digits (class labels) and diabetes (a continuous target; its raw values, ``scaled=False``). For each,
every feature against the target (digits: the central 4 x 4 block of its 8 x 8 pixels,
:data:`DIGITS_PIXELS`) and all features together against the target. Each row holds

* **mitool**: ``mitool.estimation.estimate(feature, target, seed=seed)``, the default estimator
  for whatever the data are (class labels are whole numbers, so discrete), with its interval;
* **scikit-learn** (one-feature rows only): ``mutual_info_classif`` for labels,
  ``mutual_info_regression`` for diabetes, all the data set's features in one call with
  ``random_state=seed`` and ``discrete_features`` true for a column of at most max(2, sqrt(n))
  distinct values (digits' pixels, diabetes' sex): an estimate, not a bound;
* **held-out bound** (:func:`heldout_class_bound`, :func:`heldout_regression_bound`): a
  variational lower bound scored on rows the model did not see (5-fold cross-validation, every row
  held out once); its expectation over the data is at most I(X; Y) (the argument is in each
  function's docstring), its value scatters around that expectation (``heldout_stderr``);
* **Gaussian copula** (:func:`copula_mi`; Ince et al. 2017, "A statistical framework for
  neuroimaging data analysis based on mutual information estimated via a Gaussian copula"): the
  Gaussian MI of the columns' rank normal scores. A lower bound on the population MI when the
  target is one continuous column, or when the target is class labels and the feature is one
  column; with several features against labels it is the Gaussian-copula *estimate*, not a bound
  (``copula_kind``). The reasons are in :func:`copula_mi`.

Two checks per row: ``below_heldout_bound`` ("yes" is bad): mitool's interval lies entirely below
the held-out bound (its upper end is under the bound's value); ``near_sklearn``: mitool is within
max(0.05 nats, 10% of scikit-learn's value) of scikit-learn, asked only where scikit-learn is
itself above the held-out bound and above the copula bound (blank elsewhere).

:func:`run_tables` writes ``OUT/tables.csv`` (:data:`COLUMNS`) and ``OUT/tables.md``, both
atomically. scikit-learn is optional (``pip install 'mitool[compare]'``): :func:`require_sklearn`
raises :class:`SklearnMissing` with :data:`SKLEARN_MISSING` without it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mitool._infra.files import atomic_write_text, write_csv

__all__ = [
    "COLUMNS",
    "DATASETS",
    "DIGITS_PIXELS",
    "SKLEARN_MISSING",
    "Bound",
    "Row",
    "SklearnMissing",
    "Table",
    "copula_mi",
    "gaussian_entropy",
    "heldout_class_bound",
    "heldout_regression_bound",
    "load_table",
    "markdown",
    "normal_scores",
    "require_sklearn",
    "run_tables",
    "sklearn_mi",
    "summary_lines",
    "table_rows",
]

DATASETS = ("iris", "wine", "breast_cancer", "diabetes", "digits")
"""The data sets of the suite, in its order (scikit-learn's ``load_<name>``)."""

DIGITS_PIXELS = tuple(8 * row + column for row in range(2, 6) for column in range(2, 6))
"""The digits' pixels with a row of their own: the central 4 x 4 block (the joint row has all 64)."""

FOLDS = 5
"""Cross-validation folds of the held-out bounds."""

SKLEARN_MISSING = "the tables suite needs scikit-learn (pip install 'mitool[compare]')"

COLUMNS = (
    "dataset", "feature", "n", "target", "mitool", "mitool_low", "mitool_high", "mitool_estimator",
    "sklearn", "heldout_bound", "heldout_stderr", "heldout_model", "copula", "copula_kind",
    "below_heldout_bound", "near_sklearn", "mitool_seconds", "note",
)  # fmt: skip
"""The columns of tables.csv (``copula_kind``: bound or estimate; the two checks: yes, no or blank)."""

UNIFORM_SHARE = 1e-6
"""The share of the uniform distribution mixed into the classifier's probabilities."""

DEFENSIVE_SHARE = 0.01
"""The share of a broad (Cauchy) density mixed into both densities of the regression bound."""

NEAR_NATS, NEAR_SHARE = 0.05, 0.10
"""``near_sklearn``: within max(NEAR_NATS, NEAR_SHARE x scikit-learn's value)."""


class SklearnMissing(ImportError):
    """scikit-learn is not installed (the message: :data:`SKLEARN_MISSING`)."""


def require_sklearn() -> None:
    """Raise :class:`SklearnMissing` unless scikit-learn can be imported."""
    try:
        import sklearn  # noqa: F401
    except ImportError:
        raise SklearnMissing(SKLEARN_MISSING) from None


# --- the data -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    """One data set: ``x`` (n, d) float64, the ``target`` (int64 labels when ``classes``, else
    float64), the features' names and the columns that get a row of their own."""

    name: str
    x: np.ndarray
    target: np.ndarray
    feature_names: tuple[str, ...]
    classes: bool
    features: tuple[int, ...]


def load_table(name: str) -> Table:
    """The data set ``name`` (one of :data:`DATASETS`) from scikit-learn's bundled files."""
    from sklearn import datasets

    if name not in DATASETS:
        raise ValueError(f"the tables suite has no data set {name!r}; it has {', '.join(DATASETS)}")
    loaded = (
        datasets.load_diabetes(scaled=False) if name == "diabetes" else getattr(datasets, f"load_{name}")()
    )
    x = np.asarray(loaded.data, dtype=np.float64)
    classes = name != "diabetes"
    target = np.asarray(loaded.target, dtype=np.int64 if classes else np.float64)
    features = DIGITS_PIXELS if name == "digits" else tuple(range(x.shape[1]))
    return Table(name, x, target, tuple(str(f) for f in loaded.feature_names), classes, features)


def _discrete_columns(x: np.ndarray) -> np.ndarray:
    """Columns of at most max(2, sqrt(n)) distinct values: passed to scikit-learn as discrete."""
    limit = max(2, math.isqrt(len(x)))
    return np.array([len(np.unique(column)) <= limit for column in x.T])


def sklearn_mi(table: Table, seed: int = 0) -> np.ndarray:
    """scikit-learn's MI (nats) of each column of ``table.x`` with the target (see the module)."""
    from sklearn.feature_selection import mutual_info_classif, mutual_info_regression

    function = mutual_info_classif if table.classes else mutual_info_regression
    return function(table.x, table.target, discrete_features=_discrete_columns(table.x), random_state=seed)


# --- the held-out bounds --------------------------------------------------------------------------


@dataclass(frozen=True)
class Bound:
    """A held-out bound: its ``value`` (nats), the standard error of that value over the rows
    (the per-row terms' spread over sqrt(n); the folds' shared training is not counted) and the
    model that made it."""

    value: float
    stderr: float
    model: str


def _model(columns: int, classes: bool):
    """One column: a quadratic model (standardised x and x^2); several: a linear one, on
    standardised features; logistic regression (C = 1) for labels, ridge (alpha = 1) for a
    continuous target."""
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PolynomialFeatures, StandardScaler

    last = LogisticRegression(C=1.0, max_iter=5000) if classes else Ridge(alpha=1.0)
    if columns == 1:
        steps = [StandardScaler(), PolynomialFeatures(2, include_bias=False), StandardScaler(), last]
    else:
        steps = [StandardScaler(), last]
    kind = "logistic regression" if classes else "ridge regression"
    return make_pipeline(*steps), f"{'quadratic' if columns == 1 else 'linear'} {kind}"


def _as_columns(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x.reshape(len(x), -1)


def heldout_class_bound(x: np.ndarray, labels: np.ndarray, folds: int = FOLDS, seed: int = 0) -> Bound:
    """I(X; Y) >= H(Y) - CE for class labels Y: H the plug-in entropy of all the labels, CE the
    held-out cross-entropy (nats) of a logistic regression (:func:`_model`), each row scored by the
    model of the stratified fold that held it out. The model's probabilities are mixed with
    :data:`UNIFORM_SHARE` of the uniform distribution (still a model q, so still a bound), so that a
    confidently wrong row costs at most about 16 nats, not infinity.

    Why it is a lower bound in expectation: for any fixed q(y | x) independent of a row (x, y),
    E[-log q(y | x)] = H(Y | X) + E_x KL(p(. | x) || q(. | x)) >= H(Y | X); each row's q was trained
    without it, so E[CE] >= H(Y | X). The plug-in entropy of the labels is biased down (entropy is
    concave and the frequencies are unbiased): E[H_plugin] <= H(Y). Hence E[H_plugin - CE] <=
    H(Y) - H(Y | X) = I(X; Y), for independent rows; the value scatters around its expectation by
    about ``stderr``. (With the label frequencies of the training folds in place of H_plugin the
    first term would be a held-out cross-entropy, biased *up* by KL(p || p_train).) A poor model
    only loosens the bound.
    """
    from sklearn.model_selection import StratifiedKFold

    x, labels = _as_columns(x), np.asarray(labels).ravel()
    codes = np.unique(labels, return_inverse=True)[1]
    counts = np.bincount(codes)
    log_p = np.log(counts / len(codes))
    log_q = np.empty(len(codes))
    model, name = _model(x.shape[1], classes=True)
    for train, test in StratifiedKFold(folds, shuffle=True, random_state=seed).split(x, codes):
        model.fit(x[train], codes[train])
        probabilities = np.zeros((len(test), len(counts)))
        probabilities[:, model.classes_] = model.predict_proba(x[test])
        mixed = (1 - UNIFORM_SHARE) * probabilities + UNIFORM_SHARE / len(counts)
        log_q[test] = np.log(mixed[np.arange(len(test)), codes[test]])
    terms = log_q - log_p[codes]
    return Bound(float(terms.mean()), float(terms.std(ddof=1) / math.sqrt(len(terms))), name)


def _kde(points: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """The density of a Gaussian KDE of 1-D ``points`` with Scott's bandwidth (scipy's
    ``gaussian_kde`` in one dimension), as a function of an array of values."""
    width = max(float(np.std(points, ddof=1)) * len(points) ** -0.2, 1e-12)
    chunk = max(1, 2**22 // len(points))

    def density(values: np.ndarray) -> np.ndarray:
        flat = np.ravel(values)
        result = np.empty(flat.size)
        for start in range(0, flat.size, chunk):
            block = (flat[start : start + chunk, None] - points[None, :]) / width
            result[start : start + chunk] = np.exp(-0.5 * block**2).mean(axis=1)
        return (result / (width * math.sqrt(2 * math.pi))).reshape(np.shape(values))

    return density


def _broad(points: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """A Cauchy density at the median of ``points`` with half their interquartile range as scale."""
    centre = float(np.median(points))
    quartiles = np.percentile(points, [25, 75])
    scale = max(float(quartiles[1] - quartiles[0]) / 2, float(np.std(points)) / 10, 1e-12)
    return lambda values: 1.0 / (math.pi * scale * (1.0 + ((values - centre) / scale) ** 2))


def _normalising_map(points: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """A strictly increasing map that sends ``points`` to their rank normal scores (tied points to
    their mean score): linear between the distinct points, and beyond them with the slope of the
    first or last segment."""
    from scipy.special import ndtri
    from scipy.stats import rankdata

    values, codes = np.unique(points, return_inverse=True)
    if len(values) == 1:
        return lambda v: np.asarray(v, dtype=np.float64) - values[0]
    scores = ndtri(rankdata(points) / (len(points) + 1))
    knots = np.bincount(codes, weights=scores) / np.bincount(codes)
    first = (knots[1] - knots[0]) / (values[1] - values[0])
    last = (knots[-1] - knots[-2]) / (values[-1] - values[-2])

    def normalised(v: np.ndarray) -> np.ndarray:
        v = np.asarray(v, dtype=np.float64)
        inside = np.interp(v, values, knots)
        below = knots[0] + (v - values[0]) * first
        above = knots[-1] + (v - values[-1]) * last
        return np.where(v < values[0], below, np.where(v > values[-1], above, inside))

    return normalised


def heldout_regression_bound(
    x: np.ndarray,
    y: np.ndarray,
    folds: int = FOLDS,
    seed: int = 0,
    residuals: str = "kde",
    normalise: bool = True,
) -> Bound:
    """A variational lower bound for a continuous target, scored on held-out rows. Per fold, m(x)
    is a ridge regression (:func:`_model`) fitted on the training folds; with ``normalise`` (the
    default) it predicts T(y), T a strictly increasing map fitted on the training folds' y alone
    that sends them to their rank normal scores (:func:`_normalising_map`; I(X; T(Y)) = I(X; Y),
    and a skewed or heavy-tailed target becomes nearly Gaussian), and so does everything below, y
    standing for T(y). r is the density of its
    training residuals (scaled by sqrt(n / (n - p - 1)) for the fit's optimism): a Gaussian KDE of
    them (Scott's bandwidth; ``residuals="kde"``) or the Gaussian of their variance
    (``residuals="gaussian"``); p0 a Gaussian KDE of the training folds' y; b a Cauchy density
    around their median (:func:`_broad`). With e = :data:`DEFENSIVE_SHARE`,

        q(y | x) = (1 - e) r(y - m(x)) + e b(y),    p(y) = (1 - e) p0(y) + e b(y)

    (the share of b keeps both from vanishing where the training rows were sparse: a held-out y
    beyond them would otherwise make log q or q / p run away; it barely moves the ratio
    elsewhere). Then, on the held-out rows,

        B = 1 + mean_i log q(y_i | x_i) / p(y_i) - mean_{i != j} q(y_j | x_i) / p(y_j)

    (pairs i != j of one held-out fold).

    The plain form E[log q(y | x)] - E[log p(y)] (the Barber-Agakov bound with p in place of the
    true marginal) is a lower bound only up to the marginal's estimation error: -E[log p(y)] =
    h(Y) + KL(p_Y || p) overstates h(Y) by that KL. The last term removes the caveat: with
    g = 1 + log q(y | x) / p(y), B is the NWJ bound E_P[g] - E_{P_X x P_Y}[e^(g - 1)] <= I(X; Y)
    (Nguyen, Wainwright & Jordan 2010), which holds for any positive q and p, and both means are
    unbiased on rows the models did not see (the second over pairs of different rows, a sample of
    P_X x P_Y). So E[B] <= I(X; Y) for independent rows, with no Gaussian assumption on the
    residuals or on y; when p is the true marginal the last term is 1 in expectation and B is the
    plain form. The KDE of the residuals fits a skewed target better than a Gaussian (diabetes: a
    feature with no information gets about 0, where the Gaussian q gives -0.05), which only
    tightens the bound.
    """
    from sklearn.model_selection import KFold

    if residuals not in ("kde", "gaussian"):
        raise ValueError(f"residuals must be kde or gaussian, got {residuals!r}")
    x, y = _as_columns(x), np.asarray(y, dtype=np.float64).ravel()
    terms = np.empty(len(y))
    model, name = _model(x.shape[1], classes=False)
    parameters = 2 if x.shape[1] == 1 else x.shape[1]
    share = DEFENSIVE_SHARE
    for train, test in KFold(folds, shuffle=True, random_state=seed).split(x):
        mapped = _normalising_map(y[train])(y) if normalise else y
        model.fit(x[train], mapped[train])
        scale = math.sqrt(len(train) / max(len(train) - parameters - 1, 1))
        errors = (mapped[train] - model.predict(x[train])) * scale
        offsets = mapped[test][None, :] - model.predict(x[test])[:, None]  # y_j - m(x_i): rows i, columns j
        if residuals == "kde":
            r = _kde(errors)(offsets)
        else:
            variance = max(float(errors @ errors) / len(errors), 1e-24)
            r = np.exp(-0.5 * offsets**2 / variance) / math.sqrt(2 * math.pi * variance)
        broad = _broad(mapped[train])(mapped[test])
        q = (1 - share) * r + share * broad[None, :]
        p = (1 - share) * _kde(mapped[train])(mapped[test]) + share * broad
        ratio = q / p[None, :]
        own = np.log(np.diag(ratio))
        np.fill_diagonal(ratio, 0.0)
        terms[test] = 1.0 + own - ratio.sum(axis=1) / (len(test) - 1)
    model_name = (
        f"{name}{' of normal scores' if normalise else ''}, "
        f"{'KDE' if residuals == 'kde' else 'Gaussian'} residuals, KDE marginal"
    )
    return Bound(float(terms.mean()), float(terms.std(ddof=1) / math.sqrt(len(terms))), model_name)


# --- the Gaussian copula ---------------------------------------------------------------------------


def normal_scores(x: np.ndarray, seed: int = 0) -> np.ndarray:
    """Each column's rank normal scores Phi^-1(rank / (n + 1)), ties broken at random (seeded): the
    same as adding a vanishing jitter to the values, which keeps the copula bound a bound for tied
    and discrete columns (see :func:`copula_mi`). A strictly increasing map of a column leaves its
    scores as they are."""
    from scipy.special import ndtri

    x = _as_columns(x)
    rng = np.random.default_rng(seed)
    scores = np.empty_like(x)
    ranks = np.empty(len(x))
    for column in range(x.shape[1]):
        order = np.lexsort((rng.random(len(x)), x[:, column]))
        ranks[order] = np.arange(1, len(x) + 1)
        scores[:, column] = ndtri(ranks / (len(x) + 1))
    return scores


def gaussian_entropy(rows: np.ndarray) -> float:
    """The differential entropy (nats) of a Gaussian fitted to ``rows`` (n, d), with the analytic
    bias correction of Ince et al. 2017 (their ``ent_g``): 1/2 log det of the sample covariance
    (ddof 1) corrected by its expectation under Gaussian sampling, so that the value is unbiased for
    Gaussian rows."""
    from scipy.special import digamma

    rows = _as_columns(rows)
    n, d = rows.shape
    covariance = np.atleast_2d(np.cov(rows, rowvar=False))
    half_log_det = float(np.log(np.diagonal(np.linalg.cholesky(covariance))).sum())
    correction = (
        d * (math.log(2.0) - math.log(n - 1.0)) / 2.0 + digamma((n - np.arange(1, d + 1)) / 2.0).sum() / 2
    )
    return half_log_det + d * (math.log(2 * math.pi) + 1) / 2 - correction


def copula_mi(x: np.ndarray, target: np.ndarray, classes: bool, seed: int = 0) -> tuple[float, bool]:
    """The Gaussian-copula MI (nats) of ``x`` (n, d) with the target, and whether it is a lower bound.

    Every continuous column is replaced by its rank normal scores (:func:`normal_scores`; the MI
    is unchanged by these monotone maps). A continuous target (one column y): the Gaussian MI
    h(X') + h(y') - h(X', y') of the scores (Ince et al.'s ``gcmi_cc``), -1/2 log(1 - R^2) with R^2
    the squared multiple correlation of y' on X'. Class labels: the class-conditional Gaussian
    model on the scores, h_G(X') - sum_c p_c h_G(X' | c) (Ince et al.'s ``gcmi_model_cd``), h_G the
    entropy of a Gaussian fitted to the rows. Entropies bias-corrected (:func:`gaussian_entropy`).

    Which are bounds (population values; the sample value scatters around it):

    * a continuous target of one column: y' is exactly N(0, 1), so h(y') = h_G(1), and
      h(y' | X') <= h(y' - b X') <= h_G(1 - R^2) (a Gaussian has the most entropy for its variance);
      so I = h(y') - h(y' | X') >= -1/2 log(1 - R^2), for any number of columns of X;
    * class labels and one column x: x' is exactly N(0, 1) and h(x' | c) <= h_G(var(x' | c)), so
      I = h(x') - sum_c p_c h(x' | c) >= h_G(1) - sum_c p_c h_G(var(x' | c)) (Ince et al. note the
      same: "for 1D x this is a lower bound");
    * class labels and several columns: **not a bound**. The columns of X' are each N(0, 1) but not
      jointly Gaussian, so h(X') may be far below h_G(cov X'). Example: X2 = X1 in class 0 and
      X2 = -X1 in class 1, X1 ~ N(0, 1): each column is N(0, 1), cov X' = I, each class's covariance
      is singular, and the value goes to infinity while I(X; Y) <= log 2. It is the Gaussian-copula
      estimate.

    Ties: a tied or discrete column has no continuous distribution, so "exactly N(0, 1)" fails;
    the random tie-break makes the scores those of X + eps U for a small enough eps (U uniform
    noise), whose MI with the target is at most I(X; Y) (data processing), so the bound still holds.
    The same goes for a tied continuous target.
    """
    scores = normal_scores(x, seed)
    if classes:
        codes = np.unique(np.asarray(target).ravel(), return_inverse=True)[1]
        conditional = sum(
            (codes == c).mean() * gaussian_entropy(scores[codes == c]) for c in range(codes.max() + 1)
        )
        return gaussian_entropy(scores) - conditional, scores.shape[1] == 1
    target_scores = normal_scores(target, seed + 1)
    joint = np.hstack([scores, target_scores])
    value = gaussian_entropy(scores) + gaussian_entropy(target_scores) - gaussian_entropy(joint)
    return value, target_scores.shape[1] == 1 or scores.shape[1] == 1


# --- the rows --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One row of the suite: a feature (or all of them, ``joint``) of a data set against its target."""

    dataset: str
    feature: str
    n: int
    classes: bool
    mitool: float
    mitool_low: float
    mitool_high: float
    mitool_estimator: str
    sklearn: float
    heldout: Bound
    copula: float
    copula_is_bound: bool
    mitool_seconds: float
    note: str = ""

    def below_heldout_bound(self) -> bool | None:
        """mitool's whole interval under the held-out bound (bad); None when mitool gave nothing."""
        if not math.isfinite(self.mitool_high):
            return None
        return self.mitool_high < self.heldout.value

    def sklearn_above_bounds(self) -> bool:
        """scikit-learn's value is above the held-out bound and, where that is a bound, the copula's."""
        if not math.isfinite(self.sklearn):
            return False
        return self.sklearn > self.heldout.value and (not self.copula_is_bound or self.sklearn > self.copula)

    def near_sklearn(self) -> bool | None:
        """mitool within max(0.05, 10%) of scikit-learn; None where scikit-learn is not above both bounds."""
        if not self.sklearn_above_bounds():
            return None
        if not math.isfinite(self.mitool):
            return False
        return abs(self.mitool - self.sklearn) <= max(NEAR_NATS, NEAR_SHARE * abs(self.sklearn))

    def as_csv(self) -> list[object]:
        def number(value: float) -> str:
            return f"{value:.6g}" if math.isfinite(value) else ""

        def answer(value: bool | None) -> str:
            return "" if value is None else ("yes" if value else "no")

        return [
            self.dataset, self.feature, self.n, "classes" if self.classes else "continuous",
            number(self.mitool), number(self.mitool_low), number(self.mitool_high), self.mitool_estimator,
            number(self.sklearn), number(self.heldout.value), number(self.heldout.stderr), self.heldout.model,
            number(self.copula), "bound" if self.copula_is_bound else "estimate",
            answer(self.below_heldout_bound()), answer(self.near_sklearn()), f"{self.mitool_seconds:.3g}",
            self.note,
        ]  # fmt: skip


def _mitool(
    x: np.ndarray, target: np.ndarray, seed: int
) -> tuple[tuple[float, float, float], str, float, str]:
    """mitool's default estimate: (value, low, high), the estimator, seconds, and the error if any."""
    from mitool.estimation import estimate

    start = time.perf_counter()
    try:
        result = estimate(x, target, seed=seed)
    except Exception as error:  # reported in the row: the suite shows what mitool does, failures too
        first = str(error).splitlines()[0] if str(error) else ""
        return (math.nan,) * 3, "", time.perf_counter() - start, f"{type(error).__name__}: {first}"
    values = (float(result.value), float(result.ci_low), float(result.ci_high))
    return values, result.estimator, time.perf_counter() - start, ""


def _row(table: Table, columns: Sequence[int], name: str, sklearn: float, seed: int) -> Row:
    x = table.x[:, list(columns)]
    (value, low, high), estimator, seconds, note = _mitool(
        x[:, 0] if len(columns) == 1 else x, table.target, seed
    )
    bound_function = heldout_class_bound if table.classes else heldout_regression_bound
    copula, is_bound = copula_mi(x, table.target, table.classes, seed)
    return Row(table.name, name, len(x), table.classes, value, low, high, estimator, sklearn,
               bound_function(x, table.target, seed=seed), copula, is_bound, seconds, note)  # fmt: skip


def _planned(table: Table) -> list[tuple[tuple[int, ...], str]]:
    single = [((column,), table.feature_names[column]) for column in table.features]
    return [*single, (tuple(range(table.x.shape[1])), f"all {table.x.shape[1]}")]


def table_rows(name: str, seed: int = 0, progress: Callable[[str], None] | None = None) -> list[Row]:
    """The rows of data set ``name``: each feature of it (:attr:`Table.features`), then all
    features together (feature ``all <d>``, no scikit-learn value). ``progress(label)`` is called
    after each row."""
    require_sklearn()
    table = load_table(name)
    theirs = sklearn_mi(table, seed)
    rows = []
    for columns, feature in _planned(table):
        sklearn = float(theirs[columns[0]]) if len(columns) == 1 else math.nan
        rows.append(_row(table, columns, feature, sklearn, seed))
        if progress is not None:
            progress(f"{name}/{feature}")
    return rows


# --- the outputs -----------------------------------------------------------------------------------


def _number(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if math.isfinite(value) else "–"


def markdown(rows: Sequence[Row], seconds: float | None = None) -> str:
    """tables.md: what the columns are, one line per row, and :func:`summary_lines`."""
    lines = [
        "# mitool on real tables (`mitool benchmark --suite tables`)",
        "",
        "MI in nats of each feature, and of all features together, with the target. mitool: the "
        "default `estimate(feature, target)` and its interval; scikit-learn: `mutual_info_classif` / "
        "`mutual_info_regression` (one feature only); held-out: a variational lower bound scored on "
        f"held-out rows ({FOLDS}-fold, ± its standard error); copula: the Gaussian-copula lower bound, "
        "or with * the Gaussian-copula estimate (several features against labels: not a bound). "
        "✗ in *below*: mitool's whole interval is under the held-out bound. *near sklearn*: within "
        "max(0.05, 10%) of scikit-learn, asked where scikit-learn is above both bounds.",
        "",
        "| data set | feature | n | mitool [interval] | estimator | scikit-learn | held-out bound | copula | "
        "below | near sklearn |",
        "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | :---: | :---: |",
    ]
    for row in rows:
        ours = (
            f"{_number(row.mitool)} [{_number(row.mitool_low)}, {_number(row.mitool_high)}]"
            if math.isfinite(row.mitool)
            else f"no value ({row.note})"
        )
        near = row.near_sklearn()
        cells = [
            row.dataset, row.feature, str(row.n), ours, row.mitool_estimator, _number(row.sklearn),
            f"{_number(row.heldout.value)} ± {_number(row.heldout.stderr)}",
            f"{_number(row.copula)}{'' if row.copula_is_bound else '*'}",
            "✗" if row.below_heldout_bound() else "", "" if near is None else ("✓" if near else "✗"),
        ]  # fmt: skip
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |")
    lines += ["", *(f"- {line}" for line in summary_lines(rows, seconds))]
    return "\n".join(lines) + "\n"


def summary_lines(rows: Sequence[Row], seconds: float | None = None) -> list[str]:
    """A few lines: the rows, mitool under the held-out bound (which), near scikit-learn, failures."""
    datasets = list(dict.fromkeys(row.dataset for row in rows))
    took = f" in {seconds:.0f} s" if seconds is not None else ""
    lines = [f"{len(rows)} rows of {len(datasets)} data sets ({', '.join(datasets)}){took}"]
    valued = [row for row in rows if row.below_heldout_bound() is not None]
    below = [row for row in valued if row.below_heldout_bound()]
    named = ", ".join(
        f"{row.dataset}/{row.feature} ({_number(row.mitool_high)} < {_number(row.heldout.value)})"
        for row in below[:10]
    )
    lines.append(
        f"mitool below a held-out lower bound by more than its interval: {len(below)} of {len(valued)} rows"
        + (f": {named}{', ...' if len(below) > 10 else ''}" if below else "")
    )
    asked = [row for row in rows if row.near_sklearn() is not None]
    near = sum(bool(row.near_sklearn()) for row in asked)
    lines.append(
        f"mitool within max(0.05 nats, 10%) of scikit-learn where scikit-learn is above both bounds: "
        f"{near} of {len(asked)} rows"
    )
    failed = [row for row in rows if row.below_heldout_bound() is None]
    if failed:
        lines.append(
            f"mitool gave no value on {len(failed)} rows: "
            + ", ".join(f"{row.dataset}/{row.feature} ({row.note})" for row in failed[:5])
        )
    return lines


def run_tables(
    out: str | Path,
    datasets: Sequence[str] | None = None,
    seed: int = 0,
    progress: Callable[[int, int, str], None] | None = None,
) -> tuple[list[Row], list[Path], float]:
    """Every row of ``datasets`` (default :data:`DATASETS`); writes OUT/tables.csv and
    OUT/tables.md (atomically) and returns the rows, the two paths and the seconds taken.
    ``progress(done, total, label)`` after each row (and once with 0 before the first). Raises
    :class:`SklearnMissing` without scikit-learn."""
    require_sklearn()
    datasets = DATASETS if datasets is None else tuple(datasets)
    start = time.perf_counter()
    total = sum(len(_planned(load_table(name))) for name in datasets)
    done = 0
    if progress is not None:
        progress(0, total, "")

    def step(label: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total, label)

    rows = [row for name in datasets for row in table_rows(name, seed, step)]
    seconds = time.perf_counter() - start
    out = Path(out)
    write_csv(out / "tables.csv", COLUMNS, [row.as_csv() for row in rows])
    atomic_write_text(out / "tables.md", markdown(rows, seconds))
    return rows, [out / "tables.csv", out / "tables.md"], seconds
