"""KSG: the k-nearest-neighbour estimators of Kraskov, Stoegbauer & Grassberger (2004).

On data standardised per coordinate, with eps_i the max-norm distance from point i to its k-th
nearest neighbour in the joint space (x, y), and n_x(i), n_y(i) the numbers of other points
strictly within eps_i of point i in the x and in the y space, estimator I (``variant=1``) is

    I = psi(k) + psi(n) - mean_i [psi(n_x(i) + 1) + psi(n_y(i) + 1)].

Estimator II (``variant=2``) lets each space have its own side: eps_i^x and eps_i^y are the
distances in the x and in the y space from point i to the farthest of its k joint neighbours (the
smallest hyper-rectangle centred on i that holds them), n_x(i), n_y(i) count the other points
within them (at least k), and

    I = psi(k) - 1/k + psi(n) - mean_i [psi(n_x(i)) + psi(n_y(i))].

Where the density is thin in one direction, as on the sheets of bmi's waves, a cube as wide as the
widest side takes in points of other sheets that a rectangle leaves out: on bmi's own samples of its
17 tasks of 3 coordinates or fewer (n = 5000, seeds 3 and 4, k by Lepski's rule) the mean absolute
error was 0.022 with estimator I and 0.018 with II, waves -0.202 and -0.163 nats
(docs/mi-benchmark.md, "Waves: KSG's second estimator"); the default for such data takes II.

It is consistent for any distribution with a density, but biased downwards in high dimension and
at high MI (its neighbourhoods are too large to resolve the dependence). It assumes no two points
coincide: on data with ties (counts, repeated rows) its distances are zero and its value is
meaningless (-2.6 nats on Poisson counts of 0.59 nats), so it refuses such data and points to the
estimator for them, ``mixed-ksg``. With ``k_max`` > k it is an ensemble over k: the mean of the
estimates for k .. k_max, from one computation of the distances. With ``adapt_k`` (the default's
setting for 3 dimensions or fewer) k is lowered by Lepski's rule (:func:`adapted_k`) where a smaller
k's estimate is higher by more than its noise: there the neighbourhoods of k are wider than the
structure of the density (bmi's waves: -0.59 nats at k = 5, -0.20 at k = 1).

No estimate can exceed psi(n) - psi(k) (every count is at least k - 1; estimator II's at least k,
its ceiling psi(n) - psi(k) - 1/k): that is KSG's ceiling
(7.70 nats at n = 10 000, k = 5), and it falls short of the MI well before it. Measured on
correlated Gaussians, 1 + 1 dimensions, n = 10 000, rank scores: truth 5 -> 5.03, 6 -> 5.93,
8 -> 7.15, 10 -> 7.45 (docs/mi-benchmark.md, "Strong dependence"). An estimate within
:func:`saturation_gap` of the ceiling (with one coordinate a side measured by n and k, from
n = 100 to 10 000 and k = 3 to 20: 0.65 to 2 nats; 2.5 in more dimensions) is reported as a lower
bound, its interval open above (``details["saturating"]``).

The interval: the estimator on m disjoint subsets of n / m pairs (the bootstrap's repeated points
would be zero-distance neighbours) gives m values v_j, and the standard error of the estimate on
all n pairs is std(v) / sqrt(m), since its variance falls like 1/n: the sampling noise of the
pairs, not the estimator's bias.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from mitool import checks
from mitool.estimators.base import UNCAPPED_ADVICE, Estimate, Estimator, setting, standard_errors_above_zero
from mitool.estimators.neighbours import joint_neighbours
from mitool.estimators.preparation import PREPARATIONS
from mitool.estimators.rows import refuse_ties
from mitool.estimators.subsets import SubsetSettings, subset_estimate

__all__ = [
    "KSG",
    "SATURATION_GAP",
    "PLANE_GAPS",
    "PLANE_GAPS_II",
    "SATURATION_GAP_PLANE",
    "KSGSettings",
    "ksg",
    "ADAPT_Z",
    "adapted_k",
    "ksg_ceiling",
    "ksg_point_values",
    "VARIANTS",
    "saturation_gap",
]

SATURATION_GAP = 2.5
"""A KSG estimate above its ceiling psi(n) - psi(k) minus this many nats falls short of the MI (see
the module) and is reported as a lower bound; with one coordinate a side,
:data:`SATURATION_GAP_PLANE` instead."""

SATURATION_GAP_PLANE = 2.0
"""The gap for one coordinate a side where n or k lies outside the measured range of
:data:`PLANE_GAPS`: the largest gap measured there."""

PLANE_GAPS: dict[tuple[int, int], float] = {
    (100, 3): 1.75, (100, 5): 2.0, (100, 10): 1.95, (100, 20): 1.65,
    (178, 3): 1.7, (178, 5): 1.6, (178, 10): 1.75, (178, 20): 1.75,
    (300, 3): 1.3, (300, 5): 1.55, (300, 10): 1.35, (300, 20): 1.55,
    (1000, 3): 1.35, (1000, 5): 0.95, (1000, 10): 1.05, (1000, 20): 1.25,
    (3000, 3): 0.8, (3000, 5): 1.0, (3000, 10): 1.1, (3000, 20): 1.3,
    (10000, 3): 0.9, (10000, 5): 1.1, (10000, 10): 0.65, (10000, 20): 0.75,
}  # fmt: skip
"""The gap by (n, k) with one coordinate a side, measured (``python bench/ksg_saturation.py
100,178,300,1000,3000,10000 3,5,10,20 OUT``, bench/results/ksg_saturation.json; the test suite
recomputes this table from that file): on correlated Gaussians with truths from 0.25 to 8 nats,
C - m + 3 s rounded up to 0.05 nats, where C = psi(n) - psi(k), m is the mean estimate at the last
truth within max(0.1 nats, 10%) and s one estimate's standard deviation there. An estimate above
C minus the gap is at least as high as estimates of truths where KSG already falls short (the mean
estimate rises with the truth), so it is reported as a lower bound. One gap for every (n, k), the
largest (2.0), put the threshold at 0.21 nats for n = 178 and k = 20 and read 10 column pairs of
scikit-learn's wine data as lower bounds in ``mitool matrix``; its own gap, 1.75, puts it at 0.46
and reads 2."""


def _bracket(value: int, grid: list[int]) -> list[int] | None:
    """The grid points on either side of ``value`` (one where it is on the grid), or None outside."""
    if not grid[0] <= value <= grid[-1]:
        return None
    if value in grid:
        return [value]
    upper = next(point for point in grid if point > value)
    return [grid[grid.index(upper) - 1], upper]


PLANE_GAPS_II: dict[tuple[int, int], float] = {
    (100, 3): 1.4, (100, 5): 1.8, (300, 3): 1.05, (300, 5): 1.35, (1000, 3): 1.1, (1000, 5): 0.75,
    (3000, 3): 1.1, (3000, 5): 0.8, (10000, 3): 0.65, (10000, 5): 0.9,
}  # fmt: skip
"""Estimator II's own gaps, measured as :data:`PLANE_GAPS` against its own ceiling psi(n) - psi(k)
- 1/k (``python bench/ksg_saturation.py 100,300,1000,3000,10000 3,5
bench/results/ksg_saturation_ii.json 2``): smaller than estimator I's at every (n, k) of this grid
but (3000, 3), 1.1 against 0.8. :func:`saturation_gap` for estimator II takes the larger of the
two tables' gaps."""


