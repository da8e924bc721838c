"""What the estimators that train nothing share: an interval from disjoint subsets of the pairs.

Standard error by subsampling: the estimator on m disjoint random subsets of s pairs each
(s = n / m, at most 5000) gives m values v_j; since the variance of these estimators falls like
1/n, the standard error of the estimate on all n pairs is std(v) sqrt(s / n) (std(v) / sqrt(m) when
the subsets cover the data), and the interval is Student's t with m - 1 degrees of freedom (the
standard deviation of m values). It covers the sampling noise of the pairs, not the
estimator's bias. (The bootstrap would repeat points, which are zero-distance neighbours for the
k-NN estimators.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from mitool import checks
from mitool.estimators.base import Estimate, Estimator, EstimatorSettings, Progress, level_setting
from mitool.settings import setting

__all__ = ["SubsetSettings", "subsample_values", "subset_estimate"]


@dataclass(frozen=True)
class SubsetSettings(EstimatorSettings):
    """The settings every estimator with an interval from disjoint subsets has (its own add to them)."""

    subsets: int = setting(
        10, "Disjoint subsets for the standard error.", partial(checks.whole_number, minimum=2)
    )
    level: float = level_setting()


SUBSET_MAX = 5000
"""The most pairs in one subset: beyond, the subsets are a random part of the data (their spread,
scaled by sqrt(size / n), is the same estimate of the standard error at a fraction of the cost)."""


def subset_size(n: int, subsets: int) -> int:
    """Pairs per subset: n / subsets, at most :data:`SUBSET_MAX`."""
    return min(n // subsets, SUBSET_MAX)


def subsample_values(
    function: Callable[..., float],
    parts: tuple[np.ndarray, ...],
    subsets: int,
    seed: int,
    done: Callable[[int], None] | None = None,
) -> np.ndarray:
    """``function(*parts)`` on ``subsets`` disjoint random subsets of :func:`subset_size` rows each;
    ``done(j)`` after the j-th."""
    order = np.random.default_rng(seed).permutation(len(parts[0]))
    size = subset_size(len(order), subsets)
    values = []
    for rows in np.array_split(order[: size * subsets], subsets):
        values.append(function(*(part[rows] for part in parts)))
        if done is not None:
            done(len(values))
    return np.array(values)


def subset_estimate(
    estimator: Estimator,
    function: Callable[..., float],
    x: np.ndarray,
    y: np.ndarray,
    seed: int,
    z: np.ndarray | None = None,
    details: Mapping[str, Any] | None = None,
    notes: tuple[str, ...] = (),
    progress: Progress | None = None,
) -> Estimate:
    """The :class:`Estimate` of ``function(x, y[, z])`` on all pairs with the Student-t interval, at
    the estimator's ``level``, from its ``subsets`` disjoint subsets (fewer when the data are too
    small: each subset keeps at least the estimator's minimum of pairs; no interval below two). The
    subsets come first, so that ``progress(done, total, nan)`` after each, in pairs, gives an
    estimate of the time after the first. The estimate on all n pairs counts as 2 n log(n) / log(size)
    pairs of the subsets' (neighbour searches cost about n log n; at 10^6 pairs of 1 + 1 dimensions
    this foretold 14 s after the second subset, and KSG took 13 s)."""
    subsets, level = estimator.settings.subsets, estimator.settings.level
    parts = (x, y) if z is None else (x, y, z)
    needed = estimator.minimum_pairs(*(part.shape[1] for part in parts))
    used = min(subsets, len(x) // max(needed, 1))
    size = subset_size(len(x), max(used, 1))
    total = used * size + round(2 * len(x) * math.log(len(x)) / math.log(max(size, 2)))
    done = None if progress is None else (lambda subset: progress(subset * size, total, math.nan))
    if used >= 2:
        values = subsample_values(function, parts, used, seed, done)
    value = float(function(*parts))
    if progress is not None:
        progress(total, total, value)
    if used >= 2:
        stderr = float(values.std(ddof=1) * math.sqrt(size / len(x)))
        interval = (f"Student-t interval from {used} disjoint subsets (sampling noise of the pairs; not the "
                    "estimator's bias)")  # fmt: skip
    else:
        stderr, interval = math.nan, "none: too few pairs for two disjoint subsets"
    return Estimate.from_stderr(
        value, stderr, level, degrees=used - 1, interval=interval, estimator=estimator.name, n_pairs=len(x),
        notes=notes, details=details,
    )  # fmt: skip
