"""What the estimators that train nothing share: an interval from disjoint subsets of the pairs,
and the count of tied rows (repeated values), which k-NN estimators of continuous data must refuse.

Standard error by subsampling: the estimator on m disjoint random subsets of n / m pairs gives m
values v_j; since the variance of these estimators falls like 1/n, the standard error of the
estimate on all n pairs is std(v) / sqrt(m), and the interval is Student's t with m - 1 degrees of
freedom (the standard deviation of m values). It covers the sampling noise of the pairs, not the
estimator's bias. (The bootstrap would repeat points, which are zero-distance neighbours for the
k-NN estimators.)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from mitool import checks
from mitool.estimators.base import Estimate, Estimator, EstimatorSettings, Progress, normal_interval
from mitool.settings import setting

__all__ = ["SubsetSettings", "refuse_ties", "subsample_values", "subset_estimate", "tied_rows"]


@dataclass(frozen=True)
class SubsetSettings(EstimatorSettings):
    """The settings every estimator with an interval from disjoint subsets has (its own add to them)."""

    subsets: int = setting(
        10, "Disjoint subsets for the standard error.", partial(checks.whole_number, minimum=2)
    )
    level: float = setting(0.95, "Confidence level of the interval.", checks.fraction)


def subsample_values(
    function: Callable[..., float],
    parts: tuple[np.ndarray, ...],
    subsets: int,
    seed: int,
    done: Callable[[int], None] | None = None,
) -> np.ndarray:
    """``function(*parts)`` on ``subsets`` disjoint random subsets of the rows; ``done(j)`` after
    the j-th."""
    order = np.random.default_rng(seed).permutation(len(parts[0]))
    values = []
    for rows in np.array_split(order, subsets):
        values.append(function(*(part[rows] for part in parts)))
        if done is not None:
            done(len(values))
    return np.array(values)


def subset_estimate(
    estimator: Estimator,
    function: Callable[..., float],
    x: np.ndarray,
    y: np.ndarray,
    subsets: int,
    seed: int,
    level: float,
    z: np.ndarray | None = None,
    details: Mapping[str, Any] | None = None,
    notes: tuple[str, ...] = (),
    progress: Progress | None = None,
) -> Estimate:
    """The :class:`Estimate` of ``function(x, y[, z])`` on all pairs with the Student-t interval from
    ``subsets`` disjoint subsets (fewer when the data are too small: each subset keeps at least the
    estimator's minimum of pairs; no interval below two subsets). The subsets come first, so that
    ``progress(done, total, nan)`` after each (the estimate on all pairs counts as much as all the
    subsets together, twice: it costs about that at n log n) gives an estimate of the time after the
    first."""
    start = time.perf_counter()
    parts = (x, y) if z is None else (x, y, z)
    needed = estimator.minimum_pairs(*(part.shape[1] for part in parts))
    used = min(subsets, len(x) // max(needed, 1))
    total = 3 * max(used, 1)
    done = None if progress is None else (lambda subset: progress(subset, total, math.nan))
    if used >= 2:
        values = subsample_values(function, parts, used, seed, done)
    value = float(function(*parts))
    if progress is not None:
        progress(total, total, value)
    if used >= 2:
        stderr = float(values.std(ddof=1) / math.sqrt(used))
        low, high = normal_interval(value, stderr, level, degrees=used - 1)
        interval = (f"Student-t interval from {used} disjoint subsets (sampling noise of the pairs; not the "
                    "estimator's bias)")  # fmt: skip
    else:
        stderr = low = high = math.nan
        interval = "none: too few pairs for two disjoint subsets"
    return Estimate(
        value=value, stderr=stderr, ci_low=low, ci_high=high, ci_level=level, interval=interval,
        estimator=estimator.name, n_pairs=len(x), seconds=time.perf_counter() - start, notes=notes,
        details=dict(details or {}),
    )  # fmt: skip


def tied_rows(*arrays: np.ndarray) -> int:
    """The most rows, over ``arrays`` (each (n, d)), that repeat an earlier row of the same array."""
    return max(len(array) - len(np.unique(array, axis=0)) for array in arrays)


def refuse_ties(estimator: str, **arrays: np.ndarray | None) -> None:
    """ParameterError naming the first of ``arrays`` (x, y, z) with rows that repeat another row:
    a k-NN estimator of continuous data cannot take them (their distances are 0)."""
    for name, array in arrays.items():
        tied = 0 if array is None else tied_rows(array)
        if tied:
            raise checks.ParameterError(
                name,
                f"has {tied} rows that repeat another row's value exactly; {estimator} assumes continuous "
                "data (its distances become 0 and its value meaningless): use estimator='mixed-ksg' for data "
                "with ties or atoms, or discrete='x'/'y'/'both' (for Z: discrete='z') for discrete variables",
            )