def _grid_gap(gaps: dict[tuple[int, int], float], n: int, k: int, k_max: int) -> float | None:
    """The largest entry of ``gaps`` at the grid points around n and k .. k_max (above the largest
    n, those of the two largest); None outside the grid."""
    sizes = sorted({size for size, _ in gaps})
    ks = sorted({neighbours for _, neighbours in gaps})
    near_n = _bracket(n, sizes) if n <= sizes[-1] else sizes[-2:]
    near_k = [_bracket(k, ks), _bracket(max(k, k_max), ks)]
    if near_n is None or None in near_k:
        return None
    near_k_all = [point for point in ks if min(near_k[0]) <= point <= max(near_k[1])]
    return max(gaps[size, neighbours] for size in near_n for neighbours in near_k_all)


def saturation_gap(
    dims: int, n: int | None = None, k: int | None = None, k_max: int = 0, variant: int = 1
) -> float:
    """How far below its ceiling (:func:`ksg_ceiling`) a KSG estimate on ``dims`` coordinates in all
    (x and y) is reported as a lower bound.

    With one coordinate a side and n, k (to k_max, an ensemble over k) within the measured range,
    the largest :data:`PLANE_GAPS` entry of the grid points around them (above n = 10 000 those of
    n = 3000 and 10 000), for estimator II (``variant=2``) the larger of that and the same from
    :data:`PLANE_GAPS_II` where n and k lie within its grid; else :data:`SATURATION_GAP_PLANE`
    (1 + 1) or :data:`SATURATION_GAP` (not measured at small n in more dimensions, where the
    estimator's bias from the dimension comes well before its ceiling anyway).

    >>> saturation_gap(2, 178, 20), saturation_gap(2, 500, 4), saturation_gap(2, 50, 5), saturation_gap(4)
    (1.75, 1.55, 2.0, 2.5)
    >>> saturation_gap(2, 3000, 3), saturation_gap(2, 3000, 3, variant=2)
    (0.8, 1.1)
    """
    if dims > 2:
        return SATURATION_GAP
    if n is None or k is None:
        return SATURATION_GAP_PLANE
    gap = _grid_gap(PLANE_GAPS, n, k, k_max)
    if gap is None:
        return SATURATION_GAP_PLANE
    own = _grid_gap(PLANE_GAPS_II, n, k, k_max) if variant == 2 else None
    return gap if own is None else max(gap, own)


