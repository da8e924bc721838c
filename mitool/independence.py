"""Is the dependence real? Permutation tests of independence with the MI as the statistic.

    import mitool
    result = mitool.independence_test(x, y)        # H0: X and Y are independent
    print(result)                                  # I(X; Y) = 0.123 nats, p = 0.004 (999 permutations ...)
    result.statistic, result.pvalue, result.null   # the estimate, its p-value, the null's summary
    mitool.independence_test(x, y, z)              # H0: X and Y are independent given Z
    mitool.feature_mi(X, y)                        # each column of X against y, with BH q-values
    SelectKBest(mitool.feature_scores, k=3)        # scikit-learn's feature selection by MI

**The statistic** is the MI estimate T = I^(X; Y) that :func:`mitool.estimate` would make of the
data, prepared exactly as it prepares them (:func:`mitool.estimation.prepare`: constant columns
out, discrete variables found, ties dequantised or taken as atoms), except that continuous data of
any dimension get a k-nearest-neighbour statistic rather than a trained one (:data:`TEST_DEFAULTS`):
KSG (k = 20, max-norm) on the normal scores of the ranks; Ross's estimator (k = 20) for a
continuous X against a discrete Y; the Miller-Madow plug-in for two discrete variables; the chain
rule over atoms for data with point masses; and, given a continuous Z, Frenzel & Pompe's
conditional KSG on rank scores.

**The linear statistic beside it.** A k-NN statistic sees any dependence but is weakest where the
dependence is weak and linear (a correlation of 0.15 at n = 400: rejected in 23% of 200 data sets
by KSG alone, 77% by distance correlation; bench/independence.py). Beside KSG and Ross's
statistic, the default unconditional test computes :func:`linear_statistic` (the Gaussian MI of
the rank normal scores: canonical correlations; Wilks' lambda for labels) on the same permutations
and reports the min-p combination of the two p-values (:func:`min_p_combination`), as valid as
either alone (``linear=False``: the k-NN statistic alone; ``linear=True`` given Z: a partial
correlation beside Frenzel & Pompe's, not the default: :data:`LINEAR_COMPANIONS`).
``.statistic`` is the MI estimate; ``.components`` has both statistics and their own p-values.

**The null distribution** comes from B permutations pi_1 .. pi_B of Y's rows: under H0 the pairing
of the rows carries no information, so T(x, y) and the T_b = T(x, y_{pi_b}) are exchangeable, and

    p = (1 + #{b : T_b >= T}) / (1 + B)

is a valid p-value: P(p <= alpha) <= alpha for every alpha, exactly, at any n (Phipson & Smyth
2010, "Permutation p-values should never be zero", Stat. Appl. Genet. Mol. Biol. 9:39). The +1
counts the observed data among the permutations: p is never 0, and with B permutations the
smallest p is 1 / (B + 1) (0.001 for the default B = 999). Values of T_b within 1e-12 of T count
as equal (the same statistic up to rounding, as on a permuted table with the same counts).

**Speed.** What does not change under the permutations is computed once: the KSG statistic keeps
X's and Y's rank scores, their sorted values (one coordinate) or k-d trees (more), and a table of
the digamma function; each permutation redoes only the joint neighbour search and the marginal
counts (in the plane with numba, both compiled in one pass,
:class:`mitool.estimators.grid.PlaneKSG`; else scipy's k-d tree and numpy's sorted searches, the
same numbers). At n = 10 000 a permutation costs about 8 ms of CPU on this project's 2-core
machine, idle (about 33 ms with the tree and numpy), where a fresh KSG estimate costs 30 ms: 1000
permutations with the linear statistic beside take 8.4 s (``bench/independence.py --timing-only
--timing-no-peers``). Fixed points of several coordinates (a 5-D X) are counted from their sorted
distance table, 20 times faster than by the tree's ball queries.

**Conditional tests**, H0: X independent of Y given Z. Permuting all of X would break its
dependence on Z as well, and reject a common cause. Given a continuous Z, the local permutation of
Runge (2018, "Conditional independence testing based on a nearest-neighbor estimator of
conditional mutual information", AISTATS, Algorithm 1) keeps it: each row's k_perm nearest rows in
Z (max-norm on Z's rank scores, the row itself included) are its candidates; the rows are visited
in a random order, and each takes the X of the first of its candidates, in a random order, that no
row has taken yet (the last candidate when all are taken: a repeat, the only case). X then moves
only within neighbourhoods of Z, so its law given Z is kept as far as it changes little within a
neighbourhood (Kim, Neykov, Balakrishnan & Wasserman 2022, "Local permutation tests for conditional
independence", Ann. Stat. 50:3388). Where X and Y both depend strongly on a Z of several
dimensions, five-neighbour cells are too wide: the draws lose the part of X's dependence on Z that
varies within a cell, and with it the dependence of X and Y through Z, so true nulls are rejected
(30% at 0.05 with a 3-D Z, n = 400; docs/independence.md). The default test given a continuous Z
(``z_method="residual"``) therefore draws what is left of X once Z has explained what it can: X
and Y less their regressions on Z (:func:`regress_on_z`: a few models, chosen by leave-one-out
error), X's residuals drawn by the local permutation, and KSG on the residuals as the statistic
(with the linear statistic of the residuals beside it, combined by min-p). The map
(X, Z) -> (X - f(Z), Z) is one to one for a fixed f, so
I(X; Y | Z) = I(X - f(Z); Y - g(Z) | Z) and H0 is unchanged; the draws now have to keep only the
law of a residual given Z, which changes little within a neighbourhood where the regression has
taken the steep part of the dependence out. ``z_method="local"`` is Runge's test of X itself with
Frenzel & Pompe's I^(X; Y | Z) on rank scores; ``z_method="gcm"`` the generalised covariance measure
of Shah & Peters (2020) (:func:`gcm_statistic`). A discrete X or Y is dequantised for the k-NN
statistics (ties broken at random within its values, which keeps the MI and the hypothesis). Every
such test is approximate, and no test of conditional independence holds its level over every law
(Shah & Peters 2020): each reports the neighbourhood diagnostic (:func:`neighbourhood_spread`) and
warns where it exceeds the range its scheme was calibrated on. Given a discrete Z, X is permuted
within each group of Z, which keeps its law given Z exactly (an exact test); the statistic is the
MI within each group weighted by the group's share, as :func:`mitool.estimate` computes
I(X; Y | Z).

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

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from mitool import checks, estimators
from mitool.estimation import Prepared, is_discrete, prepare
from mitool.estimators.base import ArrayLike, as_rows, holds_labels, interval_text
from mitool.runtime import chosen_threads

__all__ = [
    "CO_SPREAD_WARNING",
    "DEFAULT_PERMUTATIONS",
    "FDR_METHODS",
    "LINEAR_COMPANIONS",
    "POINT_STATISTICS",
    "TAIL_EXCEEDANCES",
    "TAIL_METHODS",
    "REGRESSION_MODELS",
    "TEST_DEFAULTS",
    "Z_METHODS",
    "Z_NEIGHBOURS",
    "Component",
    "FeatureMI",
    "IndependenceTest",
    "NullSummary",
    "TailFit",
    "ZRegression",
    "benjamini_hochberg",
    "benjamini_yekutieli",
    "bonferroni_tails",
    "completed_permutation",
    "fdr_qvalues",
    "feature_mi",
    "feature_scores",
    "fit_tail",
    "frenzel_pompe_statistic",
    "gcm_statistic",
    "independence_test",
    "ksg_statistic",
    "linear_statistic",
    "local_permutation",
    "min_p_combination",
    "neighbourhood_spread",
    "permutation_pvalue",
    "plugin_statistic",
    "regress_on_z",
    "tail_pvalue",
]

DEFAULT_PERMUTATIONS = 999
"""Permutations when none are asked for: the smallest p is then 1 / 1000, and the p-value's Monte
Carlo standard error sqrt(p (1 - p) / B) is 0.007 at p = 0.05."""

Z_NEIGHBOURS = 5
"""k_perm of the local permutation: the rows of Z whose X a row may take (itself included), Runge's
default."""

TEST_NEIGHBOURS = 10
"""The test's k-NN statistics take k at most n / 10 (:attr:`mitool.estimators.Default.pairs_per_neighbour`;
at least 3): their k = 20 from 200 pairs, fewer below, so that a table of 20 to 200 rows is tested
(mtcars, 32 rows, was refused: Ross's k = 20 needs 42 pairs)."""

TEST_DEFAULTS: dict[str, estimators.Default] = {
    "continuous": estimators.Default(
        "ksg", {"normalise": "rank", "k": 20}, pairs_per_neighbour=TEST_NEIGHBOURS
    ),
    "low-dimension": estimators.Default(
        "ksg", {"normalise": "rank", "k": 20}, pairs_per_neighbour=TEST_NEIGHBOURS
    ),
    "surface": estimators.Default("ksg", {"normalise": "rank", "k": 20}, pairs_per_neighbour=TEST_NEIGHBOURS),
    "discrete": estimators.Default("plugin"),
    "discrete-y": estimators.Default("ross", {"k": 20}, pairs_per_neighbour=TEST_NEIGHBOURS),
    "discrete-y-high-dimension": estimators.Default("ross", {"k": 20}, pairs_per_neighbour=TEST_NEIGHBOURS),
    "ties": estimators.Default("atoms"),
    "conditional": estimators.Default("frenzel-pompe", {"k": 20}, pairs_per_neighbour=TEST_NEIGHBOURS),
}
"""The statistic for each kind of data when no estimator is named: those of
:data:`mitool.estimators.DEFAULTS` that train nothing, and k-NN estimators where those train a
network (a training per permutation). KSG with k = 20 neighbours rather than estimate()'s 5: at
n = 400 (bench/independence.py, reduced run) it stayed calibrated on every null and its power at
alpha = 0.05 rose from 0.10 to 0.26 (weak linear), 0.10 to 0.54 (labels with small shifts), 0.50 to
0.82 (one dependent coordinate of five); a larger k averages over wider neighbourhoods, the
smoother statistic a test of weak dependence needs. Ross's estimator likewise with k = 20 rather
than its 3: power 0.10 -> 0.54 on labels with small shifts, same reduced run; Frenzel & Pompe's
given Z too: 0.48 -> 0.90 on a direct linear effect beside a common cause, its nulls calibrated
(200 replicates: 0.030 and 0.060 at alpha = 0.05 with a nonlinear common cause and a 3-D Z)."""

POINT_STATISTICS = ("ksg", "gaussian", "plugin", "ross", "atoms", "mixed-ksg", "frenzel-pompe")
"""The estimators whose value is a computation on the rows, recomputed per permutation; the others
train a network for each."""

DISTANCE_TABLE_MAX = 2048
"""Fixed points of two coordinates or more are counted from a table of their sorted distances up
to this many points (32 MB); beyond, by a k-d tree."""

EQUAL_TOLERANCE = 1e-12
"""Null values within this of the statistic (times 1 + |statistic|) count as equal to it."""

_PERMUTATION_STREAM = 0x1D7E
"""Keeps the permutations' random stream apart from the preparation's and the estimators'."""

Statistic = Callable[[np.ndarray], float]
"""The statistic as a function of ``order``: row i of the fixed side goes with row ``order[i]`` of
the permuted side (Y; X for a conditional test). ``order = arange(n)`` gives the observed value."""


# --- results -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NullSummary:
    """The null distribution of the statistic over the permutations: mean, standard deviation and
    the quantiles 0.5, 0.95 and 0.99, in nats."""

    mean: float
    std: float
    median: float
    q95: float
    q99: float

    @classmethod
    def of(cls, values: np.ndarray) -> NullSummary:
        """The summary of the null values (NaN where there are none)."""
        if not len(values):
            return cls(math.nan, math.nan, math.nan, math.nan, math.nan)
        median, q95, q99 = (float(q) for q in np.quantile(values, [0.5, 0.95, 0.99]))
        return cls(float(np.mean(values)), float(np.std(values)), median, q95, q99)

    def as_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "std": self.std, "median": self.median, "q95": self.q95, "q99": self.q99}


@dataclass(frozen=True)
class Component:
    """One statistic of a combined test: its name ("ksg", "ross", "frenzel-pompe", "linear"), its
    value on the data (nats), its own permutation p-value and its null values."""

    name: str
    statistic: float
    pvalue: float
    null_values: np.ndarray = field(default_factory=lambda: np.zeros(0), compare=False, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "statistic": self.statistic, "pvalue": self.pvalue}


