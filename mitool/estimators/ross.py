"""Ross's k-nearest-neighbour estimator for continuous X and discrete Y (Ross 2014, PLoS ONE
9:e87357; what scikit-learn's ``mutual_info_classif`` computes).

For each point i with class y_i, of the N_{y_i} points of its class: d_i is the max-norm distance in
X (standardised per coordinate) to its k-th nearest neighbour of the same class, and m_i the number
of points of any class within d_i of it (the k-th neighbour included, i itself not). Then

    I(X; Y) = psi(n) - mean_i psi(N_{y_i}) + psi(k) - mean_i psi(m_i).

A class with a single point has no neighbour of its own: its point is left out, and a note says
which classes were; a class of fewer than k + 1 points uses k = its size - 1 for its points, as
scikit-learn does. The interval comes from disjoint subsets of the pairs (:mod:`mitool.estimators.subsets`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from mitool import checks
from mitool.estimators.base import Estimate, Estimator
from mitool.estimators.neighbours import counts_within, kth_distances
from mitool.estimators.preparation import standardise
from mitool.estimators.rows import category_codes
from mitool.estimators.subsets import SubsetSettings, subset_estimate
from mitool.settings import setting

__all__ = ["Ross", "ross_mi"]


def _kept_classes(codes: np.ndarray) -> np.ndarray:
    """The rows whose class holds at least two points."""
    counts = np.bincount(codes)
    return counts[codes] >= 2


def ross_mi(x: np.ndarray, y: np.ndarray, k: int = 3) -> float:
    """Ross's estimate of I(X; Y) for continuous x (n, dx) and discrete y (n, dy) (see the module);
    points of classes seen once are left out."""
    from scipy.special import digamma

    codes = category_codes(y)
    total, kept = len(codes), _kept_classes(codes)
    x, codes = standardise(x[kept])[0], codes[kept]
    n = len(x)
    if n < 2:
        raise checks.ParameterError(
            "y", f"has no class with two points or more (a different value in each of its {total} rows: "
            "an identifier, such as a name); the MI of an identifier with anything is log n, so it says "
            "nothing: leave the column out",
        )  # fmt: skip
    radius, own_k, class_size = np.zeros(n), np.zeros(n), np.zeros(n)
    for label in np.unique(codes):
        members = np.flatnonzero(codes == label)
        neighbours = min(k, len(members) - 1)
        radius[members] = kth_distances(x[members], neighbours)
        own_k[members], class_size[members] = neighbours, len(members)
    counts = counts_within(x, radius, strict=False)
    return float(
        digamma(n) - np.mean(digamma(class_size)) + np.mean(digamma(own_k)) - np.mean(digamma(counts))
    )


@dataclass(frozen=True)
class RossSettings(SubsetSettings):
    k: int = setting(3, "Neighbours (scikit-learn's default).", partial(checks.whole_number, minimum=1))


class Ross(Estimator):
    """Ross's k-nearest-neighbour estimate for continuous X against discrete Y (Ross 2014, PLoS ONE
    9:e87357; scikit-learn's ``mutual_info_classif``),

        I(X; Y) = psi(n) - mean_i psi(N_{y_i}) + psi(k) - mean_i psi(m_i)

    (the module says what the counts are), with an interval from disjoint subsets of the pairs.

    Examples
    --------
    X uniform on [0, 1] for class 0 and on [1, 2] for class 1: X tells the class, I = log 2 = 0.69 nats.

    >>> import numpy as np
    >>> from mitool import estimators
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 2, size=1000)
    >>> result = estimators.get("ross", k=3).estimate(labels + rng.random(1000), labels)
    >>> bool(abs(result.value - 0.69) < 0.05)
    True
    """

    name = "ross"
    summary = "Ross's k-NN estimator for continuous X against discrete Y (scikit-learn's mutual_info_classif)"
    value_is = "an estimate, consistent; biased downwards in high dimension of X"
    cases = frozenset({"discrete-y", "discrete-y-high-dimension"})
    Settings = RossSettings
    rank = 31

    def minimum_pairs(self, dim_x: int, dim_y: int, dim_z: int = 0) -> int:
        return max(20, 2 * self.settings.k + 2)

    def _estimate(self, x, y, z, seed, progress) -> Estimate:
        codes = category_codes(y)
        alone = np.flatnonzero(np.bincount(codes) == 1)
        notes = ()
        if len(alone):
            labels = np.unique(y, axis=0)[alone][:5]
            listed = ", ".join(str(row.tolist() if len(row) > 1 else row[0]) for row in labels)
            notes = (
                f"{len(alone)} class(es) of y seen once ({listed}{', ...' if len(alone) > 5 else ''}) "
                "were left out: a single point has no neighbour of its class",
            )
        return subset_estimate(
            self,
            ross_mi,
            x,
            y,
            seed,
            progress=progress,
            details={"k": self.settings.k},
            neighbours={"k": self.settings.k},
            notes=notes,
        )


ESTIMATORS = [Ross]