def ksg_ceiling(n: int, k: int, k_max: int = 0, variant: int = 1) -> float:
    """The largest value KSG can give on n pairs: psi(n) - psi(k), for estimator II psi(n) - psi(k)
    - 1/k (its mean over k .. k_max)."""
    from scipy.special import digamma

    ks = np.arange(k, max(k, k_max) + 1)
    return float(np.mean(digamma(n) - digamma(ks) - (1.0 / ks if variant == 2 else 0.0)))


VARIANTS = (1, 2)
"""KSG's estimators: 1, hypercubes (estimator I); 2, hyper-rectangles (estimator II). See the module."""


def _neighbours(x: np.ndarray, y: np.ndarray, k_max: int, method: str, normalise: str) -> Any:
    """The joint neighbours (:func:`~mitool.estimators.neighbours.joint_neighbours`) of the columns
    prepared by ``normalise``, up to ``k_max``."""
    prepare = PREPARATIONS[checks.choice("normalise", normalise, PREPARATIONS)]
    return joint_neighbours([prepare(x)[0], prepare(y)[0]], k_max, method)


def _counts(
    x: np.ndarray, y: np.ndarray, ks: Sequence[int], method: str, normalise: str, variant: int = 1
) -> list[list[np.ndarray]]:
    """For each k of ``ks`` the counts n_x(i), n_y(i) of estimator ``variant`` on each column
    prepared by ``normalise``."""
    checks.whole_number("variant", variant, min(VARIANTS), max(VARIANTS))
    return _neighbours(x, y, max(ks), method, normalise).counts(ks, rectangles=variant == 2)


def _form(k: int, variant: int) -> tuple[float, int]:
    """Estimator ``variant``'s terms at k: psi(k) (estimator II: psi(k) - 1/k) and what each count is
    raised by inside psi (1; estimator II: 0)."""
    from scipy.special import digamma

    return (digamma(k) - 1.0 / k, 0) if variant == 2 else (digamma(k), 1)


def _point_values(
    ks: Sequence[int], counts: Sequence[Sequence[np.ndarray]], n: int, variant: int = 1
) -> np.ndarray:
    """Each point's term of KSG (estimator ``variant``) for each k of ``ks`` from their counts,
    shape (len(ks), n): psi(k) + psi(n) - psi(n_x(i) + 1) - psi(n_y(i) + 1), or for estimator II
    psi(k) - 1/k + psi(n) - psi(n_x(i)) - psi(n_y(i))."""
    from scipy.special import digamma

    rows = []
    for k, (count_x, count_y) in zip(ks, counts, strict=True):
        head, raised = _form(k, variant)
        rows.append(head + digamma(n) - digamma(count_x + raised) - digamma(count_y + raised))
    return np.stack(rows)


