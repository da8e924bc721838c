"""The k-NN estimator for discrete-continuous mixtures of Gao, Kannan, Oh & Viswanath (NeurIPS 2017):
KSG made right for data with ties or atoms (counts, zero inflation, repeated values), where plain
KSG's distances are zero and its value meaningless (-2.6 nats on Poisson counts of 0.59 nats).

On data standardised per coordinate, with rho_i the max-norm distance from point i to its k-th
nearest neighbour in the joint space:

    k_i   = k, or, where rho_i = 0 (k or more points tie with i), the number of points tied with i
    n_x,i = the number of other points within rho_i of point i in X (within: <=), n_y,i in Y
    I     = mean_i [ psi(k_i) + log n - log(n_x,i + 1) - log(n_y,i + 1) ]

It is consistent for continuous, discrete and mixed laws alike. The interval comes from disjoint
subsets of the pairs (:mod:`mitool.estimators.subsets`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from mitool import checks
from mitool.estimators.base import Estimate, Estimator
from mitool.estimators.neighbours import coincident_counts, counts_within, kth_distances
from mitool.estimators.preparation import standardise
from mitool.estimators.subsets import SubsetSettings, subset_estimate
from mitool.settings import setting

__all__ = ["MixedKSG", "mixed_ksg"]


def mixed_ksg(x: np.ndarray, y: np.ndarray, k: int = 5) -> float:
    """Gao et al.'s estimate of I(X; Y) in nats (see the module)."""
    from scipy.special import digamma

    n = len(x)
    checks.whole_number("k", k, 1, n - 1)
    x, y = standardise(x)[0], standardise(y)[0]
    joint = np.hstack([x, y])
    rho = kth_distances(joint, k)
    own_k = np.full(n, k)
    if np.any(rho == 0):  # k or more rows coincide with it: their number is its k
        own_k = np.where(rho == 0, coincident_counts(joint), k)
    count_x, count_y = counts_within(x, rho, strict=False), counts_within(y, rho, strict=False)
    return float(np.mean(digamma(own_k) + np.log(n) - np.log(count_x + 1) - np.log(count_y + 1)))


@dataclass(frozen=True)
class MixedKSGSettings(SubsetSettings):
    k: int = setting(5, "Neighbours.", partial(checks.whole_number, minimum=1))


class MixedKSG(Estimator):
    """The k-nearest-neighbour estimate of Gao, Kannan, Oh & Viswanath (NeurIPS 2017) for
    discrete-continuous mixtures: KSG made right for data with ties or atoms,

        I = mean_i [ psi(k_i) + log n - log(n_x,i + 1) - log(n_y,i + 1) ]

    (the module says what the counts are), consistent for continuous, discrete and mixed laws alike,
    with an interval from disjoint subsets of the pairs.

    Examples
    --------
    Discrete X and Y: Y is X with probability 0.8, else X + 1 (mod 4); I = 0.89 nats.

    >>> import numpy as np
    >>> from mitool import estimators
    >>> rng = np.random.default_rng(0)
    >>> x = rng.integers(0, 4, size=2000)
    >>> result = estimators.get("mixed-ksg").estimate(x, (x + (rng.random(2000) < 0.2)) % 4)
    >>> bool(abs(result.value - 0.89) < 0.1)
    True
    """

    name = "mixed-ksg"
    summary = "Gao et al.'s k-NN estimator for discrete-continuous mixtures (data with ties or atoms)"
    value_is = "an estimate, consistent for continuous, discrete and mixed data"
    cases = frozenset(
        {"continuous", "low-dimension", "surface", "discrete", "discrete-y", "discrete-y-high-dimension",
         "ties"}
    )  # fmt: skip
    Settings = MixedKSGSettings
    rank = 35

    def minimum_pairs(self, dim_x: int, dim_y: int, dim_z: int = 0) -> int:
        return max(20, self.settings.k + 2)

    def _estimate(self, x, y, z, seed, progress) -> Estimate:
        return subset_estimate(
            self,
            mixed_ksg,
            x,
            y,
            seed,
            progress=progress,
            details={"k": self.settings.k},
            neighbours={"k": self.settings.k},
        )


ESTIMATORS = [MixedKSG]