@dataclass(frozen=True, repr=False)
class IndependenceTest:
    """A permutation test of independence (:func:`independence_test`).

    statistic: the MI estimate on the data, nats. pvalue: (1 + #{null >= statistic}) / (1 +
    permutations), or, where the default test adds the linear statistic, the two statistics'
    min-p combination (:func:`min_p_combination`); components: then each statistic's value and own
    p-value (:class:`Component`). permutations: B. null: the null distribution's summary
    (:class:`NullSummary`);
    null_values: every null value. method: what was done, in a sentence (the estimator, the
    permutation scheme, the +1). notes: what was decided about the data. estimator: its name.
    conditional: whether Z was given. n_pairs: the rows. seconds: wall time. scheme: the
    permutations in a few words (for ``str``). tail: "none" (the permutation p-value, the default),
    or, with ``tail="gpd"``, what :func:`tail_pvalue` did (:data:`TAIL_METHODS`: "gpd" where the
    p-value is the generalized Pareto tail's; "chi-square" for the GCM). z_method: given a
    continuous Z, the scheme (:data:`Z_METHODS`: "residual", "local" or "gcm"; else "none"): with
    "residual", ``statistic`` is the KSG estimate of I(X - f(Z); Y - g(Z)), the MI of the
    residuals; with "gcm", Shah & Peters' chi-square statistic T (:func:`gcm_statistic`), not an
    MI. warnings: where the neighbourhood diagnostic says the p-value may be too small
    (:func:`neighbourhood_spread`); read such a p-value as unreliable. diagnostic: the spreads and
    the regressions' unexplained variance behind it.
    """

    statistic: float
    pvalue: float
    permutations: int
    null: NullSummary
    method: str
    notes: tuple[str, ...]
    estimator: str
    conditional: bool
    n_pairs: int
    seconds: float
    scheme: str
    null_values: np.ndarray = field(default_factory=lambda: np.zeros(0), compare=False)
    tail: str = "none"
    components: tuple[Component, ...] = ()
    z_method: str = "none"
    warnings: tuple[str, ...] = ()
    diagnostic: dict[str, float] = field(default_factory=dict)

    def __repr__(self) -> str:
        return (f"IndependenceTest(statistic={self.statistic:.4g}, pvalue={self.pvalue:.4g}, "
                f"permutations={self.permutations}, estimator={self.estimator!r})")  # fmt: skip

    def __str__(self) -> str:
        """One sentence: the statistic, the p-value, how many permutations of what (and the
        diagnostic's warning, where there is one)."""
        warned = "".join(f" Warning: {text}." for text in self.warnings)
        return self._sentence() + warned

    def _sentence(self) -> str:
        quantity = "I(X; Y | Z)" if self.conditional else "I(X; Y)"
        if self.z_method == "residual":
            quantity = "I(X - f(Z); Y - g(Z))"
        if self.z_method == "gcm":
            return (f"Generalised covariance measure of X and Y given Z: T = {self.statistic:.4g}, p = "
                    f"{self.pvalue:.3g} ({self.scheme}).")  # fmt: skip
        if not self.permutations:
            return f"{quantity} = {self.statistic:.4f} nats, p = 1 (no permutations needed: {self.scheme})."
        smallest = self.pvalue <= 1 / (self.permutations + 1) * (1 + 1e-9) and self.tail != "gpd"
        floor = f"; the smallest p {self.permutations} permutations can give" if smallest else ""
        if self.tail == "gpd":
            floor = "; p from a generalized Pareto tail fitted to the null"
        statistics = self.estimator
        if self.components:
            statistics = " and ".join(f"{part.name} p = {part.pvalue:.3g}" for part in self.components)
            statistics = f"min-p of {statistics}"
        value = f"{quantity} = {self.statistic:.4f} nats by the test's {self.estimator} statistic"
        if self.statistic < 0:  # an estimate's bias below 0, not a negative MI
            value = (f"{quantity}: {self.estimator}'s estimate {self.statistic:.4f} nats is below 0 (its "
                     "bias where the MI is small; an MI is never negative)")  # fmt: skip
        return (f"{value}, p = {self.pvalue:.3g} ({self.permutations} "
                f"{self.scheme}, {statistics}; {self.estimator}'s null 95% quantile {self.null.q95:.4f} nats"
                f"{floor}).")  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        """Every field but the null values, as plain values (the command line's ``--json``)."""
        return {
            "statistic": self.statistic, "pvalue": self.pvalue, "permutations": self.permutations,
            "null": self.null.as_dict(), "method": self.method, "notes": list(self.notes),
            "estimator": self.estimator, "conditional": self.conditional, "n_pairs": self.n_pairs,
            "seconds": self.seconds, "tail": self.tail,
            "components": [part.as_dict() for part in self.components], "z_method": self.z_method,
            "warnings": list(self.warnings), "diagnostic": dict(self.diagnostic), "summary": str(self),
        }  # fmt: skip


@dataclass(frozen=True, repr=False)
class FeatureMI:
    """Each column of X against y (:func:`feature_mi`): arrays with one value per column.

    columns: the column names. statistic: the MI, nats. ci_low, ci_high: the estimator's interval
    (:attr:`mitool.Estimate.interval` says what it covers: the sampling noise of the pairs).
    pvalue: the permutation p-value of each column. qvalue: the Benjamini-Hochberg q-values
    (Benjamini-Yekutieli's with ``fdr="by"``; ``method`` says which).
    permutations: B per column. method: what was done. notes: one tuple of notes per column.
    """

    columns: tuple[str, ...]
    statistic: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    pvalue: np.ndarray
    qvalue: np.ndarray
    permutations: int
    method: str
    notes: tuple[tuple[str, ...], ...]

    def __repr__(self) -> str:
        return f"FeatureMI(columns={len(self.columns)}, permutations={self.permutations})"

    def __str__(self) -> str:
        """A table: one line per column, the columns in the given order."""
        width = max([6, *(len(name) for name in self.columns)])
        lines = [f"{'column':<{width}}  {'MI (nats)':>9}  {'interval':>17}  {'p':>7}  {'q':>7}"]
        for index, name in enumerate(self.columns):
            interval = interval_text(self.ci_low[index], self.ci_high[index])
            lines.append(f"{name:<{width}}  {self.statistic[index]:>9.4f}  {interval:>17}  "
                         f"{self.pvalue[index]:>7.3g}  {self.qvalue[index]:>7.3g}")  # fmt: skip
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "columns": list(self.columns), "statistic": self.statistic.tolist(),
            "ci_low": self.ci_low.tolist(), "ci_high": self.ci_high.tolist(),
            "pvalue": self.pvalue.tolist(), "qvalue": self.qvalue.tolist(),
            "permutations": self.permutations, "method": self.method, "notes": [list(n) for n in self.notes],
        }  # fmt: skip


# --- the arithmetic of p and q -------------------------------------------------------------------


def permutation_pvalue(observed: float, null: np.ndarray) -> float:
    """The permutation p-value with the +1 of Phipson & Smyth (2010):
    p = (1 + #{b : T_b >= T}) / (1 + B), null values within 1e-12 (1 + |T|) of T counted as equal.

    Examples
    --------
    >>> permutation_pvalue(0.5, np.array([0.1, 0.2, 0.3]))      # none as large: the smallest p, 1/4
    0.25
    >>> permutation_pvalue(0.2, np.array([0.1, 0.2, 0.3]))      # 0.2 and 0.3 reach it: 3/4
    0.75
    """
    null = np.asarray(null, dtype=float)
    return float((1 + _reached(observed, null)) / (1 + len(null)))