def _value(k: int, counts: Sequence[np.ndarray], n: int, variant: int = 1) -> float:
    """KSG at k from its counts (n_x, n_y): psi(k) + psi(n) - mean_i[psi(n_x(i) + 1) + psi(n_y(i) + 1)],
    or for estimator II psi(k) - 1/k + psi(n) - mean_i[psi(n_x(i)) + psi(n_y(i))] (the mean taken
    once, not of :func:`_point_values`: the same number to the bit as the other k-NN code's)."""
    from scipy.special import digamma

    count_x, count_y = counts
    head, raised = _form(k, variant)
    return float(head + digamma(n) - np.mean(digamma(count_x + raised) + digamma(count_y + raised)))


def ksg_point_values(
    x: np.ndarray,
    y: np.ndarray,
    ks: Sequence[int],
    method: str = "auto",
    normalise: str = "standard",
    variant: int = 1,
) -> np.ndarray:
    """Each point's term of KSG (estimator ``variant``) for each k of ``ks``, shape (len(ks), n):
    psi(k) + psi(n) - psi(n_x(i) + 1) - psi(n_y(i) + 1) (estimator II: psi(k) - 1/k + psi(n) -
    psi(n_x(i)) - psi(n_y(i))), on each column prepared by ``normalise`` (see the module); KSG at k
    is the mean of its row (up to rounding). The distances are computed once for all k."""
    return _point_values(ks, _counts(x, y, ks, method, normalise, variant), len(x), variant)


def ksg(
    x: np.ndarray,
    y: np.ndarray,
    k: int = 5,
    method: str = "auto",
    k_max: int = 0,
    normalise: str = "standard",
    variant: int = 1,
) -> float:
    """KSG estimator I (``variant=2``: II) of I(X; Y) in nats on each column standardised, or with
    ``normalise="rank"`` replaced by the normal scores of its ranks (see the module):
    psi(k) + psi(n) - mean_i[psi(n_x(i) + 1) + psi(n_y(i) + 1)]; with ``k_max`` > k the mean over
    k .. k_max."""
    n = len(x)
    checks.whole_number("k", k, 1, n - 1)
    checks.whole_number("k_max", k_max, 0, n - 1)
    if 0 < k_max < k:
        raise checks.ParameterError("k_max", f"must be 0 (k alone) or at least k = {k}, got {k_max}")
    ks = range(k, max(k, k_max) + 1)
    counts = _counts(x, y, ks, method, normalise, variant)
    return float(
        np.mean([_value(neighbours, pair, n, variant) for neighbours, pair in zip(ks, counts, strict=True)])
    )


ADAPT_Z = 6.0
"""Lepski's rule for k (:func:`adapted_k`): a smaller k's estimate departs from a larger one's when it
exceeds it by more than this many standard errors of their pointwise difference. Neighbouring points
share neighbours, so that naive standard error is too small; on pairs where KSG has no bias at any k
the largest departure from k = 5 of k = 1 .. 4 stayed below 6 in 648 data sets (correlated Gaussians,
Student-t with 3 degrees of freedom and uniform copulas; 1 + 1 and 2 + 1 dimensions; correlations 0,
0.6 and 0.95; n = 300, 1000 and 5000; 12 seeds each: at most 5.7, on 2 + 1 dimensions, correlation
0.95, n = 300). On bmi's own samples of the 14 tasks of 3 coordinates or fewer in its two suites
it lowered k on one, the waves (2 + 1 dimensions, 1.31 nats, whose sheets lie closer than the
neighbourhoods of k = 5): 23 and 24 at n = 5000, 12 and 14 at n = 1000, and k = 1 took the error
from -0.59 to -0.20 at n = 5000 and from -1.04 to -0.51 at n = 1000 (``python bench/ksg_adaptive_k.py
bench/results/ksg_adaptive_k.json``)."""


