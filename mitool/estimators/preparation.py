"""How the pairs are cut and prepared before a critic sees them (numpy only).

* :func:`split_pairs`: a seeded shuffle cut into a fit part (the critic trains on it), a
  validation part (it chooses the critic's step) and a test part (it gives the estimate);
  :func:`fold_splits` cuts the pairs into k folds instead, each fold the test part of one split
  (cross-fitting: every pair gives the estimate once).
* :func:`normal_scores` (rank normal scores: Phi^-1 of a value's rank among the training rows, the
  ``"rank"`` of the estimators' ``normalise``) and :func:`standardise` (z-scores): each coordinate
  mapped by a function fitted on the training rows; both are increasing per coordinate, so the MI
  does not change (:data:`PREPARATIONS`). "rank" here is a value's place in sorted order, not a
  listing order (:attr:`mitool.estimators.base.Estimator.rank`) or a process's rank.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mitool import checks

__all__ = [
    "PREPARATIONS",
    "VALIDATION_MAX",
    "Split",
    "fold_sizes",
    "fold_splits",
    "normal_scores",
    "part_sizes",
    "quantile_scores",
    "split_pairs",
    "standardise",
    "validation_size",
]


@dataclass(frozen=True)
class Split:
    """Row indices of the fit, validation and test parts."""

    fit: np.ndarray
    validation: np.ndarray
    test: np.ndarray

    @property
    def train(self) -> np.ndarray:
        """The rows that may shape the critic: fit and validation."""
        return np.concatenate([self.fit, self.validation])


VALIDATION_MAX = 16384
"""The most pairs that score the critic for early stopping (scored every few steps: at 10^6 pairs,
15% of the training pairs would cost more than the training); the rest of them train."""


def validation_size(n_train: int, validation_fraction: float) -> int:
    """``validation_fraction`` of the training pairs, at most :data:`VALIDATION_MAX`."""
    return min(int(round(n_train * validation_fraction)), VALIDATION_MAX)


def part_sizes(n: int, test_fraction: float, validation_fraction: float) -> tuple[int, int, int]:
    """(fit, validation, test) sizes: ``test_fraction`` of all pairs held out, then
    ``validation_fraction`` of the rest (:func:`validation_size`)."""
    n_test = int(round(n * test_fraction))
    n_train = n - n_test
    n_validation = validation_size(n_train, validation_fraction)
    return n_train - n_validation, n_validation, n_test


def split_pairs(n: int, test_fraction: float, validation_fraction: float, seed: int) -> Split:
    """A seeded shuffle of n pairs cut into fit, validation and test parts (:func:`part_sizes`)."""
    n_fit, n_validation, _ = part_sizes(n, test_fraction, validation_fraction)
    order = np.random.default_rng(seed).permutation(n)
    return Split(order[:n_fit], order[n_fit : n_fit + n_validation], order[n_fit + n_validation :])


def fold_sizes(n: int, folds: int, validation_fraction: float) -> list[tuple[int, int, int]]:
    """(fit, validation, test) sizes of each split of :func:`fold_splits` (no split when ``folds``
    is more than n)."""
    if folds > n:
        return []
    sizes = []
    for n_test in (len(part) for part in np.array_split(np.arange(n), folds)):
        n_validation = validation_size(n - n_test, validation_fraction)
        sizes.append((n - n_test - n_validation, n_validation, n_test))
    return sizes


def fold_splits(n: int, folds: int, validation_fraction: float, seed: int) -> list[Split]:
    """k-fold cross-fitting: a seeded shuffle of n pairs cut into ``folds`` parts; split j tests
    on part j and trains on the others, ``validation_fraction`` of which choose the step
    (:func:`fold_sizes`). Every pair is in exactly one test part."""
    checks.whole_number("folds", folds, 2, n)
    order = np.random.default_rng(seed).permutation(n)
    parts = np.array_split(order, folds)
    splits = []
    for index, test in enumerate(parts):
        train = np.concatenate([part for other, part in enumerate(parts) if other != index])
        n_validation = validation_size(len(train), validation_fraction)
        splits.append(Split(train[n_validation:], train[:n_validation], test))
    return splits


def standardise(train: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    """``train`` and ``others`` shifted and scaled per column by ``train``'s mean and standard
    deviation (ddof 0; a constant column is only shifted)."""
    mean, scale = train.mean(axis=0), train.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    return [(array - mean) / scale for array in (train, *others)]


def normal_scores(train: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    """Each column of ``train`` and ``others`` through the training column's empirical CDF and the
    normal quantile: z = Phi^-1(F(v)), with F linear between the sorted training values at levels
    (i + 1/2) / n and held at the end levels beyond them. A strictly increasing map per
    coordinate within the training range (ties and the few values beyond it are merged), so the MI
    is unchanged; the marginals become standard normal, which undoes monotone distortions of the
    coordinates and tames long tails."""
    from scipy.special import ndtri

    count = len(train)
    levels = (np.arange(count) + 0.5) / count
    ordered = np.sort(train, axis=0)
    return [
        np.stack(
            [ndtri(np.interp(array[:, j], ordered[:, j], levels)) for j in range(train.shape[1])], axis=1
        )
        for array in (train, *others)
    ]


QUANTILE_KNOTS = 1024
"""The knots of :func:`quantile_scores`: the training column's quantiles at this many levels."""


def quantile_scores(train: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    """As :func:`normal_scores`, z = Phi^-1(F(v)), but with F linear between :data:`QUANTILE_KNOTS`
    quantiles of the training column (its minimum and maximum among them, at levels 1/2n and
    1 - 1/2n) instead of between every training value: within a knot interval the map is linear, so
    two close values keep their difference in proportion, where rank scores turn it into a whole
    step of rank (one rank apart at least, or none). It matters at high MI: 1 + 1 dimensions of
    10 nats, n = 10 000: the flow estimate on rank scores 8.63, on these 9.70."""
    from scipy.special import ndtri

    count = len(train)
    probabilities = np.linspace(0.0, 1.0, min(QUANTILE_KNOTS, count))
    levels = (probabilities * (count - 1) + 0.5) / count
    knots = np.quantile(train, probabilities, axis=0)
    scores = []
    for array in (train, *others):
        columns = []
        for j in range(train.shape[1]):
            values, places = np.unique(knots[:, j], return_index=True)  # knots of tied values merged
            columns.append(ndtri(np.interp(array[:, j], values, levels[places])))
        scores.append(np.stack(columns, axis=1))
    return scores


PREPARATIONS: dict[str, Callable[..., list[np.ndarray]]] = {
    "standard": standardise, "rank": normal_scores, "quantile": quantile_scores,
}  # fmt: skip
"""How the coordinates are prepared before training: each is increasing per coordinate and fitted
on the training rows only."""