def benjamini_hochberg(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """The Benjamini-Hochberg q-values (adjusted p-values) of m p-values, in their order:
    q_(i) = min_{j >= i} min(1, m p_(j) / j) over the p-values sorted increasingly. Rejecting every
    hypothesis with q <= alpha keeps the expected false discovery rate at most alpha (independent
    or positively dependent tests; Benjamini & Hochberg 1995, J. R. Stat. Soc. B 57:289).

    Examples
    --------
    >>> benjamini_hochberg([0.01, 0.04, 0.03, 0.5]).round(3).tolist()
    [0.04, 0.053, 0.053, 0.5]
    """
    values = np.asarray(pvalues, dtype=float)
    count = len(values)
    if not count:
        return values.copy()
    order = np.argsort(values, kind="stable")
    scaled = values[order] * count / np.arange(1, count + 1)
    smallest_after = np.minimum.accumulate(scaled[::-1])[::-1]
    qvalues = np.empty(count)
    qvalues[order] = np.minimum(smallest_after, 1.0)
    return qvalues


FDR_METHODS = ("bh", "by")
"""The q-values :func:`feature_mi` and :func:`mitool.matrix.mi_matrix` offer (``fdr=``):
Benjamini-Hochberg (the default) and Benjamini-Yekutieli."""


def benjamini_yekutieli(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """The Benjamini-Yekutieli q-values of m p-values, in their order: the Benjamini-Hochberg
    q-values with m replaced by m c(m), c(m) = sum_{i=1}^m 1/i (about ln m + 0.58),

        q_(i) = min_{j >= i} min(1, m c(m) p_(j) / j).

    Rejecting every hypothesis with q <= alpha keeps the expected false discovery rate at most
    alpha m_0 / m (m_0 the true nulls) whatever the dependence between the p-values, provided each
    null p-value is valid, P(p <= t) <= t (Benjamini & Yekutieli 2001, "The control of the false
    discovery rate in multiple testing under dependency", Ann. Stat. 29:1165, Theorem 1.3). The
    price is the factor c(m): 3.6 at m = 20, 5.2 at m = 100, 9.8 at m = 10 000.
    :func:`benjamini_hochberg` needs no factor, and its guarantee needs the p-values of the true
    nulls to be independent of each other and of the others', or positively regression dependent
    on them (PRDS, Benjamini & Yekutieli's Theorem 1.2), which permutation p-values of correlated
    columns are not known to be.

    Examples
    --------
    >>> benjamini_yekutieli([0.01, 0.04, 0.03, 0.5]).round(3).tolist()      # c(4) = 25 / 12
    [0.083, 0.111, 0.111, 1.0]
    """
    values = np.asarray(pvalues, dtype=float)
    harmonic = float(np.sum(1.0 / np.arange(1, len(values) + 1)))
    return np.minimum(benjamini_hochberg(values) * harmonic, 1.0)


_FDR_NAMES = {"bh": "Benjamini-Hochberg", "by": "Benjamini-Yekutieli"}


def fdr_qvalues(pvalues: Sequence[float] | np.ndarray, fdr: str = "bh") -> np.ndarray:
    """The q-values of ``fdr`` ("bh": :func:`benjamini_hochberg`; "by": :func:`benjamini_yekutieli`).

    Examples
    --------
    >>> fdr_qvalues([0.01, 0.02], "by").round(3).tolist()                   # c(2) = 3 / 2
    [0.03, 0.03]
    """
    checks.choice("fdr", fdr, FDR_METHODS)
    return benjamini_yekutieli(pvalues) if fdr == "by" else benjamini_hochberg(pvalues)


# --- tail p-values: a generalized Pareto fit beyond the permutations -------------------------------

TAIL_EXCEEDANCES = 250
"""N_exc to start from: the largest 250 null values (Knijnenburg et al. 2009)."""

TAIL_REACHED = 10
"""The tail p-value replaces the permutation p-value where fewer than this many null values reach
the observed statistic (Knijnenburg et al.'s M < 10); with 10 or more, the permutation p-value's
relative standard error is below a third."""

TAIL_STEP = 10
"""Exceedances dropped at a time when the fit is rejected (Knijnenburg et al.)."""

TAIL_MINIMUM = 100
"""The fewest exceedances a fit may use: with fewer, the shape's standard error (1 + xi) / sqrt(N_exc)
exceeds 0.1, and an extrapolation two decades below the threshold moves by more than a factor of e
for it alone. A null of B values offers at most ceil(B / 4) exceedances (the threshold stays in its
upper quarter), so a tail needs B >= 397."""

TAIL_METHODS = ("permutation", "gpd", "permutation-no-fit")
"""What :func:`tail_pvalue` says it did: the permutation p-value (10 or more null values reach the
observed one); the generalized Pareto tail; the permutation p-value because no fit passed."""

_AD_SHAPES = np.array([-0.5, -0.4, -0.3, -0.2, -0.1, 0.0, 0.1, 0.2, 0.5, 0.9])
_AD_CRITICAL = np.array([1.321, 1.221, 1.140, 1.074, 1.020, 0.974, 0.935, 0.903, 0.830, 0.771])
"""The 5% points of the Anderson-Darling A^2 of a generalized Pareto fit, scale and shape both
estimated by maximum likelihood, against the shape xi (Choulakian & Stephens 2001, Technometrics
43:478, Table 2, whose k is -xi: the points rise as the tail gets lighter). A fit whose A^2 exceeds
its point is rejected at level 0.05. PALM's palm_pareto.m lists the same points against the
opposite sign; a Monte Carlo here (250 exceedances, scipy's fit, 400 draws each) decided: 0.875,
0.941, 0.953, 0.970, 0.993, 1.131 at xi = 0.4, 0.1, 0, -0.1, -0.2, -0.4. Between the shapes
tabulated the point is interpolated; beyond them it is the nearest end's."""


@dataclass(frozen=True)
class TailFit:
    """A generalized Pareto tail fitted to a null distribution (:func:`fit_tail`).

    threshold: t, midway between the N_exc-th and the (N_exc + 1)-th largest null value.
    exceedances: N_exc. permutations: B, the null values. shape, scale: the maximum-likelihood xi
    and sigma of the N_exc excesses over t. anderson_darling, critical: the fit's A^2 and its 5%
    point. tail_shape, tail_scale: the tail extrapolated, (xi, sigma), or (0, the mean excess) where
    xi < 0 (see :func:`tail_pvalue`).
    """

    threshold: float
    exceedances: int
    permutations: int
    shape: float
    scale: float
    anderson_darling: float
    critical: float
    tail_shape: float
    tail_scale: float

    def pvalue(self, observed: float) -> float:
        """(N_exc / B) (1 - F(observed - t)), F the tail's generalized Pareto distribution function,
        never below the smallest positive normal float (never 0)."""
        from scipy.stats import genpareto

        excess = max(float(observed) - self.threshold, 0.0)
        survival = float(genpareto.sf(excess, self.tail_shape, 0.0, self.tail_scale))
        return max(self.exceedances / self.permutations * survival, float(np.finfo(float).tiny))

    def describe(self) -> str:
        """The fit in a clause."""
        shape = (f"shape {self.shape:.3f} < 0 fitted, extrapolated as exponential, scale the mean excess "
                 f"{self.tail_scale:.4g}" if self.tail_shape != self.shape else
                 f"shape {self.shape:.3f}, scale {self.scale:.4g}")  # fmt: skip
        return (f"generalized Pareto tail of the {self.exceedances} largest of {self.permutations} null "
                f"values over {self.threshold:.4g} ({shape}; Anderson-Darling {self.anderson_darling:.3f} "
                f"<= {self.critical:.3f}, its 5% point)")  # fmt: skip


def _reached(observed: float, null: np.ndarray) -> int:
    """#{b : T_b >= T}, null values within 1e-12 (1 + |T|) of T counted as equal."""
    return int(np.count_nonzero(null >= observed - EQUAL_TOLERANCE * (1 + abs(observed))))


def _anderson_darling(probabilities: np.ndarray) -> float:
    """A^2 = -N - (1/N) sum_i (2i - 1) [ln z_(i) + ln(1 - z_(N+1-i))] of the fitted distribution
    function's values z at the N points."""
    z = np.clip(np.sort(probabilities), np.finfo(float).tiny, 1.0 - np.finfo(float).epsneg)
    count = len(z)
    weights = 2.0 * np.arange(1, count + 1) - 1.0
    return float(-count - np.mean(weights * (np.log(z) + np.log1p(-z[::-1]))))


def fit_tail(null: np.ndarray, *, exceedances: int = TAIL_EXCEEDANCES) -> TailFit | None:
    """The generalized Pareto tail of a null distribution as Knijnenburg et al. (2009) choose it, or
    None when no fit passes (see :func:`tail_pvalue`).

    Starting from N_exc = min(``exceedances``, ceil(B / 4)) and dropping :data:`TAIL_STEP` at a
    time down to :data:`TAIL_MINIMUM`: the threshold t midway between the N_exc-th and the
    (N_exc + 1)-th largest value (skipped where they are equal), the maximum-likelihood shape and
    scale of the excesses over t (location fixed at 0), and the first fit whose Anderson-Darling
    statistic is within its 5% point (:data:`_AD_CRITICAL`) is kept.

    Examples
    --------
    >>> null = np.random.default_rng(0).exponential(size=999)
    >>> fitted = fit_tail(null)
    >>> fitted.exceedances, round(fitted.threshold, 2), round(fitted.shape, 2), round(fitted.scale, 2)
    (250, 1.4, 0.03, 0.97)
    """
    import warnings

    from scipy.stats import genpareto

    exceedances = checks.whole_number("exceedances", exceedances, TAIL_MINIMUM)
    values = np.asarray(null, dtype=float).reshape(-1)
    if not np.isfinite(values).all():
        return None
    count = len(values)
    largest = np.sort(values)[::-1]
    for size in range(min(exceedances, math.ceil(count / 4)), TAIL_MINIMUM - 1, -TAIL_STEP):
        if not largest[size - 1] > largest[size]:  # tied at the threshold: no excess may be 0
            continue
        threshold = 0.5 * (largest[size - 1] + largest[size])
        excess = largest[:size] - threshold
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            shape, _, scale = (float(value) for value in genpareto.fit(excess, floc=0.0))
            if not (math.isfinite(shape) and math.isfinite(scale) and scale > 0):
                continue
            statistic = _anderson_darling(genpareto.cdf(excess, shape, 0.0, scale))
        critical = float(np.interp(shape, _AD_SHAPES, _AD_CRITICAL))
        if statistic <= critical:
            tail_shape, tail_scale = (shape, scale) if shape >= 0 else (0.0, float(np.mean(excess)))
            return TailFit(float(threshold), size, count, shape, scale, statistic, critical, tail_shape,
                           tail_scale)  # fmt: skip
    return None


def tail_pvalue(
    observed: float, null: np.ndarray, *, exceedances: int = TAIL_EXCEEDANCES
) -> tuple[float, str]:
    """The p-value of ``observed`` against the null values, with a generalized Pareto tail beyond
    them (Knijnenburg, Wessels, Reinders & Shmulevich 2009, "Fewer permutations, more accurate
    P-values", Bioinformatics 25(12):i161): (p, method), method one of :data:`TAIL_METHODS`.

    With M = #{b : T_b >= T} of the B null values reaching the observed T (within 1e-12, as
    :func:`permutation_pvalue` counts them):

    * M >= 10: the permutation p-value, p = (1 + M) / (1 + B); method "permutation".
    * M < 10: by the theorem of Pickands (1975) and Balkema & de Haan (1974), the excesses of T
      over a high threshold t are nearly generalized Pareto,
      P(T - t > y | T > t) = 1 - F(y) = (1 + xi y / sigma)^(-1/xi) (exp(-y / sigma) for xi = 0), so

          p = P(T >= T_obs) = (N_exc / B) (1 - F(T_obs - t)),

      N_exc the null values above t. The threshold is chosen as Knijnenburg et al. do
      (:func:`fit_tail`): the largest N_exc = ``exceedances`` (250) values first, at most a quarter
      of the null (t midway between the 250th and the 251st), xi and sigma by maximum
      likelihood, the fit tested by Anderson-Darling at level 0.05 with the 5% points of
      Choulakian & Stephens (2001), and 10 exceedances dropped at a time until it
      passes; method "gpd". The p-value is never 0 (at least the smallest positive float).
    * No fit passes (from 250 down to :data:`TAIL_MINIMUM` exceedances, or B < 397, or a null that
      is not finite): no extrapolation; the permutation p-value with its +1, method
      "permutation-no-fit".

    One departure from Knijnenburg et al.: a negative fitted shape (a tail with an end point,
    sigma / |xi| past t) is not extrapolated; the exponential tail (xi = 0) with the mean excess as
    its scale, its maximum-likelihood fit, is used instead. The null of the KSG rank statistic
    (k = 20; n = 300, 40 000 permutations) has shapes that rise towards 0 as the threshold rises
    (-0.13, -0.11, -0.06, -0.02 over its 0.9, 0.975, 0.9875 and 0.994 quantiles), so the negative
    shape fitted over the 0.75 quantile of 999 values (median -0.17) describes the body, not the
    far tail. Measured on 200 nulls of 999 values drawn from those 40 000, the other 39 001 as
    fresh null statistics: with the fitted shape, p <= 1e-3 for 1.3e-3 of them and p <= 1e-4 for
    3.8e-4 (n = 500, 60 000 permutations: 1.7e-3 and 5.5e-4), and half of the fits gave p = 0 to
    some (past their end point); with the exponential tail, 0.9e-4 and 1e-7 (n = 500: 1.5e-4 and
    5e-7): conservative. A tail p-value estimates the exact p-value; it is not valid by
    construction as the permutation p-value is, and its error grows with the extrapolation. From
    999 draws of chi-square (1 to 3 degrees of freedom) or gamma(2), 40 nulls each, the tail
    p-value at an exact 1e-6 was 2 to 5 times too large in the median over the nulls, and single
    nulls ranged from 1/58 to 190 times; at 1e-3 the medians were within a factor of 1.6. From
    9999 draws (the threshold higher, the extrapolation shorter) the medians were within a factor
    of 2.8 at 1e-6 (tests/test_tail_pvalues.py).

    Examples
    --------
    >>> null = np.random.default_rng(0).exponential(size=999)       # P(T >= x) = exp(-x)
    >>> tail_pvalue(2.0, null)                  # 131 null values reach 2: (1 + 131) / 1000
    (0.132, 'permutation')
    >>> p, method = tail_pvalue(9.0, null)      # none reaches 9, where P(T >= 9) = 1.2e-04
    >>> method, f"{p:.1e}"
    ('gpd', '2.0e-04')
    """
    pvalue, method, _ = _tail(observed, null, exceedances)
    return pvalue, method


def _tail(observed: float, null: np.ndarray, exceedances: int) -> tuple[float, str, TailFit | None]:
    """:func:`tail_pvalue`, and the fit where one was made."""
    values = np.asarray(null, dtype=float).reshape(-1)
    reached = _reached(observed, values)
    permutation = (1 + reached) / (1 + len(values))
    if reached >= TAIL_REACHED or not math.isfinite(observed):
        return float(permutation), "permutation", None
    fitted = fit_tail(values, exceedances=exceedances)
    if fitted is None:
        return float(permutation), "permutation-no-fit", None
    return fitted.pvalue(observed), "gpd", fitted


def bonferroni_tails(
    observed: Sequence[float], null_rows: np.ndarray, fits: Sequence[TailFit | None]
) -> tuple[float, bool]:
    """Beyond the permutations of a combined test (fewer than :data:`TAIL_REACHED` null rows as
    extreme as the data in the min-p order): p = min(1, J min_j p_j), p_j statistic j's
    :func:`tail_pvalue` from its fitted tail ``fits[j]`` (its permutation p-value where 10 or more
    of its null values reach it, or where it has no fit). Returns p and whether a tail gave it."""
    each, tailed = [], False
    for column, (value, fitted) in enumerate(zip(observed, fits, strict=True)):
        values = null_rows[:, column]
        if fitted is None or _reached(value, values) >= TAIL_REACHED or not math.isfinite(value):
            each.append(permutation_pvalue(value, values))
        else:
            each.append(fitted.pvalue(value))
            tailed = True
    return min(1.0, len(each) * min(each)), tailed


# --- the statistics, with what the permutations leave fixed computed once --------------------------


@functools.lru_cache(maxsize=16)
def _digamma_table(n: int) -> np.ndarray:
    """psi(m) for m = 0 .. n + 1 (psi(0) unused), so that a count's term is a lookup (made once per
    n, read only)."""
    from scipy.special import digamma

    table = digamma(np.arange(n + 2, dtype=np.float64))
    table.flags.writeable = False
    return table


def _strict_reach(radius: np.ndarray) -> np.ndarray:
    """Strictly within r as within the float below r, as
    :func:`~mitool.estimators.neighbours.counts_within` reads it."""
    return np.maximum(np.nextafter(radius, 0.0), 0.0)


def _sorted_counts(
    ordered: np.ndarray, values: np.ndarray, start: np.ndarray, reach: np.ndarray
) -> np.ndarray:
    """For each value v_i (whose first place in ``ordered``, the sorted values, is start_i): how many
    other values o_j satisfy |o_j - v_i| <= reach_i, by the float tests o_j - v_i > reach_i (past the
    right end) and v_i - o_j <= reach_i (inside the left end), both monotone in j. Each end starts
    at searchsorted's guess and is moved until both tests hold at it (rarely more than one step):
    the same counts as :func:`~mitool.estimators.neighbours.counts_within`, on sorted values kept
    from one call to the next."""
    size, last = len(ordered), len(ordered) - 1
    end = np.clip(np.searchsorted(ordered, values + reach, "right"), start, size)
    while True:  # end: the first j >= start with o_j - v_i > reach_i, or n
        short = (end < size) & ~(ordered[np.minimum(end, last)] - values > reach)
        long = (end > start) & (ordered[np.maximum(end - 1, 0)] - values > reach)
        if not (short.any() or long.any()):
            break
        end = end + short - long
    begin = np.clip(np.searchsorted(ordered, values - reach, "left"), 0, start)
    while True:  # begin: the first j <= start with v_i - o_j <= reach_i
        short = (begin < start) & ~(values - ordered[begin] <= reach)
        long = (begin > 0) & (values - ordered[np.maximum(begin - 1, 0)] <= reach)
        if not (short.any() or long.any()):
            break
        begin = begin + short - long
    return end - begin - 1


def _fixed_points_counter(points: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """For a set of points (n, d) that the permutations do not change: ``count(rows, reach)``, for
    each i the number of other points within max-norm distance reach_i of point rows[i] (<=), where
    ``rows`` holds each point once (a permutation). The structure is built once: for one
    coordinate the sorted values, counted in their order (the searches' keys then come in order,
    twice as fast); for more, up to :data:`DISTANCE_TABLE_MAX` points, each point's distances to
    all the others, sorted (a count is then a binary search: 5-D at n = 400, 0.3 ms where the
    tree's ball queries take 7 ms); beyond, a k-d tree."""
    if points.shape[1] == 1:
        by_value = np.argsort(points[:, 0], kind="stable")
        place = np.empty(len(points), dtype=np.intp)
        place[by_value] = np.arange(len(points))
        ordered = points[by_value, 0]
        start = np.searchsorted(ordered, ordered, "left")

        def count_sorted(rows: np.ndarray, reach: np.ndarray) -> np.ndarray:
            where = place[rows]
            reach_in_order = np.empty(len(points))
            reach_in_order[where] = reach
            return _sorted_counts(ordered, ordered, start, reach_in_order)[where]

        return count_sorted
    if len(points) <= DISTANCE_TABLE_MAX:
        return _distance_table_counter(points)
    from scipy.spatial import cKDTree

    tree = cKDTree(points)

    def count(rows: np.ndarray, reach: np.ndarray) -> np.ndarray:
        found = tree.query_ball_point(
            points[rows], reach, p=np.inf, return_length=True, workers=chosen_threads()
        )
        return np.asarray(found) - 1

    return count


def _distance_table_counter(points: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """:func:`_fixed_points_counter` by a table: row p holds the max-norm distances from point p to
    every point (itself, 0, included), sorted; the count for point p within reach r is the place of
    the first distance above r, less one, found by a binary search in all rows at once."""
    size = len(points)
    table = np.abs(points[:, None, 0] - points[None, :, 0])
    for column in range(1, points.shape[1]):
        np.maximum(table, np.abs(points[:, None, column] - points[None, :, column]), out=table)
    table.sort(axis=1)

    def count(rows: np.ndarray, reach: np.ndarray) -> np.ndarray:
        low, high = np.zeros(len(rows), dtype=np.intp), np.full(len(rows), size, dtype=np.intp)
        while True:
            open_ = low < high
            if not open_.any():
                return low - 1
            middle = (low + high) // 2
            above = table[rows, np.minimum(middle, size - 1)] > reach
            high = np.where(open_ & above, middle, high)
            low = np.where(open_ & ~above, middle + 1, low)

    return count


def _kth_neighbour_distances(points: np.ndarray, ks: Sequence[int]) -> np.ndarray:
    """(n, len(ks)): the max-norm distance from each point to its k-th nearest other point. The
    tree is built by sliding midpoints, without shrinking the nodes: half the building time of the
    default, and the same distances (they do not depend on the tree's shape). In the plane, with
    numba installed, :func:`mitool.estimators.grid.kth_distances_plane`: the same distances for
    2.5 times less CPU at n = 10 000."""
    from mitool.estimators import grid

    if points.shape[1] == 2 and grid.AVAILABLE:
        return grid.kth_distances_plane(points, ks)
    from scipy.spatial import cKDTree

    tree = cKDTree(points, balanced_tree=False, compact_nodes=False)
    return tree.query(points, k=[k + 1 for k in ks], p=np.inf, workers=chosen_threads())[0]


@dataclass(frozen=True)
class ScoredSide:
    """One side of the KSG statistic, made once: its scores (``normalise``: the normal scores of the
    ranks, or standardised values), the order of its first coordinate (stable), its
    :func:`_fixed_points_counter` and the basis of the linear statistic. A side serves as X or as
    Y of any pairing (:func:`ksg_statistic` of two sides), so a matrix of MI makes one per column
    (:mod:`mitool.matrix`)."""

    scores: np.ndarray
    order: np.ndarray
    count: Callable[[np.ndarray, np.ndarray], np.ndarray]
    basis: np.ndarray
    """An orthonormal basis of the centred scores: the side of :func:`linear_statistic`."""

    @classmethod
    def of(cls, values: np.ndarray, normalise: str = "rank") -> ScoredSide:
        from mitool.estimators.preparation import PREPARATIONS

        scores = np.ascontiguousarray(
            PREPARATIONS[checks.choice("normalise", normalise, PREPARATIONS)](values)[0]
        )
        basis = _linear_basis_of_centred(scores - scores.mean(axis=0))
        return cls(scores, np.argsort(scores[:, 0], kind="stable"), _fixed_points_counter(scores), basis)


def ksg_statistic(
    x: np.ndarray | ScoredSide,
    y: np.ndarray | ScoredSide,
    k: int = 5,
    k_max: int = 0,
    normalise: str = "rank",
) -> Statistic:
    """KSG's estimate (:func:`mitool.estimators.ksg.ksg`, the same value) as a function of the
    pairing ``order``, y's row order[i] with x's row i:

        I = psi(k) + psi(n) - mean_i [psi(n_x(i) + 1) + psi(n_y(i) + 1)],

    eps_i the max-norm distance to the k-th neighbour of (x_i, y_order[i]), n_x(i), n_y(i) the other
    points strictly within eps_i in X and in Y. The scores of X and Y (``normalise``), their sorted
    values or k-d trees and the digamma table are made once (or given, as :class:`ScoredSide`); a call
    makes the joint search and the counts (the rows are kept in X's order, which keeps the search's
    neighbours near in memory).

    Examples
    --------
    >>> from mitool.estimators.ksg import ksg
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(500, 1)); y = x + rng.normal(size=(500, 1))
    >>> statistic = ksg_statistic(x, y)
    >>> bool(abs(statistic(np.arange(500)) - ksg(x, y, normalise="rank")) < 1e-12)
    True
    """
    from mitool.estimators.ksg import ksg
    from mitool.estimators.neighbours import TREE_MAX_DIM

    n = len(x.scores) if isinstance(x, ScoredSide) else len(x)
    checks.whole_number("k", k, 1, n - 1)
    dims = sum(side.scores.shape[1] if isinstance(side, ScoredSide) else side.shape[1] for side in (x, y))
    if dims > TREE_MAX_DIM:  # all pairs: the estimator's own computation
        if isinstance(x, ScoredSide) or isinstance(y, ScoredSide):
            raise checks.ParameterError(
                "x", f"as scored sides must have at most {TREE_MAX_DIM} dimensions in all"
            )
        return lambda order: ksg(x, y[order], k=k, k_max=k_max, normalise=normalise)
    side_x = x if isinstance(x, ScoredSide) else ScoredSide.of(x, normalise)
    side_y = y if isinstance(y, ScoredSide) else ScoredSide.of(y, normalise)
    ks = list(range(k, max(k, k_max) + 1))
    psi = _digamma_table(n)
    constants = [psi[neighbours] + psi[n] for neighbours in ks]
    by_x = side_x.order
    x_sorted = np.ascontiguousarray(side_x.scores[by_x])
    count_x, count_y, y_scores = side_x.count, side_y.count, side_y.scores
    from mitool.estimators import grid

    if dims == 2 and grid.AVAILABLE:  # the search and the counts compiled: the same numbers
        plane = grid.PlaneKSG(x_sorted[:, 0], y_scores[:, 0], ks, psi)

        def compiled(order: np.ndarray) -> float:
            terms = plane.terms(np.asarray(order)[by_x])
            return float(
                np.mean([constant - np.mean(terms[:, column]) for column, constant in enumerate(constants)])
            )

        return compiled

    def statistic(order: np.ndarray) -> float:
        y_rows = np.asarray(order)[by_x]
        distances = _kth_neighbour_distances(np.hstack([x_sorted, y_scores[y_rows]]), ks)
        values = []
        for column, constant in enumerate(constants):
            reach = _strict_reach(distances[:, column])
            values.append(constant - np.mean(psi[count_x(by_x, reach) + 1] + psi[count_y(y_rows, reach) + 1]))
        return float(np.mean(values))

    return statistic


def frenzel_pompe_statistic(x: np.ndarray, y: np.ndarray, z: np.ndarray, k: int = 5) -> Statistic:
    """Frenzel & Pompe's estimate of I(X; Y | Z) on rank scores as a function of ``order``, x's
    row order[i] with the y and z of row i (order may repeat rows, as a local permutation does):

        I = psi(k) - mean_i [psi(n_xz(i) + 1) + psi(n_yz(i) + 1) - psi(n_z(i) + 1)],

    the value of :func:`mitool.estimators.frenzel_pompe.frenzel_pompe` on the normal scores of the
    ranks. The (y, z) and z structures are built once; a call makes the joint search and the (x, z)
    counts.

    Examples
    --------
    >>> from mitool.estimators.frenzel_pompe import frenzel_pompe
    >>> from mitool.estimators.preparation import normal_scores
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(400, 1)); x, y = z + rng.normal(size=(2, 400, 1))
    >>> value = frenzel_pompe_statistic(x, y, z)(np.arange(400))
    >>> bool(abs(value - frenzel_pompe(*(normal_scores(v)[0] for v in (x, y, z)))) < 1e-12)
    True
    """
    from scipy.spatial import cKDTree

    from mitool.estimators.preparation import normal_scores, standardise

    n = len(x)
    checks.whole_number("k", k, 1, n - 1)
    x_scores, y_scores, z_scores = (standardise(normal_scores(part)[0])[0] for part in (x, y, z))
    count_yz, count_z = (
        _fixed_points_counter(np.hstack([y_scores, z_scores])),
        _fixed_points_counter(z_scores),
    )
    psi = _digamma_table(n)
    every = np.arange(n)

    def statistic(order: np.ndarray) -> float:
        x_now = x_scores[order]
        reach = _strict_reach(_kth_neighbour_distances(np.hstack([x_now, y_scores, z_scores]), [k])[:, 0])
        xz = np.hstack([x_now, z_scores])
        count_xz = np.asarray(
            cKDTree(xz).query_ball_point(xz, reach, p=np.inf, return_length=True, workers=chosen_threads())
        ) - 1  # fmt: skip
        terms = psi[count_xz + 1] + psi[count_yz(every, reach) + 1] - psi[count_z(every, reach) + 1]
        return float(psi[k] - np.mean(terms))

    return statistic


def plugin_statistic(x: np.ndarray, y: np.ndarray, correction: bool = True) -> Statistic:
    """The Miller-Madow plug-in MI of discrete x and y (:func:`mitool.estimators.discrete.plugin_mi`,
    the same value) as a function of ``order``: H(X) + H(Y) - H(X, Y), of which only the joint
    entropy changes under a permutation; the categories' codes and the marginal entropies are made
    once."""
    from mitool.estimators.rows import category_codes

    codes_x, codes_y = category_codes(x), category_codes(y)
    classes_y = int(codes_y.max()) + 1

    def entropy(codes: np.ndarray) -> float:
        counts = np.bincount(codes)
        counts = counts[counts > 0]
        total = counts.sum()
        value = float(-(counts / total * np.log(counts / total)).sum())
        return value + ((len(counts) - 1) / (2 * total) if correction else 0.0)

    marginals = entropy(codes_x) + entropy(codes_y)
    return lambda order: float(marginals - entropy(codes_x * classes_y + codes_y[order]))


def _linear_basis(values: np.ndarray, discrete: bool) -> np.ndarray:
    """An orthonormal basis (n, r) of one side's centred columns for :func:`linear_statistic`: the
    normal scores of the ranks of a continuous side, the indicators of all its categories but one
    for a discrete side; directions with no variance dropped."""
    from mitool.estimators.preparation import normal_scores
    from mitool.estimators.rows import category_codes

    if discrete:
        codes = category_codes(values)
        columns = np.eye(int(codes.max()) + 1)[codes][:, :-1]
    else:
        columns = normal_scores(values)[0]
    return _linear_basis_of_centred(columns - columns.mean(axis=0))


def _canonical_mi(basis_x: np.ndarray, basis_y: np.ndarray) -> float:
    """-1/2 sum_i log(1 - rho_i^2), rho_i the canonical correlations: the singular values of
    basis_x' basis_y for orthonormal bases of the centred columns."""
    if not basis_x.shape[1] or not basis_y.shape[1]:
        return 0.0
    rho = np.linalg.svd(basis_x.T @ basis_y, compute_uv=False)
    return float(-0.5 * np.sum(np.log1p(-(np.minimum(rho, 1 - 1e-15) ** 2))))


def linear_statistic(
    x: np.ndarray, y: np.ndarray, z: np.ndarray | None = None, *, x_discrete: bool = False,
    y_discrete: bool = False,
) -> Statistic:  # fmt: skip
    """The linear part of the dependence, as a statistic of the pairing ``order`` (y's row order[i]
    with x's row i; given ``z``, x's row order[i] with the y and z of row i):

        I_lin = -1/2 sum_i log(1 - rho_i^2),

    rho_i the canonical correlations between X's and Y's columns: the normal scores of the ranks of
    a continuous side (a Gaussian copula's MI, Ince et al. 2017), the indicators of a discrete
    side's categories (then I_lin = -1/2 log of Wilks' lambda, one-way MANOVA's statistic). Given
    Z (its normal scores), X's and Y's columns less their least-squares fit on Z: the Gaussian
    conditional MI, a partial correlation. It is the MI of the Gaussian with those columns'
    covariance, without a bias correction (a constant under the permutations). Cheap (a few
    products of n x d matrices per permutation) and, against weak linear or location dependence,
    the most powerful statistic (for Gaussians it is the likelihood-ratio test); blind to
    dependence without a linear part (y = x^2, y = x noise), which the k-NN statistic sees: the
    default test combines the two (:func:`min_p_combination`).

    Examples
    --------
    >>> from mitool.estimators.gaussian import gaussian_mi
    >>> from mitool.estimators.preparation import normal_scores
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(300, 2)); y = x[:, :1] + rng.normal(size=(300, 1))
    >>> value = linear_statistic(x, y)(np.arange(300))
    >>> same = gaussian_mi(*normal_scores(x), *normal_scores(y), bias_correction=False)
    >>> bool(abs(value - same) < 1e-9)
    True
    """
    basis_x, basis_y = _linear_basis(x, x_discrete), _linear_basis(y, y_discrete)
    if z is None:
        return lambda order: _canonical_mi(basis_x, basis_y[order])
    basis_z = _linear_basis(z, False)

    def residual(basis: np.ndarray) -> np.ndarray:
        left = basis - basis_z @ (basis_z.T @ basis)
        return _linear_basis_of_centred(left)

    residual_y = residual(basis_y)
    return lambda order: _canonical_mi(residual(basis_x[order]), residual_y)


def _linear_basis_of_centred(columns: np.ndarray) -> np.ndarray:
    """An orthonormal basis of centred columns: their directions with variance (singular values
    above 1e-10 of the largest; none for a constant side)."""
    basis, scales, _ = np.linalg.svd(columns, full_matrices=False)
    if not scales.size or scales[0] <= 1e-12:
        return basis[:, :0]
    return np.ascontiguousarray(basis[:, scales > scales[0] * 1e-10])


def min_p_combination(observed: np.ndarray, null: np.ndarray) -> tuple[Any, np.ndarray]:
    """One permutation p-value from J statistics computed on the same permutations (the min-p
    combination, Westfall & Young 1993; Pesarin 2001):

        p_j(v) = #{b in 0..B : T_j,b >= v} / (B + 1)         (b = 0 the data, T_j,0 = observed_j)
        m_b    = min_j p_j(T_j,b)
        p      = #{b in 0..B : m_b < m_0, or m_b = m_0 and t_b <= t_0} / (B + 1)

    with t_b = min_j S_j,b(T_j,b) breaking the ties of m: S_j,b the upper tail of a Pearson type
    III law (a gamma of any sign of skew, the normal at none) with the mean, standard deviation and
    skewness of column j over the B rows other than b (leaving b out keeps a far statistic from
    inflating the moments it is judged by). Without it, a statistic at the top of its null and the
    other statistic's top on some permutation give p = 2 / (B + 1) (a noisy circle: KSG 20 standard
    deviations above its null, the linear statistic's largest permutation 3); with plain standard
    deviations instead of the tail, the skewed null of the linear statistic (about chi-square with
    dx dy degrees of freedom, over 2n) would win such ties. Under H0 the B + 1 rows (T_1,b ..
    T_J,b) are exchangeable and (m_b, t_b) is the same function of row b and the others for every
    b, so the data's row is as likely to hold any rank and p is a valid p-value, as the single
    statistic's (1 + #{T_b >= T}) / (B + 1), to which it reduces for J = 1; never 0, at least
    1 / (B + 1). Looking at J statistics is paid for through the permutation distribution of the
    smallest p, not a Bonferroni factor: about the power of the better statistic on each
    alternative.

    ``observed`` (J,), ``null`` (B, J); returns p and each statistic's own p-value (J,). With
    ``observed`` (m, J), m sets of statistics against the same null rows (a matrix's pairs on its
    shared null): p (m,) and the own p-values (m, J), each row what it would get alone.

    Examples
    --------
    >>> null = np.array([[0.1, 0.0], [0.2, 0.3], [0.3, 0.1]])
    >>> p, own = min_p_combination(np.array([0.25, 0.05]), null)
    >>> own.tolist(), p                      # p_1 = 2/4, p_2 = 3/4; the smallest, 2/4, reached by 3 rows
    ([0.5, 0.75], 0.75)
    """
    rows = np.atleast_2d(np.asarray(observed, dtype=float))
    null = np.asarray(null, dtype=float).reshape(-1, rows.shape[1])
    count, width = null.shape
    total = count + 1

    def lowest(values: np.ndarray) -> np.ndarray:  # values within the tolerance count as reached
        return values - EQUAL_TOLERANCE * (1 + np.abs(values))

    ordered = np.sort(null, axis=0)
    own, reaching = np.empty_like(rows), np.empty_like(null)
    for column in range(width):
        own[:, column] = (
            total - np.searchsorted(ordered[:, column], lowest(rows[:, column]), "left")
        ) / total
        reaching[:, column] = count - np.searchsorted(ordered[:, column], lowest(null[:, column]), "left")
    sums = [np.sum(null**power, axis=0) for power in (1, 2, 3)]
    pvalues = np.empty(len(rows))
    chunk = max(1, 4_000_000 // max(count * width, 1))
    for begin in range(0, len(rows), chunk):
        block = rows[begin : begin + chunk]
        reached = block[:, None, :] >= lowest(null)[None]  # the row's observed value reaches null value b
        smallest_null = ((reaching[None] + reached) / total).min(axis=2)
        smallest = own[begin : begin + chunk].min(axis=1)
        margin = 1e-12 * smallest[:, None]
        below = np.count_nonzero(smallest_null < smallest[:, None] - margin, axis=1)
        tied_rows, tied_nulls = np.nonzero(np.abs(smallest_null - smallest[:, None]) <= margin)
        at_data = _pearson_tail(block, *sums, count)  # each row against the null alone
        tied, swapped = null[tied_nulls], block[tied_rows]  # a null row against the others and the data
        others = [sums[power - 1] - tied**power + swapped**power for power in (1, 2, 3)]
        at_tie = _pearson_tail(tied, *others, count)
        as_extreme = at_tie <= at_data[tied_rows] * (1 + 1e-9) + 1e-300
        pvalues[begin : begin + chunk] = (
            1 + below + np.bincount(tied_rows[as_extreme], minlength=len(block))
        ) / total
    if np.ndim(observed) == 1:
        return float(pvalues[0]), own[0]
    return pvalues, own


def _pearson_tail(values: np.ndarray, first: np.ndarray, second: np.ndarray, third: np.ndarray,
                  count: int) -> np.ndarray:  # fmt: skip
    """For :func:`min_p_combination`'s ties: min_j of the upper tail at values[:, j] of the Pearson
    type III law with the mean, standard deviation and skewness of the ``count`` values whose sums
    of powers 1, 2, 3 are ``first``, ``second``, ``third`` (per value, per column)."""
    mean, raw_second = first / count, second / count
    variance = np.maximum(raw_second - mean**2, 0.0)
    central_third = third / count - 3 * mean * raw_second + 2 * mean**3
    spread = np.sqrt(variance)
    positive = spread > 1e-300
    skew = np.where(positive, central_third / np.where(positive, variance, 1.0) ** 1.5, 0.0)
    upper = pearson3_sf((values - mean) / np.where(positive, spread, 1.0), skew)
    return np.where(positive, upper, 1.0).min(axis=1, initial=1.0)


NORMAL_SKEW = 1.6e-5
"""Below this skewness the Pearson type III law is taken as the normal (as scipy.stats does)."""


def pearson3_sf(standard: np.ndarray, skew: np.ndarray) -> np.ndarray:
    """The upper tail P(Y > y) of the standardised Pearson type III law with skewness g at
    y = ``standard``: with a = 4 / g^2, b = 2 / g and t = b (y + 2 / g) = a + b y (a gamma variable
    of shape a, shifted and scaled to mean 0 and variance 1), Q(a, t) for g > 0 and P(a, t) for
    g < 0 (the regularised incomplete gamma functions; 1 and 0 beyond the law's end), and the
    normal's tail where |g| < :data:`NORMAL_SKEW`. scipy.stats.pearson3.sf computes the same; this
    spares its import (a third of a second) on every test."""
    from scipy import special

    standard, skew = np.broadcast_arrays(np.asarray(standard, float), np.asarray(skew, float))
    normal = np.abs(skew) < NORMAL_SKEW
    safe = np.where(normal, 1.0, skew)
    shape = 4.0 / safe**2
    t = np.clip(shape + 2.0 / safe * standard, 0.0, None)
    gamma_tail = np.where(safe > 0, special.gammaincc(shape, t), special.gammainc(shape, t))
    return np.where(normal, special.ndtr(-standard), gamma_tail)


def _atoms_statistic(x: np.ndarray, y: np.ndarray, k: int) -> tuple[Statistic, str]:
    """The statistic of the estimator for atoms, as it decides (:class:`mitool.estimators.atoms.Atoms`):
    the side with the atoms is Y of the chain rule, or both sides have ties and the mixture
    estimator answers."""
    from mitool.estimators.atoms import atoms_mi
    from mitool.estimators.mixed_ksg import mixed_ksg
    from mitool.estimators.rows import tied_rows

    if tied_rows(x) and tied_rows(y):
        return (
            lambda order: mixed_ksg(x, y[order], k=k)
        ), f"Gao et al.'s mixed KSG (k = {k}; both sides have ties)"
    if tied_rows(x):  # the atoms are x's: it is the chain rule's Y
        return (
            lambda order: atoms_mi(y[order], x, k=k)
        ), f"the chain rule over X's atoms (Ross's I(Y; A) plus KSG off them, k = {k})"
    return (
        lambda order: atoms_mi(x, y[order], k=k)
    ), f"the chain rule over Y's atoms (Ross's I(X; A) plus KSG off them, k = {k})"


def _trained_statistic(estimator: estimators.Estimator, x, y, z, seed: int, permuted: str) -> Statistic:
    """A trained estimator's value on the permuted rows: one training per call."""

    def statistic(order: np.ndarray) -> float:
        if permuted == "y":
            return float(estimator.estimate(x, y[order], z, seed=seed).value)
        return float(estimator.estimate(x[order], y, z, seed=seed).value)

    return statistic


def _unconditional_statistic(estimator: estimators.Estimator, x: np.ndarray, y: np.ndarray,
                             seed: int) -> tuple[Statistic, str]:  # fmt: skip
    """The statistic of ``estimator`` on (x, y) as a function of the permutation of y's rows, and
    its description."""
    name, settings = estimator.name, estimator.settings
    if name == "ksg":
        scores = {"rank": "the normal scores of the ranks", "standard": "standardised data"}[
            settings.normalise
        ]
        ks = f"k = {settings.k}" + (f"..{settings.k_max}" if settings.k_max > settings.k else "")
        statistic = ksg_statistic(x, y, settings.k, settings.k_max, settings.normalise)
        return statistic, f"KSG ({ks}, max-norm) on {scores}"
    if name == "plugin":
        correction = "Miller-Madow corrected" if settings.correction else "uncorrected"
        return plugin_statistic(
            x, y, settings.correction
        ), f"the plug-in MI of the joint table ({correction})"
    if name == "ross":
        from mitool.estimators.ross import ross_mi

        return (lambda order: ross_mi(x, y[order], k=settings.k)), f"Ross's k-NN estimate (k = {settings.k})"
    if name == "mixed-ksg":
        from mitool.estimators.mixed_ksg import mixed_ksg

        return (
            lambda order: mixed_ksg(x, y[order], k=settings.k)
        ), f"Gao et al.'s mixed KSG (k = {settings.k})"
    if name == "gaussian":
        from mitool.estimators.gaussian import gaussian_mi

        correct = settings.bias_correction
        return (lambda order: gaussian_mi(x, y[order], bias_correction=correct)), "the Gaussian MI (CCA)"
    if name == "atoms":
        return _atoms_statistic(x, y, settings.k)
    return _trained_statistic(estimator, x, y, None, seed, "y"), f"{name} (trained for each permutation)"


def _conditional_statistic(estimator: estimators.Estimator, x: np.ndarray, y: np.ndarray, z: np.ndarray,
                           seed: int) -> tuple[Statistic, str]:  # fmt: skip
    """The statistic of ``estimator`` on (x, y, z) as a function of the draw of x's rows."""
    name, settings = estimator.name, estimator.settings
    if name == "frenzel-pompe":
        scores = "the normal scores of the ranks"
        return frenzel_pompe_statistic(x, y, z, settings.k), (
            f"Frenzel & Pompe's conditional KSG (k = {settings.k}, max-norm) on {scores}"
        )
    if name == "gaussian":
        from mitool.estimators.gaussian import gaussian_conditional_mi

        correct = settings.bias_correction
        return (lambda order: gaussian_conditional_mi(x[order], y, z, bias_correction=correct)), (
            "the Gaussian conditional MI"
        )
    return _trained_statistic(estimator, x, y, z, seed, "x"), f"{name} (trained for each permutation)"


# --- the permutation schemes -----------------------------------------------------------------------


def local_permutation(neighbours: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw of Runge's local permutation (2018, Algorithm 1): ``neighbours`` (n, k_perm) holds
    each row's candidates (its nearest rows in Z, itself included). Each row's candidates are
    shuffled; the rows are visited in a random order, and each takes the first of its candidates
    that no earlier row took, or, when all are taken, its last one (a repeat). Returns ``drawn``:
    row i gets the X of row drawn[i].

    Examples
    --------
    >>> candidates = np.array([[0, 1], [1, 0], [2, 3], [3, 2]])   # two pairs of near rows
    >>> drawn = local_permutation(candidates, np.random.default_rng(0))
    >>> sorted(drawn.tolist()), bool(set(drawn[:2]) == {0, 1})
    ([0, 1, 2, 3], True)
    """
    shuffled = np.take_along_axis(neighbours, rng.random(neighbours.shape).argsort(axis=1), axis=1).tolist()
    taken = bytearray(len(neighbours))
    drawn = [0] * len(neighbours)
    for row in rng.permutation(len(neighbours)).tolist():
        for candidate in shuffled[row]:
            if not taken[candidate]:
                break
        drawn[row] = candidate  # the first not taken, or the last when all were
        taken[candidate] = 1
    return np.asarray(drawn)


def _z_neighbours(z: np.ndarray, count: int) -> np.ndarray:
    """(n, count): each row's ``count`` nearest rows in Z (itself first), max-norm on Z's rank scores."""
    from scipy.spatial import cKDTree

    from mitool.estimators.preparation import normal_scores

    scores = normal_scores(z)[0]
    return (
        cKDTree(scores).query(scores, k=count, p=np.inf, workers=chosen_threads())[1].reshape(len(z), count)
    )


def completed_permutation(drawn: np.ndarray, scores: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A draw of :func:`local_permutation` made a permutation: of the rows that took the same X,
    one (at random) keeps it, and the others, in a random order, each take the nearest X in Z
    (max-norm on ``scores``) that no row took. The repeats of a local permutation (5.9%, 9.8% and
    12.7% of the rows with a 1-, 3- and 5-D Z at n = 400, five candidates) would otherwise put ties
    in X that the data do not have.

    Examples
    --------
    >>> scores = np.arange(4.0)[:, None]
    >>> completed_permutation(np.array([1, 1, 2, 3]), scores, np.random.default_rng(0)).tolist() in (
    ...     [0, 1, 2, 3], [1, 0, 2, 3])
    True
    """
    size = len(drawn)
    free = np.flatnonzero(np.bincount(drawn, minlength=size) == 0)
    if not len(free):
        return drawn
    kept, extra = np.zeros(size, dtype=bool), []
    for row in rng.permutation(size).tolist():
        if kept[drawn[row]]:
            extra.append(row)
        kept[drawn[row]] = True
    distance = np.max(np.abs(scores[extra][:, None, :] - scores[free][None, :, :]), axis=2)
    completed = drawn.copy()
    for place, row in enumerate(extra):
        chosen = int(np.argmin(distance[place]))
        completed[row] = free[chosen]
        distance[:, chosen] = np.inf
    return completed


# --- regressions on Z: the residual scheme, the generalised covariance measure, the diagnostic -------

Z_METHODS = ("auto", "residual", "local", "gcm")
"""How a test given a continuous Z is made (``z_method``): "residual" (the default, "auto", where no
estimator is named), Runge's "local" permutation of X itself (the default with a named estimator),
or Shah & Peters' generalised covariance measure "gcm" (see :func:`independence_test`)."""

REGRESSION_MODELS = ("linear", "quadratic", "cubic", "spline", "knn")
"""The regressions of X (and of Y) on Z's rank scores that :func:`regress_on_z` chooses from by
leave-one-out error: ridge regressions on the monomials of degree 1, up to 2 and up to 3 (the
third only while its columns are at most n / 4), on additive cubic B-splines (6 interior knots at
each coordinate's quantiles), and the k-nearest-neighbour mean (k up to min(50, n / 4))."""

RIDGE_PENALTIES = np.logspace(-4, 3, 15)
"""The ridge penalties tried, times n / 100, on standardised features (the intercept is not
penalised)."""

CO_SPREAD_WARNING = {"local": 0.1, "residual": 16.0, "gcm": 0.25}
"""The diagnostic's thresholds on the co-spread C (:func:`neighbourhood_spread`), per scheme: a test
given a continuous Z warns where C exceeds its scheme's. "local": Runge's permutation of X rejected
true nulls too often from C of about 0.1 up (10% at C = 0.1 in issue 52's measurement, 30% at a
median C of 0.65, 97% at 6, n = 400); it held its level on nulls of median C up to 0.023
(bench/independence.py's common cause and 3-D Z, of which the threshold warns 1% and 0%).
"residual": about the largest C of the 1700 null data sets at n = 400 the residual scheme was
calibrated on (16.4): beyond, nothing was measured. "gcm": the three nulls of which the GCM
rejected 9 to 12% had a median C of 0.3 or more (it held its level on three others of such C), and
it held its level on every null of median C below 0.25 (docs/independence.md)."""


@dataclass(frozen=True)
class ZRegression:
    """One side's regression on Z (:func:`regress_on_z`): ``target`` the side on the scale chosen
    (standardised values, or the standardised normal scores of the ranks), ``fitted`` its
    leave-one-out prediction from Z, ``residual`` = target - fitted (n, d); ``models``, ``scales``
    and ``z_scales`` (Z's values or rank scores) each column's choice, ``unexplained`` each
    column's leave-one-out mean squared error over its variance (1 - the cross-validated R^2)."""

    target: np.ndarray
    fitted: np.ndarray
    models: tuple[str, ...]
    scales: tuple[str, ...]
    unexplained: np.ndarray
    z_scales: tuple[str, ...] = ()

    @property
    def residual(self) -> np.ndarray:
        return self.target - self.fitted


def _ridge_loo(features: np.ndarray, target: np.ndarray) -> tuple[float, np.ndarray]:
    """The leave-one-out predictions of ridge regression (intercept unpenalised, standardised
    features) at the penalty of :data:`RIDGE_PENALTIES` with the smallest leave-one-out error:
    prediction_i = y_i - e_i / (1 - h_ii), e the residual of the full fit and h the hat matrix's
    diagonal, from one singular value decomposition."""
    n = len(target)
    scale = features.std(axis=0)
    standard = (features - features.mean(axis=0)) / np.where(scale > 0, scale, 1.0)
    left, values, _ = np.linalg.svd(standard, full_matrices=False)
    if values.size:
        keep = values > values[0] * 1e-10
        left, values = left[:, keep], values[keep]
    mean = target.mean(axis=0)
    projected = left.T @ (target - mean)
    best: tuple[float, np.ndarray] = (math.inf, np.broadcast_to(mean, target.shape).copy())
    for penalty in RIDGE_PENALTIES * n / 100:
        shrink = values**2 / (values**2 + penalty)
        fitted = mean + left @ (shrink[:, None] * projected)
        leverage = np.minimum((left**2) @ shrink + 1.0 / n, 1 - 1e-9)
        predicted = target - (target - fitted) / (1 - leverage)[:, None]
        error = float(np.mean((target - predicted) ** 2))
        if error < best[0]:
            best = (error, predicted)
    return best


def _monomials(z: np.ndarray, degree: int) -> np.ndarray:
    from itertools import combinations_with_replacement

    columns = [
        np.prod(z[:, list(chosen)], axis=1)
        for power in range(1, degree + 1)
        for chosen in combinations_with_replacement(range(z.shape[1]), power)
    ]
    return np.column_stack(columns)


def _additive_splines(z: np.ndarray, knots: int = 6) -> np.ndarray:
    """Cubic B-splines of each coordinate, interior knots at its quantiles (the first basis
    function of each dropped: the intercept is the ridge's)."""
    from scipy.interpolate import BSpline

    columns = []
    for values in z.T:
        inner = np.unique(np.quantile(values, np.linspace(0, 1, knots + 2)))
        if len(inner) < 2:
            continue
        edges = np.r_[[inner[0]] * 3, inner, [inner[-1]] * 3]
        basis = BSpline.design_matrix(np.clip(values, inner[0], inner[-1]), edges, 3).toarray()
        columns.append(basis[:, 1:])
    return np.hstack(columns) if columns else z


def _knn_loo(z: np.ndarray, target: np.ndarray) -> tuple[float, np.ndarray]:
    """The leave-one-out k-nearest-neighbour mean (Euclidean on Z's scores) at the k of smallest
    leave-one-out error, k = 1 .. min(50, n / 4), all from one query."""
    from scipy.spatial import cKDTree

    n = len(z)
    most = max(1, min(50, n // 4))
    found = cKDTree(z).query(z, k=most + 1, workers=chosen_threads())[1]
    itself = found[:, :1] == np.arange(n)[:, None]
    others = np.where(itself, found[:, 1:], found[:, :-1])  # each row's nearest rows but itself
    means = np.cumsum(target[others], axis=1) / np.arange(1, most + 1)[None, :, None]
    errors = np.mean((means - target[:, None, :]) ** 2, axis=(0, 2))
    best = int(np.argmin(errors))
    return float(errors[best]), means[:, best, :]


def _best_regression(z: np.ndarray, target: np.ndarray) -> tuple[float, np.ndarray, str]:
    """The model of :data:`REGRESSION_MODELS` with the smallest leave-one-out error on one column."""
    n = len(z)
    found = {"knn": _knn_loo(z, target)}
    candidates = {"linear": lambda: z, "quadratic": lambda: _monomials(z, 2),
                  "spline": lambda: _additive_splines(z)}  # fmt: skip
    if math.comb(z.shape[1] + 3, 3) - 1 <= n / 4:
        candidates["cubic"] = lambda: _monomials(z, 3)
    for name, features in candidates.items():
        found[name] = _ridge_loo(features(), target)
    name = min(found, key=lambda key: found[key][0])
    return found[name][0], found[name][1], name


def regress_on_z(values: np.ndarray, z: np.ndarray) -> ZRegression:
    """Each column of ``values`` regressed on Z: on the scale (the standardised values, or the
    standardised normal scores of their ranks) and with the model (:data:`REGRESSION_MODELS`) of
    smallest leave-one-out mean squared error relative to the column's variance, and the
    leave-one-out predictions (so that a residual is not fitted to itself).

    Z enters standardised, as its values or as the normal scores of its ranks, whichever fits
    better (``z_scales``), as does the column. The choice among a few models by cross-validation is
    a small "super learner" (van der Laan, Polley & Hubbard 2007, Stat. Appl. Genet. Mol. Biol.
    6:25): its error is close to the best of the candidates'. The values' own scale fits a smooth
    dependence best (a rank transform bends tanh's flat ends into steep ones, and moves Z's values
    by more than a small noise: X = z + 0.1 e is linear in Z's values, not in its rank scores); the
    rank scale keeps an outlier from deciding the fit.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(400, 2)); x = np.sin(2 * z[:, :1]) + 0.3 * rng.normal(size=(400, 1))
    >>> fit = regress_on_z(x, z)
    >>> fit.scales, bool(fit.unexplained[0] < 0.25)
    (('values',), True)
    """
    from mitool.estimators.preparation import normal_scores, standardise

    inputs = {
        "values": standardise(np.asarray(z, dtype=float))[0],
        "ranks": standardise(normal_scores(z)[0])[0],
    }
    rows = np.asarray(values, dtype=float).reshape(len(z), -1)
    targets, fits, models, scales, z_scales, unexplained = [], [], [], [], [], []
    for column in rows.T:
        scaled = {
            "values": standardise(column[:, None])[0],
            "ranks": standardise(normal_scores(column[:, None])[0])[0],
        }
        tried = {(scale, given): _best_regression(inputs[given], target)
                 for scale, target in scaled.items() for given in inputs}  # fmt: skip
        chosen = min(tried, key=lambda key: tried[key][0] / max(float(np.var(scaled[key[0]])), 1e-300))
        error, fitted, model = tried[chosen]
        targets.append(scaled[chosen[0]][:, 0])
        fits.append(fitted[:, 0])
        models.append(model)
        scales.append(chosen[0])
        z_scales.append(chosen[1])
        unexplained.append(error / max(float(np.var(scaled[chosen[0]])), 1e-300))
    return ZRegression(np.column_stack(targets), np.column_stack(fits), tuple(models), tuple(scales),
                       np.array(unexplained), tuple(z_scales))  # fmt: skip


def neighbourhood_spread(fit_x: ZRegression, fit_y: ZRegression, candidates: np.ndarray) -> dict[str, float]:
    """How wide the local permutation's neighbourhoods are for X's and Y's dependence on Z, from
    their regressions f and g on Z (:func:`regress_on_z`) and each row's neighbourhood N(i) (its
    k_perm nearest rows in Z):

        S_X = mean_i var_{j in N(i)} f(z_j) / var(x - f(z))                  (and S_Y with g)
        C   = |mean_i cov_{j in N(i)} (f(z_j), g(z_j))| / sqrt(var(x - f(z)) var(y - g(z)))

    (for several columns, the largest over columns and pairs of columns). S_X is the part of X's
    dependence on Z that a draw within a neighbourhood does not keep, against X's variance given Z.
    A draw of X within the neighbourhoods of Z keeps X's law given Z only where S_X is small
    (Kim, Neykov, Balakrishnan & Wasserman 2022, Ann. Stat. 50:3388, ask that law to change little
    within a neighbourhood); what makes a null rejected is the co-spread C: the covariance of f and
    g within the neighbourhoods that the data carry and the draws lose, as a correlation against
    the noise of X and Y, 0 where the neighbourhoods are points. Returns ``spread_x``, ``spread_y``
    and ``co_spread``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(300, 1))
    >>> steep = regress_on_z(5 * z + 0.1 * rng.normal(size=(300, 1)), z)
    >>> spread = neighbourhood_spread(steep, steep, _z_neighbours(z, 5))
    >>> bool(spread["spread_x"] > 1), bool(spread["co_spread"] > 1)
    (True, True)
    """
    fitted_x, fitted_y = fit_x.fitted[candidates], fit_y.fitted[candidates]  # (n, k, d)
    noise_x = np.maximum(np.var(fit_x.residual, axis=0), 1e-300)
    noise_y = np.maximum(np.var(fit_y.residual, axis=0), 1e-300)
    centred_x = fitted_x - fitted_x.mean(axis=1, keepdims=True)
    centred_y = fitted_y - fitted_y.mean(axis=1, keepdims=True)
    within = np.einsum("nka,nkb->ab", centred_x, centred_y) / (centred_x.shape[0] * centred_x.shape[1])
    return {
        "spread_x": float(np.max(np.mean(centred_x**2, axis=(0, 1)) / noise_x)),
        "spread_y": float(np.max(np.mean(centred_y**2, axis=(0, 1)) / noise_y)),
        "co_spread": float(np.max(np.abs(within) / np.sqrt(np.outer(noise_x, noise_y)))),
    }


def gcm_statistic(residual_x: np.ndarray, residual_y: np.ndarray) -> tuple[float, float, int]:
    """Shah & Peters' generalised covariance measure (2020, "The hardness of conditional
    independence testing and the generalised covariance measure", Ann. Stat. 48:1514) of residuals
    of X and of Y on Z: with R_i the products of row i's residuals (dx dy of them),

        T = n Rbar' Sigma^-1 Rbar,     Sigma the covariance of the R_i,

    chi-square with dx dy degrees of freedom under H0 (for one product, T = (sqrt(n) Rbar / sd R)^2,
    Shah & Peters' normal statistic squared). The level holds as n grows when the product of the
    two regressions' root mean squared errors shrinks faster than 1 / sqrt(n), whatever else the
    law does; only a dependence with E[cov(X, Y | Z)] != 0 is seen. Returns (T, p, degrees).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> a, b = rng.normal(size=(2, 500, 1))
    >>> bool(gcm_statistic(a, b)[1] > 0.05), bool(gcm_statistic(a, a + b)[1] < 1e-6)
    (True, True)
    """
    from scipy import stats

    n = len(residual_x)
    products = (residual_x[:, :, None] * residual_y[:, None, :]).reshape(n, -1)
    mean = products.mean(axis=0)
    covariance = np.atleast_2d(np.cov(products, rowvar=False, bias=True))
    statistic = float(n * mean @ np.linalg.pinv(covariance) @ mean)
    degrees = products.shape[1]
    return statistic, float(stats.chi2.sf(statistic, degrees)), degrees


def _diagnosed(fit_x: ZRegression, fit_y: ZRegression, candidates: np.ndarray,
               scheme: str) -> tuple[dict[str, float], tuple[str, ...]]:  # fmt: skip
    """The neighbourhood diagnostic of a test given a continuous Z (:func:`neighbourhood_spread`,
    with the regressions' unexplained variance) and its warning where the co-spread exceeds the
    scheme's threshold (:data:`CO_SPREAD_WARNING`)."""
    found = neighbourhood_spread(fit_x, fit_y, candidates)
    found["unexplained_x"] = float(np.max(fit_x.unexplained))
    found["unexplained_y"] = float(np.max(fit_y.unexplained))
    threshold = CO_SPREAD_WARNING[scheme]
    if found["co_spread"] <= threshold:
        return found, ()
    measured = ("beyond the largest co-spread of the nulls the residual scheme was calibrated on" if scheme ==
                "residual" else f"where the {scheme} scheme was measured to reject true conditional "
                "independence too often")  # fmt: skip
    return found, (
        f"the neighbourhoods of Z ({candidates.shape[1]} nearest rows) are too wide for X's and Y's "
        f"dependence on Z: the co-spread of their regressions within them is {found['co_spread']:.2g}, above "
        f"{threshold:g}, {measured} (docs/independence.md), so the p-value may be too small; more rows or "
        "fewer variables in Z narrow the neighbourhoods",
    )  # fmt: skip


# --- the tests -------------------------------------------------------------------------------------


def _permutation_count(permutations: int | None, estimator: str | None) -> tuple[int, list[str]]:
    """B and a note when it is the default; a trained estimator needs B said."""
    if estimator is not None:
        estimators.estimator_class(estimator)  # an unknown name: the error naming the choices
        if estimator not in POINT_STATISTICS and permutations is None:
            raise checks.ParameterError(
                "permutations", f"must be given to test with {estimator}, which trains a network for each "
                f"permutation ({DEFAULT_PERMUTATIONS} trainings by default); pass a number knowingly "
                "(say 99), or leave the estimator unset for a k-NN statistic",
            )  # fmt: skip
    if permutations is None:
        return DEFAULT_PERMUTATIONS, [f"{DEFAULT_PERMUTATIONS} permutations (the default)"]
    return checks.whole_number("permutations", permutations, 1), []


def _check_size(estimator: estimators.Estimator, prepared: Prepared) -> None:
    dims = [part.shape[1] for part in (prepared.x, prepared.y, prepared.z) if part is not None]
    needed = estimator.minimum_pairs(*dims)
    if len(prepared.x) < needed:
        raise checks.TooFewSamples(
            "x",
            f"has too few samples ({len(prepared.x)}; the test with {estimator.name} needs at least "
            f"{needed})",
        )


def _run(
    statistics: Sequence[Statistic], draw: Callable[[], np.ndarray], n: int, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """The observed statistics (J,) and ``count`` rows of null values (count, J), every statistic
    on the same fresh draw in each row."""
    observed = np.array([statistic(np.arange(n)) for statistic in statistics])
    null = np.empty((count, len(statistics)))
    for row in range(count):
        order = draw()
        null[row] = [statistic(order) for statistic in statistics]
    return observed, null


def _plus_one(count: int) -> str:
    return (f"p = (1 + #{{null >= observed}}) / (1 + {count}), the +1 of Phipson & Smyth (2010): never 0, at "
            f"least 1/{count + 1}")  # fmt: skip


@dataclass(frozen=True)
class _Companion:
    """The linear statistic beside the k-NN one: its value on the data and on each permutation."""

    observed: float
    null: np.ndarray
    described: str


@dataclass(frozen=True)
class _Outcome:
    """A test's numbers and words, before they become an :class:`IndependenceTest`."""

    observed: float
    null: np.ndarray
    method: str
    scheme: str
    estimator: str
    notes: tuple[str, ...] = ()
    companion: _Companion | None = None
    pvalue: float | None = None
    """A p-value that is not the permutation p-value of ``observed`` (the GCM's chi-square)."""
    z_method: str = "none"
    warnings: tuple[str, ...] = ()
    diagnostic: dict[str, float] = field(default_factory=dict)


LINEAR_COMPANIONS = ("ksg", "ross", "frenzel-pompe")
"""The k-NN statistics that :func:`linear_statistic` can go beside: by default KSG and Ross (the
unconditional tests); Frenzel & Pompe's given a continuous Z only when asked (``linear=True``):
under Runge's local permutation the partial correlation is not exactly calibrated, and the
combination rejected 2 of 100 nulls at 0.05 with a 3-D Z (bench/independence.py's cond-3d-z),
where Frenzel & Pompe's alone (k = 20) rejected 6.0% of 200."""


def _linear_companion(prepared: Prepared, linear: bool) -> tuple[list[Statistic], str]:
    """[the linear statistic] and its description where the test combines it, else []."""
    if not linear or prepared.estimator.name not in LINEAR_COMPANIONS:
        return [], ""
    sides = prepared.sides or {}
    conditional = prepared.z is not None  # a discrete side given Z was dequantised: its ranks
    discrete = {name: bool(sides.get(name)) and not conditional for name in ("x", "y")}
    statistic = linear_statistic(
        prepared.x, prepared.y, prepared.z, x_discrete=discrete["x"], y_discrete=discrete["y"]
    )
    kinds = ["category indicators" if discrete[name] else "rank normal scores" for name in ("x", "y")]
    given = " less their least-squares fit on Z's rank normal scores" if conditional else ""
    described = (f"the linear statistic -1/2 sum log(1 - rho^2) over the canonical correlations of X's "
                 f"{kinds[0]} and Y's {kinds[1]}{given}")  # fmt: skip
    return [statistic], described


def _outcome(observed: np.ndarray, null: np.ndarray, described: str, **fields: Any) -> _Outcome:
    """The outcome of a run of the k-NN statistic and, where there is one, the linear companion
    (column 1)."""
    companion = _Companion(float(observed[1]), null[:, 1], described) if len(observed) > 1 else None
    return _Outcome(float(observed[0]), null[:, 0], companion=companion, **fields)


def _combined_sentence(companion: _Companion | None) -> str:
    if companion is None:
        return ""
    return (f" Beside it, {companion.described}, on the same permutations; p is the min-p combination of "
            "the two (min_p_combination: each statistic's permutation p-value, then the rank of the "
            "smallest among the permutations': valid as each alone, about as powerful as the better of "
            "the two).")  # fmt: skip


def _unconditional(
    prepared: Prepared, count: int, rng: np.random.Generator, seed: int, linear: bool
) -> _Outcome:
    _check_size(prepared.estimator, prepared)
    statistic, described = _unconditional_statistic(prepared.estimator, prepared.x, prepared.y, seed)
    companions, companion = _linear_companion(prepared, linear)
    n = len(prepared.x)
    observed, null = _run([statistic, *companions], lambda: rng.permutation(n), n, count)
    method = (f"Permutation test of independence: the statistic {described}, recomputed on {count} random "
              f"permutations of Y's rows; {_plus_one(count)}.")  # fmt: skip
    return _outcome(observed, null, companion, method=method, scheme="permutations of Y",
                    estimator=prepared.estimator.name)  # fmt: skip


def _local(
    prepared: Prepared, count: int, rng: np.random.Generator, seed: int, z_neighbours: int, linear: bool
) -> _Outcome:
    _check_size(prepared.estimator, prepared)
    n = len(prepared.x)
    checks.whole_number("z_neighbours", z_neighbours, 2, n)
    statistic, described = _conditional_statistic(
        prepared.estimator, prepared.x, prepared.y, prepared.z, seed
    )
    candidates = _z_neighbours(prepared.z, z_neighbours)
    repeats: list[int] = []

    def draw() -> np.ndarray:
        drawn = local_permutation(candidates, rng)
        repeats.append(n - len(np.unique(drawn)))
        return drawn

    companions, companion = _linear_companion(prepared, linear)
    observed, null = _run([statistic, *companions], draw, n, count)
    method = (f"Conditional permutation test (Runge 2018's local permutation): in each of {count} draws, "
              f"every row takes the X of one of its {z_neighbours} nearest rows in Z (max-norm on Z's rank "
              f"scores, itself included), without repeats where possible; the statistic {described}; "
              f"{_plus_one(count)}.")  # fmt: skip
    notes = (f"local permutation: {np.mean(repeats) / n:.1%} of the rows took an X another row took too (all "
             f"{z_neighbours} candidates taken), on average over the draws",)  # fmt: skip
    fit_x, fit_y = regress_on_z(prepared.x, prepared.z), regress_on_z(prepared.y, prepared.z)
    diagnostic, warned = _diagnosed(fit_x, fit_y, candidates, "local")
    return _outcome(observed, null, companion, method=method, scheme="local permutations of X within Z",
                    estimator=prepared.estimator.name, notes=notes, z_method="local", warnings=warned,
                    diagnostic=diagnostic)  # fmt: skip


def _residual(prepared: Prepared, count: int, rng: np.random.Generator, z_neighbours: int) -> _Outcome:
    """The residual scheme: X and Y less their regressions on Z, X's residuals drawn by Runge's
    local permutation within Z-neighbourhoods (made a permutation, :func:`completed_permutation`),
    KSG and the linear statistic on the residuals, combined by min-p."""
    from mitool.estimators.preparation import normal_scores

    _check_size(prepared.estimator, prepared)
    n = len(prepared.x)
    checks.whole_number("z_neighbours", z_neighbours, 2, n)
    k = prepared.estimator.settings.k
    fit_x, fit_y = regress_on_z(prepared.x, prepared.z), regress_on_z(prepared.y, prepared.z)
    candidates = _z_neighbours(prepared.z, z_neighbours)
    statistic = ksg_statistic(fit_y.residual, fit_x.residual, k)  # X's residual row order[i] with row i
    linear = linear_statistic(fit_y.residual, fit_x.residual)
    scores = normal_scores(prepared.z)[0]
    draw = lambda: completed_permutation(local_permutation(candidates, rng), scores, rng)  # noqa: E731
    observed, null = _run([statistic, linear], draw, n, count)
    diagnostic, warned = _diagnosed(fit_x, fit_y, candidates, "residual")
    combined, own = min_p_combination(observed, null)
    diagnostic.update(ksg_pvalue=float(own[0]), linear_pvalue=float(own[1]), combined_pvalue=float(combined))
    chosen = zip(fit_x.models + fit_y.models, fit_x.scales + fit_y.scales, fit_x.z_scales + fit_y.z_scales,
                 strict=True)  # fmt: skip
    fitted = ", ".join(f"{model} of the {scale} on Z's {given}" for model, scale, given in chosen)
    described = ("the linear statistic -1/2 sum log(1 - rho^2) over the canonical correlations of the "
                 "residuals' rank normal scores")  # fmt: skip
    method = (f"Conditional permutation test of residuals: X and Y less their regressions on Z "
              f"(each column's model and scales chosen by leave-one-out error among "
              f"{', '.join(REGRESSION_MODELS)}, of the values or their rank normal scores, on Z's values "
              f"or rank normal scores: {fitted}; "
              f"leave-one-out predictions), then in each of {count} draws every row takes the X-residual of "
              f"one of its {z_neighbours} nearest rows in Z (Runge 2018's local permutation; the rows that "
              "took an X another row took then take the nearest X in Z no row took); the statistic KSG "
              f"(k = {k}, max-norm) on the rank normal scores of the residuals; "
              f"{_plus_one(count)}.")  # fmt: skip
    unexplained = ", ".join(f"{value:.2f}" for value in (*fit_x.unexplained, *fit_y.unexplained))
    notes = (f"regressions on Z: leave-one-out unexplained variance {unexplained} (X's columns, then Y's)",)
    fields = {"method": method, "scheme": "local permutations of X's residuals within Z",
              "estimator": "ksg", "notes": notes, "z_method": "residual", "warnings": warned,
              "diagnostic": diagnostic}  # fmt: skip
    return _outcome(observed, null, described, **fields)


def _gcm(prepared: Prepared, z_neighbours: int) -> _Outcome:
    """Shah & Peters' generalised covariance measure of the residuals of the regressions on Z."""
    _check_size(prepared.estimator, prepared)
    fit_x, fit_y = regress_on_z(prepared.x, prepared.z), regress_on_z(prepared.y, prepared.z)
    statistic, pvalue, degrees = gcm_statistic(fit_x.residual, fit_y.residual)
    method = (f"Generalised covariance measure (Shah & Peters 2020): X and Y less their regressions on Z "
              f"(models chosen by leave-one-out error among {', '.join(REGRESSION_MODELS)}), "
              "T = n Rbar' Sigma^-1 Rbar over the products R of the residuals, p from the chi-square law "
              f"with {degrees} degree(s) of freedom; valid as n grows when both regressions converge, blind "
              "to a dependence without a conditional covariance.")  # fmt: skip
    candidates = _z_neighbours(prepared.z, min(z_neighbours, len(prepared.x)))
    diagnostic, warned = _diagnosed(fit_x, fit_y, candidates, "gcm")
    return _Outcome(statistic, np.zeros(0), method, f"chi-square with {degrees} degree(s) of freedom", "gcm",
                    pvalue=pvalue, z_method="gcm", warnings=warned, diagnostic=diagnostic)  # fmt: skip


def _chosen_z_method(z_method: str, estimator: str | None, linear: bool | None) -> str:
    """The scheme for a continuous Z: "auto" is "residual" unless an estimator is named."""
    checks.choice("z_method", z_method, Z_METHODS)
    if z_method == "auto":
        return "local" if estimator is not None or linear else "residual"
    if z_method != "local" and estimator is not None:
        raise checks.ParameterError(
            "estimator", f"cannot be named with z_method={z_method!r}, whose statistic is its own (KSG on "
            "the residuals, or the GCM); use z_method='local' to test with a named statistic",
        )  # fmt: skip
    if z_method != "local" and linear:
        raise checks.ParameterError(
            "linear", f"cannot be True with z_method={z_method!r}: the partial correlation beside a "
            "statistic is made with z_method='local' only",
        )  # fmt: skip
    return z_method


def _within_groups(prepared: Prepared, count: int, rng: np.random.Generator, options: dict[str, Any],
                   seed: int) -> _Outcome:  # fmt: skip
    """A discrete Z: the statistic within each group of Z, weighted by the groups' shares, and the
    permutations within the groups (as :func:`mitool.estimate` computes I(X; Y | Z))."""
    from mitool.estimators.rows import category_codes

    groups = category_codes(prepared.z)
    discrete = ",".join(name for name in ("x", "y") if prepared.sides[name]) or "none"
    parts: list[tuple[float, Statistic, int]] = []
    skipped, names, described = [], set(), ""
    for group in range(int(groups.max()) + 1):
        rows = np.flatnonzero(groups == group)
        share = len(rows) / len(groups)
        part = prepare(
            prepared.x[rows], prepared.y[rows], discrete=discrete, defaults=TEST_DEFAULTS, **options
        )
        if part.exact is not None:  # a side constant within the group: I = 0 there, whatever the order
            parts.append((share, lambda order: 0.0, len(rows)))
            continue
        dims = (part.x.shape[1], part.y.shape[1])
        if len(rows) < part.estimator.minimum_pairs(*dims):
            skipped.append(len(rows))
            continue
        statistic, described = _unconditional_statistic(part.estimator, part.x, part.y, seed)
        parts.append((share, statistic, len(rows)))
        names.add(part.estimator.name)
    if not parts:
        raise checks.ParameterError("z", "has no group of Z with enough pairs for the estimator within it")
    weight = sum(share for share, _, _ in parts)

    def combined(draw: Callable[[int], np.ndarray]) -> float:
        return sum(share * statistic(draw(size)) for share, statistic, size in parts) / weight

    observed = combined(np.arange)
    null = np.array([combined(rng.permutation) for _ in range(count)])
    notes = [
        f"z discrete: X permuted within each of its {len(parts)} groups, the statistic weighted by their "
        "shares"
    ]
    if skipped:
        notes.append(
            f"{len(skipped)} group(s) of Z with too few pairs ({', '.join(map(str, skipped))}) left out"
        )
    name = "/".join(sorted(names)) or "none"
    method = (f"Conditional permutation test for a discrete Z: X permuted within each group of Z ({count} "
              f"permutations), which keeps X's law given Z exactly; the statistic the MI within each group "
              f"({described or name}) weighted by the groups' shares; {_plus_one(count)}.")  # fmt: skip
    return _Outcome(observed, null, method, f"permutations of X within the {len(parts)} groups of Z", name,
                    tuple(notes))  # fmt: skip


def _untied(prepared: Prepared, seed: int) -> Prepared:
    """For the k-NN statistic given a continuous Z: a discrete X or Y dequantised (random
    tie-breaking within its values, :func:`mitool.ties.dequantise`). It is recovered from the
    result, so I(X; Y | Z) and the null hypothesis are unchanged, and the statistic's distances are
    no longer 0."""
    if prepared.estimator.name != "frenzel-pompe" or not (prepared.sides["x"] or prepared.sides["y"]):
        return prepared
    from mitool.ties import treat_ties

    rng = np.random.default_rng([seed, _PERMUTATION_STREAM, 0x71E5])
    rows, notes = {"x": prepared.x, "y": prepared.y}, list(prepared.notes)
    for name in ("x", "y"):
        if prepared.sides[name]:
            rows[name] = treat_ties(name, rows[name], "dequantise", rng).rows
            notes.append(f"{name} is discrete: dequantised for the k-NN statistic (ties broken at random "
                         "within its values; the MI and the hypothesis unchanged)")  # fmt: skip
    return replace(prepared, x=rows["x"], y=rows["y"], notes=tuple(notes))


def _tail_sentence(used: str, fitted: TailFit | None) -> str:
    """What ``tail="gpd"`` did, in a sentence for the method."""
    if fitted is not None:
        return (f"Fewer than {TAIL_REACHED} null values reach the statistic, so p is the "
                f"{fitted.describe()}: p = (N_exc / B) (1 - F(observed - threshold)) (Knijnenburg et al. "
                "2009; see tail_pvalue).")  # fmt: skip
    if used == "permutation-no-fit":
        return (f"Fewer than {TAIL_REACHED} null values reach the statistic, but no generalized Pareto "
                f"tail fitted the null (from {TAIL_EXCEEDANCES} down to {TAIL_MINIMUM} exceedances, at "
                "most a quarter of the null): p is the permutation p-value, not extrapolated.")  # fmt: skip
    return f"At least {TAIL_REACHED} null values reach the statistic: p is the permutation p-value."


def _combined_tail(pvalue: float, components: tuple[Component, ...], count: int) -> tuple[float, str]:
    """``tail="gpd"`` for a combined test: where fewer than :data:`TAIL_REACHED` null rows reach
    the data in the min-p order, :func:`bonferroni_tails` of the statistics' tails; else the min-p
    p-value. Returns p and what was done (:data:`TAIL_METHODS`)."""
    if round(pvalue * (count + 1)) - 1 >= TAIL_REACHED:
        return pvalue, "permutation"
    null_rows = np.column_stack([part.null_values for part in components])
    fits = [fit_tail(null_rows[:, column], exceedances=TAIL_EXCEEDANCES) for column in range(len(components))]
    if all(fitted is None for fitted in fits):
        return pvalue, "permutation-no-fit"
    tailed, used_tail = bonferroni_tails([part.statistic for part in components], null_rows, fits)
    return tailed, "gpd" if used_tail else "permutation"


def _combined_tail_sentence(used: str) -> str:
    """What ``tail="gpd"`` did to a combined test, in a sentence for the method."""
    if used == "gpd":
        return (f"Fewer than {TAIL_REACHED} permutations reach the data in the min-p order, so p is twice "
                "the smaller of the two statistics' p-values from generalized Pareto tails fitted to their "
                "nulls (each its permutation p-value where 10 or more of its null values reach it; "
                "Bonferroni; bonferroni_tails).")  # fmt: skip
    if used == "permutation-no-fit":
        return (
            f"Fewer than {TAIL_REACHED} permutations reach the data, but no generalized Pareto tail "
            "fitted either statistic's null: p is the min-p permutation p-value, not extrapolated."
        )
    return f"At least {TAIL_REACHED} permutations reach the data: p is the min-p permutation p-value."


def _exact_outcome(prepared: Prepared, count: int, conditional: bool) -> _Outcome:
    """A constant side: the statistic is 0 on the data and on every permutation, so p = 1."""
    side = "X" if any("x is constant" in note for note in prepared.exact.notes) else "Y"
    method = (f"No test was needed: {side} is constant, so I = 0 on the data and on every permutation of it, "
              "and p = 1.")  # fmt: skip
    return _Outcome(
        0.0, np.zeros(0), method, f"{side} is constant", "none", ("a constant side: p = 1, exactly",)
    )


def _check_finite(outcome: _Outcome, prepared: Prepared) -> None:
    """A ParameterError where the statistic is not a finite number on the data or on a permutation:
    a NaN ranks against the null as no number does, so its p-value would mean nothing."""
    values = [outcome.observed, *outcome.null]
    if outcome.companion is not None:
        values += [outcome.companion.observed, *outcome.companion.null]
    if not np.isfinite(values).all():
        where = "on the data" if not np.isfinite(outcome.observed) else "on some permutations"
        raise checks.ParameterError(
            "estimator", f"{outcome.estimator} gives a statistic that is not a finite number {where} "
            f"({len(prepared.x)} pairs), so no p-value can be computed; use the default statistic (k-NN on "
            "ranks, which no scale or outlier can break) or look for extreme values in the data",
        )  # fmt: skip


def _test(
    x: ArrayLike, y: ArrayLike, z: ArrayLike | None, estimator: str | None, permutations: int | None,
    seed: int, ties: str, discrete: str, z_neighbours: int, settings: dict[str, Any],
    stream: tuple[int, ...] = (), tail: str = "none", linear: bool | None = None, z_method: str = "auto",
) -> tuple[IndependenceTest, Prepared]:  # fmt: skip
    """The test and the prepared data; ``stream`` sets the permutations apart (one per column of
    :func:`feature_mi`); ``linear`` None: the linear companion with the default statistic only."""
    start = time.perf_counter()
    count, notes = _permutation_count(permutations, estimator)
    combine = (estimator is None and z is None) if linear is None else bool(linear)
    options = {"estimator": estimator, "ties": ties, "seed": seed, **settings}
    prepared = prepare(x, y, z, discrete=discrete, defaults=TEST_DEFAULTS, **options)
    rng = np.random.default_rng([seed, _PERMUTATION_STREAM, *stream])
    conditional = z is not None
    if prepared.exact is not None:
        outcome = _exact_outcome(prepared, count, conditional)
    elif prepared.z is not None and prepared.estimator is None:
        outcome = _within_groups(prepared, count, rng, options, seed)
    elif prepared.z is not None:
        prepared = _untied(prepared, seed)
        scheme = _chosen_z_method(z_method, estimator, linear)
        if scheme == "residual":
            outcome = _residual(prepared, count, rng, z_neighbours)
        elif scheme == "gcm":
            outcome = _gcm(prepared, z_neighbours)
        else:
            outcome = _local(prepared, count, rng, seed, z_neighbours, combine)
    else:
        outcome = _unconditional(prepared, count, rng, seed, combine)
    exact = prepared.exact is not None
    _check_finite(outcome, prepared)
    pvalue = 1.0 if exact else permutation_pvalue(outcome.observed, outcome.null)
    if outcome.pvalue is not None:
        pvalue, count = outcome.pvalue, 0
    method, used, components = outcome.method + _combined_sentence(outcome.companion), "none", ()
    method += (
        " The statistic is chosen for the test's power (more neighbours average over wider cells), "
        "not as the best estimate of the MI, which mitool.estimate gives (it may differ)."
    )
    if outcome.companion is not None:
        companion = outcome.companion
        pvalue, own = min_p_combination(
            np.array([outcome.observed, companion.observed]), np.column_stack([outcome.null, companion.null])
        )  # fmt: skip
        components = (Component(outcome.estimator, outcome.observed, float(own[0]), outcome.null),
                      Component("linear", companion.observed, float(own[1]), companion.null))  # fmt: skip
    if outcome.pvalue is not None:
        used = "chi-square"
    elif tail == "gpd" and not exact and outcome.companion is None:
        pvalue, used, fitted = _tail(outcome.observed, outcome.null, TAIL_EXCEEDANCES)
        method += " " + _tail_sentence(used, fitted)
    elif tail == "gpd" and not exact:
        pvalue, used = _combined_tail(pvalue, components, count)
        method += " " + _combined_tail_sentence(used)
    result = IndependenceTest(
        statistic=float(outcome.observed), pvalue=pvalue,
        permutations=0 if exact else count, null=NullSummary.of(outcome.null), method=method,
        notes=(*prepared.notes, *notes, *outcome.notes), estimator=outcome.estimator, conditional=conditional,
        n_pairs=len(prepared.x), seconds=time.perf_counter() - start, scheme=outcome.scheme,
        null_values=outcome.null, tail=used, components=components, z_method=outcome.z_method,
        warnings=outcome.warnings, diagnostic=outcome.diagnostic,
    )  # fmt: skip
    return result, prepared


def independence_test(
    x: ArrayLike,
    y: ArrayLike,
    z: ArrayLike | None = None,
    *,
    estimator: str | None = None,
    permutations: int | None = None,
    seed: int = 0,
    ties: str = "auto",
    discrete: str = "auto",
    z_neighbours: int = Z_NEIGHBOURS,
    tail: str = "none",
    linear: bool | None = None,
    missing: str = "drop",
    z_method: str = "auto",
    **settings: Any,
) -> IndependenceTest:
    """A permutation test of H0: X and Y are independent (with ``z``: independent given Z), with
    the MI estimate as the statistic (see the module for the mathematics).

    p = (1 + #{b : T_b >= T}) / (1 + B) over B permutations (Phipson & Smyth 2010): valid at any n,
    never 0. Unconditional: the rows of Y permuted. Given a continuous Z (``z_method``): by default
    X and Y less their regressions on Z, X's residuals drawn by Runge's (2018) local permutation
    within Z-neighbourhoods, KSG on the residuals the statistic; or Runge's local permutation of X
    itself with Frenzel & Pompe's conditional KSG; or Shah & Peters' generalised covariance
    measure. Given a discrete Z: X permuted within each group of Z.

    Parameters
    ----------
    x, y : array_like, shape (n, dx) and (n, dy), or (n,)
        Row i of ``x`` goes with row i of ``y`` (as :func:`mitool.estimate` takes them: numbers,
        tensors, labels).
    z : array_like, shape (n, dz), optional
        The variables to condition on.
    estimator : str, optional
        The statistic: a name of :func:`mitool.estimators.names`; default: the k-NN statistic for
        the data (:data:`TEST_DEFAULTS`). An estimator that trains a network retrains for every
        permutation, so it is refused unless ``permutations`` is given.
    permutations : int, optional
        B; default :data:`DEFAULT_PERMUTATIONS` (999), with a note.
    seed : int
        All the randomness: the dequantisation of ties, the permutations, a trained estimator's.
    ties, discrete : str
        As :func:`mitool.estimate` reads them.
    z_neighbours : int
        k_perm of the local permutation (a continuous Z): the candidates of each row, itself included.
    tail : "none" or "gpd"
        "none" (default): the permutation p-value. "gpd": where fewer than 10 null values reach the
        statistic, the p-value of a generalized Pareto tail fitted to the null (:func:`tail_pvalue`:
        an estimate below 1 / (B + 1), not valid by construction; ``.tail`` says what was done).
    linear : bool, optional
        Whether to add :func:`linear_statistic` beside a k-NN statistic (KSG, Ross's, Frenzel &
        Pompe's) and combine the two by min-p (:func:`min_p_combination`); default: with the
        default statistic of an unconditional test (``estimator`` unset, no ``z``), not with a
        named one nor given Z (:data:`LINEAR_COMPANIONS`). ``.statistic`` stays the
        MI estimate; ``.components`` gives each statistic's value and own p-value.
    missing : str
        "drop" (default): rows with a missing value (NaN, None, pandas' NA) in x, y or z are left
        out, with a note; "refuse": a missing value is an error naming its row.
    z_method : "auto", "residual", "local" or "gcm"
        Given a continuous Z, how H0: X independent of Y given Z is tested (a discrete Z is always
        tested by permutations within its groups, exactly).

        * "residual" ("auto" when no estimator is named and ``linear`` is not True): each column of
          X and of Y is regressed on Z's rank scores by the model of smallest leave-one-out error
          (:func:`regress_on_z`), giving residuals r_X = X - f(Z), r_Y = Y - g(Z); each draw gives
          every row the r_X of one of its ``z_neighbours`` nearest rows in Z (Runge's local
          permutation), and the statistic is KSG on the rank scores of (r_X, r_Y). Under H0, r_X
          and r_Y are independent given Z; the draw keeps r_X's law given Z where that law changes
          little within a neighbourhood, which the regression makes so: what is left of X's
          dependence on Z is its regression's error, not the dependence itself (the Z-dependence
          that broke the "local" scheme, Kim, Neykov, Balakrishnan & Wasserman 2022).
        * "local" ("auto" with a named estimator, or ``linear=True``): Runge's local permutation of
          X itself, the statistic Frenzel & Pompe's I(X; Y | Z) (or the named estimator's). Valid
          where X's law given Z changes little within the neighbourhoods: not where X and Y both
          depend strongly on a Z of several dimensions.
        * "gcm": Shah & Peters' generalised covariance measure of the two residuals
          (:func:`gcm_statistic`): no permutations, p from a chi-square law; valid as n grows when
          both regressions converge fast enough; sees only a dependence with a conditional
          covariance.

        Every test given a continuous Z reports the neighbourhood diagnostic
        (:func:`neighbourhood_spread`) in ``.diagnostic`` and, where it exceeds
        :data:`CO_SPREAD_WARNING` for the scheme used, a warning in ``.warnings`` and ``str``: then the
        p-value may be too small. No test of conditional independence holds its level over every
        law (Shah & Peters 2020, No-free-lunch theorem); the warning says where this one is known not
        to.
    **settings
        The estimator's own settings (``k=8``).

    Returns
    -------
    IndependenceTest
        ``.statistic`` (nats), ``.pvalue``, ``.permutations``, ``.null`` (mean, std, quantiles),
        ``.method`` and ``.notes``; given a continuous Z, ``.z_method``, ``.diagnostic`` and
        ``.warnings``; ``str(result)`` says it in a sentence.

    Raises
    ------
    ParameterError
        Bad input, in one line naming the parameter: too few rows for the statistic, rows that do
        not pair, a trained estimator without ``permutations``.

    Examples
    --------
    >>> import numpy as np, mitool
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=300)
    >>> dependent = mitool.independence_test(x, x + rng.normal(size=300), permutations=199)
    >>> dependent.pvalue                          # the smallest p that 199 permutations can give
    0.005
    >>> independent = mitool.independence_test(x, rng.normal(size=300), permutations=199)
    >>> bool(independent.pvalue > 0.05)
    True
    >>> z = rng.normal(size=300)                  # a common cause: dependent, but not given Z
    >>> a, b = z + 0.5 * rng.normal(size=300), z + 0.5 * rng.normal(size=300)
    >>> bool(mitool.independence_test(a, b, z, permutations=99).pvalue > 0.05)
    True
    """
    checks.choice("tail", tail, ("none", "gpd"))
    checks.choice("z_method", z_method, Z_METHODS)
    options = {"tail": tail, "linear": linear, "z_method": z_method}
    settings = {**settings, "missing": missing}
    return _test(x, y, z, estimator, permutations, seed, ties, discrete, z_neighbours, settings, **options)[0]


# --- per feature -----------------------------------------------------------------------------------


def _column_names(features: Any, width: int, columns: Sequence[str] | None) -> tuple[str, ...]:
    if columns is not None:
        if len(columns) != width:
            raise checks.ParameterError(
                "columns", f"must name each of the {width} columns, got {len(columns)} names"
            )
        return tuple(str(name) for name in columns)
    if hasattr(features, "columns"):  # a pandas DataFrame
        return tuple(str(name) for name in features.columns)
    return tuple(f"x{index}" for index in range(width))


def _feature_columns(features: Any) -> list[Any]:
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
    width = len(_feature_columns(X))
    names = _column_names(X, width, columns)
    declared = _declared_features(discrete_features, width)
    if not isinstance(discrete_target, (bool, np.bool_)):
        checks.choice("discrete_target", discrete_target, ("auto",))
    target_declared = None if isinstance(discrete_target, str) else bool(discrete_target)
    checks.whole_number("permutations", permutations, 0)
    checks.choice("fdr", fdr, FDR_METHODS)
    settings = {**settings, "missing": missing}
    rows: list[tuple[float, float, float, float, tuple[str, ...]]] = []
    for index, column in enumerate(_feature_columns(X)):
        discrete = _column_discrete(column, y, declared[index], target_declared, names[index])
        if permutations:
            result, prepared = _test(column, y, None, None, permutations, seed, ties, discrete, Z_NEIGHBOURS,
                                     settings, stream=(index,))  # fmt: skip
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
                  f"{_plus_one(permutations)}); the interval is the estimator's (the sampling noise of the "
                  f"pairs); q: {_FDR_NAMES[fdr]} over the columns.")  # fmt: skip
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
    """The statistic that :func:`_test` computes on the data of one column and y, the data
    prepared as it prepares them, without the permutations; 0 where a side is constant."""
    options = {"estimator": None, "ties": ties, "seed": seed, **settings}
    prepared = prepare(column, y, None, discrete=discrete, defaults=TEST_DEFAULTS, **options)
    if prepared.exact is not None:
        return 0.0, prepared
    _check_size(prepared.estimator, prepared)
    statistic, _ = _unconditional_statistic(prepared.estimator, prepared.x, prepared.y, seed)
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
