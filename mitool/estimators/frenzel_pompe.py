"""The k-nearest-neighbour estimator of conditional MI of Frenzel & Pompe (2007), KSG's scheme
applied to I(X; Y | Z).

On data standardised per coordinate, with eps_i the max-norm distance from point i to its k-th
nearest neighbour in the joint space (x, y, z), and n_xz(i), n_yz(i), n_z(i) the numbers of other
points strictly within eps_i of point i in the (x, z), (y, z) and z spaces,

    I(X; Y | Z) = psi(k) - mean_i [ psi(n_xz(i) + 1) + psi(n_yz(i) + 1) - psi(n_z(i) + 1) ].

Consistent for continuous laws; biased in high dimension, where the neighbourhoods grow. The
interval comes from disjoint subsets of the pairs (:mod:`mitool.estimators.subsets`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from mitool import checks
from mitool.estimators.base import Estimate, Estimator
from mitool.estimators.neighbours import counts_within, kth_distances
from mitool.estimators.preparation import standardise
from mitool.estimators.rows import refuse_ties
from mitool.estimators.subsets import SubsetSettings, subset_estimate
from mitool.settings import setting

__all__ = ["FrenzelPompe", "frenzel_pompe"]


def frenzel_pompe(x: np.ndarray, y: np.ndarray, z: np.ndarray, k: int = 5) -> float:
    """The Frenzel-Pompe estimate of I(X; Y | Z) in nats (see the module)."""
    from scipy.special import digamma

    n = len(x)
    checks.whole_number("k", k, 1, n - 1)
    x, y, z = (standardise(part)[0] for part in (x, y, z))
    radius = kth_distances(np.hstack([x, y, z]), k)

    def within(points: np.ndarray) -> np.ndarray:
        return counts_within(points, radius)  # strictly within the k-th neighbour's distance

    count_xz, count_yz, count_z = within(np.hstack([x, z])), within(np.hstack([y, z])), within(z)
    return float(digamma(k) - np.mean(digamma(count_xz + 1) + digamma(count_yz + 1) - digamma(count_z + 1)))


@dataclass(frozen=True)
class FrenzelPompeSettings(SubsetSettings):
    k: int = setting(5, "Neighbours.", partial(checks.whole_number, minimum=1))


class FrenzelPompe(Estimator):
    """The k-nearest-neighbour estimate of conditional MI of Frenzel & Pompe (2007), KSG's scheme
    applied to I(X; Y | Z),

        I(X; Y | Z) = psi(k) - mean_i [ psi(n_xz(i) + 1) + psi(n_yz(i) + 1) - psi(n_z(i) + 1) ]

    (the module says what the counts are), with an interval from disjoint subsets of the pairs.

    Examples
    --------
    X = Z + e1 and Y = X + e2: given Z, X and Y correlate by 1 / sqrt(2), I(X; Y | Z) = log(2) / 2.

    >>> import numpy as np
    >>> from mitool import estimators
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=1000)
    >>> x = z + rng.normal(size=1000)
    >>> result = estimators.get("frenzel-pompe").estimate(x, x + rng.normal(size=1000), z)
    >>> bool(abs(result.value - 0.35) < 0.1)
    True
    """

    name = "frenzel-pompe"
    summary = "Frenzel & Pompe's k-NN estimator of conditional MI I(X; Y | Z) (KSG's scheme)"
    value_is = "an estimate of I(X; Y | Z), consistent; biased in high dimension"
    cases = frozenset({"conditional"})
    Settings = FrenzelPompeSettings
    rank = 40

    def minimum_pairs(self, dim_x: int, dim_y: int, dim_z: int = 0) -> int:
        return max(20, self.settings.k + 2)

    def _estimate(self, x, y, z, seed, progress) -> Estimate:
        if z is None:
            raise checks.ParameterError("z", "must be given: frenzel-pompe estimates I(X; Y | Z)")
        refuse_ties("frenzel-pompe", x=x, y=y, z=z)
        return subset_estimate(
            self,
            frenzel_pompe,
            x,
            y,
            seed,
            z=z,
            progress=progress,
            details={"k": self.settings.k},
            neighbours={"k": self.settings.k},
        )


ESTIMATORS = [FrenzelPompe]
