"""What a test returns: :class:`IndependenceTest` (``.statistic``, ``.pvalue``, the null's summary and
the words that say how it was computed) and :class:`FeatureMI` for a screen of columns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mitool.estimators.base import interval_text


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
