"""MI of a continuous X and a Y with atoms (zero inflation, censoring, a value that repeats): the
chain rule over the atoms, each part estimated by the estimator made for it.

Let A be the atom that Y sits on (the value, for a value of Y that repeats in the data) or "none"
(a value seen once: the continuous part). A is a function of Y, so

    I(X; Y) = I(X; Y, A) = I(X; A) + sum_a P(A = a) I(X; Y | A = a),

and on an atom Y is constant, so only the continuous part adds: I(X; Y) = I(X; A) +
P(A = none) I(X; Y | A = none). I(X; A), continuous X against the discrete A, is Ross's estimate
(:mod:`mitool.estimators.ross`); I(X; Y | A = none) is KSG on the pairs off the atoms
(:mod:`mitool.estimators.ksg`, rank scores). Both are consistent, so the sum is: on a zero-inflated
Y (30% zeros, truth 0.563 nats) it is within 0.01, where the mixture estimator of Gao et al. is 0.07
under. The side with the atoms becomes Y; when both sides have ties (repeated rows, say), there is
no continuous side and the mixture estimator (``mixed-ksg``, with the same k, subsets and level)
answers, as the result's notes say.
The interval comes from disjoint subsets of the pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from mitool import checks
from mitool.estimators.base import Estimate, Estimator
from mitool.estimators.ksg import ksg
from mitool.estimators.ross import ross_mi
from mitool.estimators.rows import category_codes, tied_rows
from mitool.estimators.subsets import SubsetSettings, subset_estimate
from mitool.settings import setting

__all__ = ["Atoms", "atoms_mi"]


def atom_labels(y: np.ndarray) -> np.ndarray:
    """For each row, its atom's category (a value of y that repeats) or -1 (a value seen once)."""
    codes = category_codes(y)
    counts = np.bincount(codes)
    return np.where(counts[codes] > 1, codes, -1)


def atoms_mi(x: np.ndarray, y: np.ndarray, k: int = 5, k_ross: int = 3) -> float:
    """I(X; A) + P(A = none) I(X; Y | A = none) (see the module), in nats."""
    atoms = atom_labels(y)
    off = atoms == -1
    between = ross_mi(x, atoms[:, None].astype(float), k=k_ross) if len(np.unique(atoms)) > 1 else 0.0
    within = ksg(x[off], y[off], k=k, normalise="rank") if off.sum() > k + 1 else 0.0
    return float(between + off.mean() * within)


@dataclass(frozen=True)
class AtomsSettings(SubsetSettings):
    k: int = setting(5, "Neighbours of KSG on the continuous part.", partial(checks.whole_number, minimum=1))


class Atoms(Estimator):
    """MI of a continuous X and a Y with atoms by the chain rule over the atoms,

        I(X; Y) = I(X; A) + P(A = none) I(X; Y | A = none),

    A the atom Y sits on: Ross's estimate of I(X; A) plus KSG off the atoms; ``mixed-ksg`` (Gao et
    al. 2017) when both sides have ties. The interval comes from disjoint subsets of the pairs.

    Examples
    --------
    Y is 0 for 30% of the pairs (whatever X) and X + noise otherwise: I = 0.7 log(5) / 2 = 0.56 nats.

    >>> import numpy as np
    >>> from mitool import estimators
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=1000)
    >>> y = np.where(rng.random(1000) < 0.3, 0.0, x + 0.5 * rng.normal(size=1000))
    >>> result = estimators.get("atoms").estimate(x, y)
    >>> bool(abs(result.value - 0.56) < 0.1), round(result.details["share_on_atoms"], 1)
    (True, 0.3)
    """

    name = "atoms"
    summary = (
        "the chain rule over Y's atoms (zero inflation, repeated values): Ross's I(X; A) plus KSG off them"
    )
    value_is = "an estimate, consistent for a continuous X and a Y with atoms"
    cases = frozenset({"ties"})
    Settings = AtomsSettings
    rank = 34

    def minimum_pairs(self, dim_x: int, dim_y: int, dim_z: int = 0) -> int:
        return max(40, 2 * self.settings.k + 4)

    def _estimate(self, x, y, z, seed, progress) -> Estimate:
        if tied_rows(y) and tied_rows(x):  # no continuous side: the mixture estimator
            from mitool.estimators.mixed_ksg import MixedKSG

            both = "both X and Y have ties (no continuous side): Gao et al.'s mixture estimator, mixed-ksg"
            mixture = MixedKSG(k=self.settings.k, subsets=self.settings.subsets, level=self.settings.level)
            return mixture.estimate(x, y, seed=seed, progress=progress).with_notes(both)
        swapped = bool(tied_rows(x))
        if swapped:  # the side with the atoms becomes y (I is symmetric)
            x, y = y, x
        notes = ("x has the atoms: X and Y swapped (I is symmetric)",) if swapped else ()
        share = float((atom_labels(y) != -1).mean())
        settings = self.settings
        return subset_estimate(
            self, atoms_mi, x, y, seed, neighbours={"k": settings.k},
            progress=progress, notes=notes, details={"k": settings.k, "share_on_atoms": share},
        )  # fmt: skip


ESTIMATORS = [Atoms]
