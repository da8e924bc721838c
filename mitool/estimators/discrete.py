"""The plug-in estimate for discrete X and Y, with the Miller-Madow correction.

With counts n_xy of the n pairs over the cells of the joint table and its margins,

    H_plugin(A)  = -sum_a (n_a / n) log(n_a / n)
    H_MM(A)      = H_plugin(A) + (m_A - 1) / (2 n)          m_A: the occupied cells of A
    I(X; Y)      = H_MM(X) + H_MM(Y) - H_MM(X, Y)

The plug-in entropies are biased downwards by about (m - 1) / (2n) (Miller 1955); the correction
removes that first-order bias, so the MI's, about -(m_X - 1 + m_Y - 1 - m_XY + 1) / (2n) (an
overestimate of independent tables), goes too. A value in each row is a category: a multi-column X
is the tuple of its columns. The interval: the delta method, Var(I) ~ Var(log p(x, y) / (p(x) p(y)))
/ n over the pairs, with the plug-in probabilities (sampling noise, not the bias).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mitool.estimators.base import Estimate, Estimator, EstimatorSettings, level_setting
from mitool.estimators.rows import category_codes
from mitool.settings import setting

__all__ = ["PlugIn", "plugin_mi"]


def _entropy(codes: np.ndarray, correction: bool) -> float:
    counts = np.bincount(codes)
    counts = counts[counts > 0]
    n = counts.sum()
    value = float(-(counts / n * np.log(counts / n)).sum())
    return value + ((len(counts) - 1) / (2 * n) if correction else 0.0)


def table_codes(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The category codes of x, of y and of the pair (x, y) of each row."""
    codes_x, codes_y = category_codes(x), category_codes(y)
    return codes_x, codes_y, codes_x * (codes_y.max() + 1) + codes_y


def plugin_mi(x: np.ndarray, y: np.ndarray, correction: bool = True) -> float:
    """I(X; Y) in nats of the joint table of the rows' categories (Miller-Madow with ``correction``)."""
    codes_x, codes_y, joint = table_codes(x, y)
    return float(_entropy(codes_x, correction) + _entropy(codes_y, correction) - _entropy(joint, correction))


def pointwise_log_ratios(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """log p(x_i, y_i) / (p(x_i) p(y_i)) of each pair with the plug-in probabilities."""
    codes_x, codes_y, joint = table_codes(x, y)
    n = len(codes_x)
    p_xy, p_x, p_y = (np.bincount(codes)[codes] / n for codes in (joint, codes_x, codes_y))
    return np.log(p_xy) - np.log(p_x) - np.log(p_y)


@dataclass(frozen=True)
class PlugInSettings(EstimatorSettings):
    correction: bool = setting(True, "Miller-Madow: add (m - 1) / 2n to each plug-in entropy.")
    level: float = level_setting()


class PlugIn(Estimator):
    """The plug-in MI of the joint table of discrete X and Y with the Miller-Madow correction
    (Miller 1955): I = H_MM(X) + H_MM(Y) - H_MM(X, Y), each plug-in entropy plus (m - 1) / (2 n) for
    its m occupied cells; the interval by the delta method.

    Examples
    --------
    Y is X with probability 0.8, else X + 1 (mod 4), so I = log 4 - h(0.2) = 0.89 nats:

    >>> import numpy as np
    >>> from mitool import estimators
    >>> rng = np.random.default_rng(0)
    >>> x = rng.integers(0, 4, size=2000)
    >>> y = (x + (rng.random(2000) < 0.2)) % 4
    >>> result = estimators.get("plugin").estimate(x, y)
    >>> bool(abs(result.value - 0.89) < 0.05), result.details["cells"]
    (True, 8)
    """

    name = "plugin"
    summary = "the plug-in MI of the joint table of discrete X and Y, Miller-Madow corrected"
    value_is = "an estimate, its first-order bias removed; reliable while the table's cells hold many pairs"
    cases = frozenset({"discrete"})
    Settings = PlugInSettings
    rank = 30

    def _estimate(self, x, y, z, seed, progress) -> Estimate:
        n = len(x)
        value = plugin_mi(x, y, self.settings.correction)
        ratios = pointwise_log_ratios(x, y)
        stderr = float(ratios.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
        codes_x, codes_y, joint = table_codes(x, y)
        cells = int(np.count_nonzero(np.bincount(joint)))
        notes = ()
        if cells > n / 5:
            notes = (
                f"the joint table has {cells} occupied cells for {n} pairs (fewer than 5 pairs a cell): the "
                "plug-in estimate is biased upwards there; more pairs, or fewer categories, help",
            )
        categories = {"categories_x": int(codes_x.max()) + 1, "categories_y": int(codes_y.max()) + 1}
        return Estimate.from_stderr(
            value, stderr, self.settings.level, estimator=self.name, n_pairs=n, notes=notes,
            interval="normal interval of the delta method (the sampling noise of the table's frequencies; "
            "not the bias)", details={"cells": cells, **categories},
        )  # fmt: skip


ESTIMATORS = [PlugIn]