def adapted_k(values: np.ndarray, z: float = ADAPT_Z) -> tuple[int, float]:
    """Lepski's rule on KSG's pointwise values for k_1 < ... < k_m (rows of ``values``, from
    :func:`ksg_point_values`): the largest j whose estimate no smaller k_i exceeds by more than ``z``
    standard errors of their pointwise difference (KSG's neighbourhoods blur the dependence, so a
    larger k errs low; below k_j the bias no longer shows above the noise). Returns j and the largest
    departure at k_m, in standard errors (0 where there is no smaller k).

    Pointwise values for k = 1, 2, 3, that at k = 1 higher by 1 nat on average:

    >>> values = np.random.default_rng(0).normal(size=(3, 1000)) + [[1.0], [0.0], [0.0]]
    >>> adapted_k(values)[0], adapted_k(values[1:])[0]
    (0, 1)
    """

    def departures(j: int) -> np.ndarray:
        return standard_errors_above_zero(values[:j] - values[j])

    last = len(values) - 1
    largest = float(departures(last).max()) if last else 0.0
    if largest <= z:
        return last, largest
    return next((j for j in range(last - 1, 0, -1) if departures(j).max() <= z), 0), largest


@dataclass(frozen=True)
class KSGSettings(SubsetSettings):
    k: int = setting(5, "Neighbours.", partial(checks.whole_number, minimum=1))
    k_max: int = setting(
        0,
        "Above k: the mean of the estimates for k .. k_max (0: k alone).",
        partial(checks.whole_number, minimum=0),
    )
    normalise: str = setting(
        "standard",
        "Each coordinate standardised (standard), or replaced by the normal scores of its ranks (rank).",
        lambda name, value: checks.choice(name, value, PREPARATIONS),
    )  # fmt: skip
    variant: int = setting(
        1, "KSG's estimator: 1, hypercubes in the joint space; 2, each space its own side "
        "(hyper-rectangles), less blurred where the density is thin in one direction.",
        partial(checks.whole_number, minimum=min(VARIANTS), maximum=max(VARIANTS)),
    )  # fmt: skip
    adapt_k: bool = setting(
        False, f"Lower k, down to 1, where a smaller k's estimate exceeds it by more than {ADAPT_Z:g} "
        "standard errors of their pointwise difference (Lepski's rule: KSG's neighbourhoods blur "
        "dependence that changes within them; read on estimator I's values for either variant).",
    )  # fmt: skip


