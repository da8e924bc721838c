"""What the estimators that train nothing share: an interval from disjoint subsets of the pairs.

Standard error by subsampling: the estimator on m disjoint random subsets of s pairs each
(s = n / m, at most 5000) gives m values v_j; since the variance of these estimators falls like
1/n, the standard error of the estimate on all n pairs is std(v) sqrt(s / n) (std(v) / sqrt(m) when
the subsets cover the data), and the interval is Student's t with m - 1 degrees of freedom (the
standard deviation of m values). It covers the sampling noise of the pairs, not the
estimator's bias. (The bootstrap would repeat points, which are zero-distance neighbours for the
k-NN estimators.)

A k-NN estimator keeps its k on the subsets only where they hold at least
:data:`PAIRS_PER_NEIGHBOUR` pairs per neighbour; on smaller subsets it takes the same share of
the pairs as neighbours, k s / n (at least 1: :func:`subset_neighbours`). With k close to s every
point's neighbourhood is nearly the whole subset and the subsets agree whatever the data: on 178
pairs (the size of scikit-learn's wine table) with k = 20 (the matrix's), subsets of 22 pairs gave
a standard error 9 to 15 times too small. Measured on correlated Gaussians (1 + 1 dimensions, rank
scores, 0.3 and 1 nats, 60 draws per cell, n = 100 to 5000, k = 3 to 20; ``python bench/ksg_subsets.py OUT``,
bench/results/ksg_subsets.json), the spread of the estimate over draws against the median standard
error given: with k kept, 0.9 to 1.3 times where s >= 10 k, 1.2 to 1.7 times at s = 4 to 7 k, 2 to
15 times at s <= 3 k; with k s / n, 0.43 to 0.96 times (an interval wider than the noise, not
narrower).
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

__all__ = [
    "PAIRS_PER_NEIGHBOUR",
    "SMALLEST_SUBSET",
    "SubsetSettings",
    "subsample_values",
    "subset_estimate",
    "subset_neighbours",
]


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


SMALLEST_SUBSET = 8
"""Where the data are too few for two subsets of the estimator's minimum, a k-NN estimator's
interval comes from subsets of at least this many pairs, its k scaled to each subset's share
(:func:`subset_neighbours`): at n = 32 four subsets of 8 pairs, where the minimum of KSG (20 pairs)
left no interval at all. The spread of the subsets' values, scaled by sqrt(size / n), then measures
the sampling noise roughly (t with few degrees of freedom widens the interval accordingly)."""

PAIRS_PER_NEIGHBOUR = 20
"""A k-NN estimator keeps its k on subsets of at least this many pairs per neighbour (see the module)."""


def subset_neighbours(neighbours: Mapping[str, int], size: int, n: int) -> dict[str, int]:
    """A k-NN estimator's numbers of neighbours by keyword (``{"k": 5, "k_max": 10}``) on a subset
    of ``size`` of the n pairs: as they are where size >= 20 times the largest
    (:data:`PAIRS_PER_NEIGHBOUR`), else each the same share of the pairs, k size / n rounded, at
    least 1 (0 stays 0: a ``k_max`` that is not used).

    >>> subset_neighbours({"k": 5}, 500, 5000), subset_neighbours({"k": 20, "k_max": 0}, 22, 178)
    ({'k': 5}, {'k': 2, 'k_max': 0})
    """
    if size >= PAIRS_PER_NEIGHBOUR * max(neighbours.values(), default=0):
        return dict(neighbours)
    return {name: max(1, round(k * size / n)) if k else 0 for name, k in neighbours.items()}


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
    neighbours: Mapping[str, int] | None = None,
    value: float | None = None,
) -> Estimate:
    """The :class:`Estimate` of ``function(x, y[, z], **neighbours)`` on all pairs (``value``, where
    the caller has computed it already) with the
    Student-t interval, at the estimator's ``level``, from its ``subsets`` disjoint subsets (fewer
    when the data are too small: each subset keeps at least the estimator's minimum of pairs; no
    interval below two). The
    subsets come first, so that ``progress(done, total, nan)`` after each, in pairs, gives an
    estimate of the time after the first. The estimate on all n pairs counts as 2 n log(n) / log(size)
    pairs of the subsets' (neighbour searches cost about n log n; at 10^6 pairs of 1 + 1 dimensions
    this foretold 14 s after the second subset, and KSG took 13 s). ``neighbours``: a k-NN
    estimator's numbers of neighbours by keyword (``{"k": 5}``), scaled on small subsets by
    :func:`subset_neighbours`."""
    subsets, level = estimator.settings.subsets, estimator.settings.level
    parts = (x, y) if z is None else (x, y, z)
    needed = estimator.minimum_pairs(*(part.shape[1] for part in parts))
    used = min(subsets, len(x) // max(needed, 1))
    few = used < 2 and bool(neighbours)  # subsets of SMALLEST_SUBSET pairs or more, k scaled down
    if few:
        used = min(subsets, len(x) // SMALLEST_SUBSET)
    size = subset_size(len(x), max(used, 1))
    rough = f" of {size} pairs each, k scaled down (few pairs: a rough measure)" if few else ""
    total = used * size + round(2 * len(x) * math.log(len(x)) / math.log(max(size, 2)))
    done = None if progress is None else (lambda subset: progress(subset * size, total, math.nan))
    neighbours = dict(neighbours or {})
    if used >= 2:
        scaled = subset_neighbours(neighbours, size, len(x))
        values = subsample_values(partial(function, **scaled), parts, used, seed, done)
    value = float(function(*parts, **neighbours)) if value is None else value
    if progress is not None:
        progress(total, total, value)
    if used >= 2:
        stderr = float(values.std(ddof=1) * math.sqrt(size / len(x)))
        interval = (f"Student-t interval from {used} disjoint subsets{rough} (sampling noise of the pairs; "
                    "not the estimator's bias)")  # fmt: skip
    else:
        stderr, interval = math.nan, "none: too few pairs for two disjoint subsets"
    return Estimate.from_stderr(
        value, stderr, level, degrees=used - 1, interval=interval, estimator=estimator.name, n_pairs=len(x),
        notes=notes, details=details,
    )  # fmt: skip