class KSG(Estimator):
    """KSG: the k-nearest-neighbour estimate of I(X; Y) of Kraskov, Stoegbauer & Grassberger (2004),
    estimator I, on standardised (or rank-scored) data,

        I = psi(k) + psi(n) - mean_i [psi(n_x(i) + 1) + psi(n_y(i) + 1)],

    or with ``variant=2`` estimator II, psi(k) - 1/k + psi(n) - mean_i [psi(n_x(i)) + psi(n_y(i))]
    (the module says what the counts are), with a Student-t interval from disjoint subsets of the
    pairs. It refuses data with ties, which are for ``mixed-ksg`` or ``atoms``.

    Examples
    --------
    An increasing map of Y (sinh) leaves the MI at log(5) / 2 = 0.80 nats; on rank scores KSG sees
    through it:

    >>> import numpy as np
    >>> from mitool import estimators
    >>> x, noise = np.random.default_rng(0).normal(size=(2, 1000))
    >>> result = estimators.get("ksg", k=5, normalise="rank").estimate(x, np.sinh(x + 0.5 * noise))
    >>> bool(abs(result.value - 0.80) < 0.1), result.details["k"]
    (True, 5)

    Estimator II on the same pairs:

    >>> second = estimators.get("ksg", k=5, normalise="rank", variant=2).estimate(x, np.sinh(x + 0.5 * noise))
    >>> bool(abs(second.value - 0.80) < 0.1), second.details["variant"]
    (True, 2)
    """

    name = "ksg"
    summary = "KSG nearest neighbours (estimator I, or II with variant=2; max-norm, standardised data)"
    value_is = "an estimate, biased downwards in high dimension and at high MI"
    cases = frozenset({"continuous", "low-dimension", "surface"})
    Settings = KSGSettings
    rank = 10

    def minimum_pairs(self, dim_x: int, dim_y: int, dim_z: int = 0) -> int:
        return max(20, self.settings.k_max + 2, self.settings.k + 2)

    def _estimate(self, x, y, z, seed, progress) -> Estimate:
        refuse_ties("KSG", x=x, y=y)
        settings = self.settings
        k, value, notes, adapted = settings.k, None, (), {}
        if settings.adapt_k:
            if settings.k_max:
                raise checks.ParameterError(
                    "adapt_k", f"needs {{=k_max}} 0 (one k to adapt), got {settings.k_max}", ("k_max",)
                )
            k, value, notes, adapted = self._adapted_k(x, y)
        ceiling = ksg_ceiling(len(x), k, settings.k_max, settings.variant)
        result = subset_estimate(
            self, partial(ksg, normalise=settings.normalise, variant=settings.variant), x, y, seed,
            progress=progress, neighbours={"k": k, "k_max": settings.k_max}, notes=notes,
            details={"k": k, "k_max": settings.k_max, "ceiling": ceiling, "variant": settings.variant,
                     **adapted},
            value=value,
        )  # fmt: skip
        gap = saturation_gap(x.shape[1] + y.shape[1], len(x), k, settings.k_max, settings.variant)
        saturating = result.value >= ceiling - gap
        if not saturating:
            return result.with_notes(saturating=False)
        formula = "psi(n) - psi(k)" + (" - 1/k" if settings.variant == 2 else "")
        return result.as_lower_bound(f"KSG cannot exceed {formula} = {ceiling:.4f} nats").with_notes(
            f"near the ceiling: KSG cannot exceed {formula} = {ceiling:.4f} nats on {len(x)} pairs, "
            f"and within {gap:g} nats of it it falls short of the MI (k-NN estimators need about "
            f"e^I pairs), so this is a lower bound; {UNCAPPED_ADVICE}",
            saturating=True,
        )  # fmt: skip

    def _adapted_k(
        self, x: np.ndarray, y: np.ndarray
    ) -> tuple[int, float, tuple[str, ...], dict[str, object]]:
        """k by Lepski's rule (:func:`adapted_k`) over 1 .. k: the k, KSG's value at it on all pairs
        (from the same counts), a note where k is lowered, and the details (the k asked for, the
        largest departure from it in standard errors). The rule reads estimator I's pointwise
        values whichever the ``variant``: its threshold, :data:`ADAPT_Z`, was set on them, and
        estimator II's k = 1 is the noisier (on bmi's waves at n = 1000 its departure from k = 2
        stayed under the threshold where estimator I's passed it, and II at k = 2 was 0.2 nats
        lower than at k = 1)."""
        asked, n, variant = self.settings.k, len(x), self.settings.variant
        ks = list(range(1, asked + 1))
        neighbours = _neighbours(x, y, asked, "auto", self.settings.normalise)
        counts = neighbours.counts(ks)
        values = _point_values(ks, counts, n)
        chosen, departure = adapted_k(values)
        if variant != 1:  # the same neighbours, counted in each space's own side
            counts[chosen] = neighbours.counts([ks[chosen]], rectangles=True)[0]
        value = _value(ks[chosen], counts[chosen], n, variant)
        details = {"k_asked": asked, "k_departure": departure}
        if ks[chosen] == asked:
            return asked, value, (), details
        means = values.mean(axis=1)
        note = (
            f"k lowered from {asked} to {ks[chosen]}: the estimate at k = {ks[chosen]} exceeds that at "
            f"k = {asked} by {means[chosen] - means[-1]:.4f} nats ({departure:.0f} standard errors), so "
            f"the neighbourhoods of k = {asked} blur the dependence (Lepski's rule, adapt_k"
            + (", on estimator I's values)" if variant != 1 else ")")
        )
        return ks[chosen], value, (note,), details


ESTIMATORS = [KSG]
