"""The tests' statistics, with what the permutations leave fixed computed once.

**The statistic** is the MI estimate T = I^(X; Y) that :func:`mitool.estimate` would make of the
data, prepared exactly as it prepares them (:func:`mitool.estimation.prepare`: constant columns
out, discrete variables found, ties dequantised or taken as atoms), except that continuous data of
any dimension get a k-nearest-neighbour statistic rather than a trained one (:data:`TEST_DEFAULTS`):
KSG (k = 20, max-norm) on the normal scores of the ranks; Ross's estimator (k = 20) for a
continuous X against a discrete Y; the Miller-Madow plug-in for two discrete variables; the chain
rule over atoms for data with point masses; and, given a continuous Z, Frenzel & Pompe's
conditional KSG on rank scores.

**The linear statistic beside it.** A k-NN statistic sees any dependence but is weakest where the
dependence is weak and linear (a correlation of 0.15 at n = 400: rejected in 23% of 200 data sets
by KSG alone, 77% by distance correlation; bench/independence.py). Beside KSG and Ross's
statistic, the default unconditional test computes :func:`linear_statistic` (the Gaussian MI of
the rank normal scores: canonical correlations; Wilks' lambda for labels) on the same permutations
and reports the min-p combination of their p-values (:func:`min_p_combination`), as valid as
either alone (``linear=False``: the k-NN statistic alone; ``linear=True`` given Z: a partial
correlation beside Frenzel & Pompe's, not the default: :data:`LINEAR_COMPANIONS`).
For one continuous coordinate a side and up to :data:`OTHER_SCALES_PAIRS` pairs the default test
also computes KSG at a small and a large number of neighbours (:func:`other_neighbours`: a fast
cosine needs small neighbourhoods, a change in spread large ones), all combined by min-p.
``.statistic`` is the MI estimate; ``.components`` has every statistic and its own p-value.

**Speed.** What does not change under the permutations is computed once: the KSG statistic keeps
X's and Y's rank scores, their sorted values (one coordinate) or k-d trees (more), and a table of
the digamma function; each permutation redoes only the joint neighbour search and the marginal
counts (in the plane with numba, both compiled in one pass,
:class:`mitool.estimators.grid.PlaneKSG`; else scipy's k-d tree and numpy's sorted searches, the
same numbers). At n = 10 000 a permutation costs about 8 ms of CPU on this project's 2-core
machine, idle (about 33 ms with the tree and numpy), where a fresh KSG estimate costs 30 ms: 1000
permutations with the linear statistic beside take 8.4 s (``bench/independence.py --timing-only
--timing-no-peers``). Fixed points of several coordinates (a 5-D X) are counted from their sorted
distance table, 20 times faster than by the tree's ball queries.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mitool import checks, estimators
from mitool.estimators.neighbours import fixed_points_counter, kth_neighbour_distances, strict_reach
from mitool.runtime import chosen_threads

TEST_NEIGHBOURS = 10
"""The test's k-NN statistics take k at most n / 10 (:attr:`mitool.estimators.Default.pairs_per_neighbour`;
at least 3): their k = 20 from 200 pairs, fewer below, so that a table of 20 to 200 rows is tested
(mtcars, 32 rows, was refused: Ross's k = 20 needs 42 pairs)."""


TEST_DEFAULTS: dict[str, estimators.Default] = {
    "continuous": estimators.Default(
        "ksg", {"normalise": "rank", "k": 20}, pairs_per_neighbour=TEST_NEIGHBOURS
    ),
    "low-dimension": estimators.Default(
        "ksg", {"normalise": "rank", "k": 20}, pairs_per_neighbour=TEST_NEIGHBOURS
    ),
    "surface": estimators.Default("ksg", {"normalise": "rank", "k": 20}, pairs_per_neighbour=TEST_NEIGHBOURS),
    "discrete": estimators.Default("plugin"),
    "discrete-y": estimators.Default("ross", {"k": 20}, pairs_per_neighbour=TEST_NEIGHBOURS),
    "discrete-y-high-dimension": estimators.Default("ross", {"k": 20}, pairs_per_neighbour=TEST_NEIGHBOURS),
    "ties": estimators.Default("atoms"),
    "conditional": estimators.Default("frenzel-pompe", {"k": 20}, pairs_per_neighbour=TEST_NEIGHBOURS),
}
"""The statistic for each kind of data when no estimator is named: those of
:data:`mitool.estimators.DEFAULTS` that train nothing, and k-NN estimators where those train a
network (a training per permutation). The k-NN statistics take k = 20 neighbours rather than the
estimators' 3 to 5: a larger k averages over wider neighbourhoods, the smoother statistic a test of
weak dependence needs (the power it bought, each null still calibrated: docs/independence.md)."""


SMALL_NEIGHBOURS = 5
"""The small k of the KSG statistic beside the default's (sharp, local dependence: a cosine of
four periods on 400 points)."""

LARGE_NEIGHBOURS_SHARE = 5
"""The large k beside the default's is n / LARGE_NEIGHBOURS_SHARE (CMIknn's 0.2 n: dependence in
the spread, a mixture of opposite slopes), at most :data:`LARGE_NEIGHBOURS_MOST`."""

LARGE_NEIGHBOURS_MOST = 80

OTHER_SCALES_PAIRS = 5000
"""Beyond this many pairs the default test keeps its one k: the large k's search costs k / 20
times the default's, and the scales were measured at n = 100 and 400 only."""


def other_neighbours(n: int, k: int) -> tuple[int, ...]:
    """The numbers of neighbours of the KSG statistics the default unconditional test computes beside
    its own k on n pairs: :data:`SMALL_NEIGHBOURS` and min(n / 5, 80), those that differ from k and
    leave a neighbour's count below n; none beyond :data:`OTHER_SCALES_PAIRS` pairs. Chosen on
    power curves, each family left out in turn (docs/independence.md, "Power curves"): at n = 400
    the min-p of KSG at k = 5, 20, 80 and the linear statistic has a mean area of 0.545 where KSG at
    20 and the linear statistic had 0.424.

    >>> other_neighbours(400, 20), other_neighbours(100, 10), other_neighbours(10_000, 20)
    ((5, 80), (5, 20), ())
    """
    if n > OTHER_SCALES_PAIRS:
        return ()
    chosen = {SMALL_NEIGHBOURS, min(n // LARGE_NEIGHBOURS_SHARE, LARGE_NEIGHBOURS_MOST)}
    return tuple(sorted(other for other in chosen if other != k and 1 <= other < n - 1))


POINT_STATISTICS = ("ksg", "gaussian", "plugin", "ross", "atoms", "mixed-ksg", "frenzel-pompe")
"""The estimators whose value is a computation on the rows, recomputed per permutation; the others
train a network for each."""


Statistic = Callable[[np.ndarray], float]
"""The statistic as a function of ``order``: row i of the fixed side goes with row ``order[i]`` of
the permuted side (Y; X for a conditional test). ``order = arange(n)`` gives the observed value."""


@functools.lru_cache(maxsize=16)
def digamma_table(n: int) -> np.ndarray:
    """psi(m) for m = 0 .. n + 1 (psi(0) unused), so that a count's term is a lookup (made once per
    n, read only)."""
    from scipy.special import digamma

    table = digamma(np.arange(n + 2, dtype=np.float64))
    table.flags.writeable = False
    return table


@dataclass(frozen=True)
class ScoredSide:
    """One side of the KSG statistic, made once: its scores (``normalise``: the normal scores of the
    ranks, or standardised values), the order of its first coordinate (stable), its counter of
    fixed points (:func:`~mitool.estimators.neighbours.fixed_points_counter`) and the basis of the
    linear statistic. A side serves as X or as Y of any pairing (:func:`ksg_statistic` of two
    sides), so a matrix of MI makes one per column (:mod:`mitool.matrix`)."""

    scores: np.ndarray
    order: np.ndarray
    count: Callable[[np.ndarray, np.ndarray], np.ndarray]
    basis: np.ndarray
    """An orthonormal basis of the centred scores: the side of :func:`linear_statistic`."""

    @classmethod
    def of(cls, values: np.ndarray, normalise: str = "rank") -> ScoredSide:
        from mitool.estimators.preparation import PREPARATIONS

        scores = np.ascontiguousarray(
            PREPARATIONS[checks.choice("normalise", normalise, PREPARATIONS)](values)[0]
        )
        basis = _linear_basis_of_centred(scores - scores.mean(axis=0))
        return cls(scores, np.argsort(scores[:, 0], kind="stable"), fixed_points_counter(scores), basis)


def ksg_statistic(
    x: np.ndarray | ScoredSide,
    y: np.ndarray | ScoredSide,
    k: int = 5,
    k_max: int = 0,
    normalise: str = "rank",
) -> Statistic:
    """KSG's estimate (:func:`mitool.estimators.ksg.ksg`, the same value) as a function of the
    pairing ``order``, y's row order[i] with x's row i:

        I = psi(k) + psi(n) - mean_i [psi(n_x(i) + 1) + psi(n_y(i) + 1)],

    eps_i the max-norm distance to the k-th neighbour of (x_i, y_order[i]), n_x(i), n_y(i) the other
    points strictly within eps_i in X and in Y. The scores of X and Y (``normalise``), their sorted
    values or k-d trees and the digamma table are made once (or given, as :class:`ScoredSide`); a call
    makes the joint search and the counts (the rows are kept in X's order, which keeps the search's
    neighbours near in memory).

    Examples
    --------
    >>> from mitool.estimators.ksg import ksg
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(500, 1)); y = x + rng.normal(size=(500, 1))
    >>> statistic = ksg_statistic(x, y)
    >>> bool(abs(statistic(np.arange(500)) - ksg(x, y, normalise="rank")) < 1e-12)
    True
    """
    from mitool.estimators.ksg import ksg
    from mitool.estimators.neighbours import TREE_MAX_DIM

    n = len(x.scores) if isinstance(x, ScoredSide) else len(x)
    checks.whole_number("k", k, 1, n - 1)
    dims = sum(side.scores.shape[1] if isinstance(side, ScoredSide) else side.shape[1] for side in (x, y))
    if dims > TREE_MAX_DIM:  # all pairs: the estimator's own computation
        if isinstance(x, ScoredSide) or isinstance(y, ScoredSide):
            raise checks.ParameterError(
                "x", f"as scored sides must have at most {TREE_MAX_DIM} dimensions in all"
            )
        return lambda order: ksg(x, y[order], k=k, k_max=k_max, normalise=normalise)
    values = _per_k(x, y, list(range(k, max(k, k_max) + 1)), normalise)
    return lambda order: float(np.mean(values(order)))


def _per_k(
    x: np.ndarray | ScoredSide, y: np.ndarray | ScoredSide, ks: list[int], normalise: str
) -> Callable[[np.ndarray], np.ndarray]:
    """KSG's value at each k of ``ks`` as a function of the pairing, from one joint search."""
    side_x = x if isinstance(x, ScoredSide) else ScoredSide.of(x, normalise)
    side_y = y if isinstance(y, ScoredSide) else ScoredSide.of(y, normalise)
    n, dims = len(side_x.scores), side_x.scores.shape[1] + side_y.scores.shape[1]
    psi = digamma_table(n)
    constants = [psi[neighbours] + psi[n] for neighbours in ks]
    by_x = side_x.order
    x_sorted = np.ascontiguousarray(side_x.scores[by_x])
    count_x, count_y, y_scores = side_x.count, side_y.count, side_y.scores
    from mitool.estimators import grid

    if dims == 2 and grid.AVAILABLE:  # the search and the counts compiled: the same numbers
        plane = grid.PlaneKSG(x_sorted[:, 0], y_scores[:, 0], ks, psi)

        def compiled(order: np.ndarray) -> np.ndarray:
            terms = plane.terms(np.asarray(order)[by_x])
            return np.array(
                [constant - np.mean(terms[:, column]) for column, constant in enumerate(constants)]
            )

        return compiled

    def statistic(order: np.ndarray) -> np.ndarray:
        y_rows = np.asarray(order)[by_x]
        distances = kth_neighbour_distances(np.hstack([x_sorted, y_scores[y_rows]]), ks, compiled=True)
        values = []
        for column, constant in enumerate(constants):
            reach = strict_reach(distances[:, column])
            values.append(constant - np.mean(psi[count_x(by_x, reach) + 1] + psi[count_y(y_rows, reach) + 1]))
        return np.array(values)

    return statistic


def ksg_statistics(x: np.ndarray, y: np.ndarray, ks: Sequence[int]) -> Callable[[np.ndarray], np.ndarray]:
    """KSG on rank scores at each k of ``ks`` as a function of the pairing (each value that of
    :func:`ksg_statistic` at that k), from one joint neighbour search; a pairing asked again by
    the same thread (the same array) is answered from its last result, so that statistics that
    each take one of these values share the search."""
    values, last = _per_k(x, y, list(ks), "rank"), threading.local()

    def statistic(order: np.ndarray) -> np.ndarray:
        if getattr(last, "order", None) is not order:
            last.order, last.values = order, values(order)
        return last.values

    return statistic


def frenzel_pompe_statistic(x: np.ndarray, y: np.ndarray, z: np.ndarray, k: int = 5) -> Statistic:
    """Frenzel & Pompe's estimate of I(X; Y | Z) on rank scores as a function of ``order``, x's
    row order[i] with the y and z of row i (order may repeat rows, as a local permutation does):

        I = psi(k) - mean_i [psi(n_xz(i) + 1) + psi(n_yz(i) + 1) - psi(n_z(i) + 1)],

    the value of :func:`mitool.estimators.frenzel_pompe.frenzel_pompe` on the normal scores of the
    ranks. The (y, z) and z structures are built once; a call makes the joint search and the (x, z)
    counts.

    Examples
    --------
    >>> from mitool.estimators.frenzel_pompe import frenzel_pompe
    >>> from mitool.estimators.preparation import normal_scores
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(400, 1)); x, y = z + rng.normal(size=(2, 400, 1))
    >>> value = frenzel_pompe_statistic(x, y, z)(np.arange(400))
    >>> bool(abs(value - frenzel_pompe(*(normal_scores(v)[0] for v in (x, y, z)))) < 1e-12)
    True
    """
    from scipy.spatial import cKDTree

    from mitool.estimators.preparation import normal_scores, standardise

    n = len(x)
    checks.whole_number("k", k, 1, n - 1)
    x_scores, y_scores, z_scores = (standardise(normal_scores(part)[0])[0] for part in (x, y, z))
    count_yz, count_z = (
        fixed_points_counter(np.hstack([y_scores, z_scores])),
        fixed_points_counter(z_scores),
    )
    psi = digamma_table(n)
    every = np.arange(n)

    def statistic(order: np.ndarray) -> float:
        x_now = x_scores[order]
        reach = strict_reach(kth_neighbour_distances(np.hstack([x_now, y_scores, z_scores]), [k])[:, 0])
        xz = np.hstack([x_now, z_scores])
        count_xz = np.asarray(
            cKDTree(xz).query_ball_point(xz, reach, p=np.inf, return_length=True, workers=chosen_threads())
        ) - 1  # fmt: skip
        terms = psi[count_xz + 1] + psi[count_yz(every, reach) + 1] - psi[count_z(every, reach) + 1]
        return float(psi[k] - np.mean(terms))

    return statistic


def plugin_statistic(x: np.ndarray, y: np.ndarray, correction: bool = True) -> Statistic:
    """The Miller-Madow plug-in MI of discrete x and y (:func:`mitool.estimators.discrete.plugin_mi`,
    the same value) as a function of ``order``: H(X) + H(Y) - H(X, Y), of which only the joint
    entropy changes under a permutation; the categories' codes and the marginal entropies are made
    once."""
    from mitool.estimators.rows import category_codes

    codes_x, codes_y = category_codes(x), category_codes(y)
    classes_y = int(codes_y.max()) + 1

    def entropy(codes: np.ndarray) -> float:
        counts = np.bincount(codes)
        counts = counts[counts > 0]
        total = counts.sum()
        value = float(-(counts / total * np.log(counts / total)).sum())
        return value + ((len(counts) - 1) / (2 * total) if correction else 0.0)

    marginals = entropy(codes_x) + entropy(codes_y)
    return lambda order: float(marginals - entropy(codes_x * classes_y + codes_y[order]))


def _linear_basis(values: np.ndarray, discrete: bool) -> np.ndarray:
    """An orthonormal basis (n, r) of one side's centred columns for :func:`linear_statistic`: the
    normal scores of the ranks of a continuous side, the indicators of all its categories but one
    for a discrete side; directions with no variance dropped."""
    from mitool.estimators.preparation import normal_scores
    from mitool.estimators.rows import category_codes

    if discrete:
        codes = category_codes(values)
        columns = np.eye(int(codes.max()) + 1)[codes][:, :-1]
    else:
        columns = normal_scores(values)[0]
    return _linear_basis_of_centred(columns - columns.mean(axis=0))


def canonical_mi(basis_x: np.ndarray, basis_y: np.ndarray) -> float:
    """-1/2 sum_i log(1 - rho_i^2), rho_i the canonical correlations: the singular values of
    basis_x' basis_y for orthonormal bases of the centred columns."""
    if not basis_x.shape[1] or not basis_y.shape[1]:
        return 0.0
    rho = np.linalg.svd(basis_x.T @ basis_y, compute_uv=False)
    return float(-0.5 * np.sum(np.log1p(-(np.minimum(rho, 1 - 1e-15) ** 2))))


def linear_statistic(
    x: np.ndarray, y: np.ndarray, z: np.ndarray | None = None, *, x_discrete: bool = False,
    y_discrete: bool = False,
) -> Statistic:  # fmt: skip
    """The linear part of the dependence, as a statistic of the pairing ``order`` (y's row order[i]
    with x's row i; given ``z``, x's row order[i] with the y and z of row i):

        I_lin = -1/2 sum_i log(1 - rho_i^2),

    rho_i the canonical correlations between X's and Y's columns: the normal scores of the ranks of
    a continuous side (a Gaussian copula's MI, Ince et al. 2017), the indicators of a discrete
    side's categories (then I_lin = -1/2 log of Wilks' lambda, one-way MANOVA's statistic). Given
    Z (its normal scores), X's and Y's columns less their least-squares fit on Z: the Gaussian
    conditional MI, a partial correlation. It is the MI of the Gaussian with those columns'
    covariance, without a bias correction (a constant under the permutations). Cheap (a few
    products of n x d matrices per permutation) and, against weak linear or location dependence,
    the most powerful statistic (for Gaussians it is the likelihood-ratio test); blind to
    dependence without a linear part (y = x^2, y = x noise), which the k-NN statistic sees: the
    default test combines the two (:func:`min_p_combination`).

    Examples
    --------
    >>> from mitool.estimators.gaussian import gaussian_mi
    >>> from mitool.estimators.preparation import normal_scores
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(300, 2)); y = x[:, :1] + rng.normal(size=(300, 1))
    >>> value = linear_statistic(x, y)(np.arange(300))
    >>> same = gaussian_mi(*normal_scores(x), *normal_scores(y), bias_correction=False)
    >>> bool(abs(value - same) < 1e-9)
    True
    """
    basis_x, basis_y = _linear_basis(x, x_discrete), _linear_basis(y, y_discrete)
    if z is None:
        return lambda order: canonical_mi(basis_x, basis_y[order])
    basis_z = _linear_basis(z, False)

    def residual(basis: np.ndarray) -> np.ndarray:
        left = basis - basis_z @ (basis_z.T @ basis)
        return _linear_basis_of_centred(left)

    residual_y = residual(basis_y)
    return lambda order: canonical_mi(residual(basis_x[order]), residual_y)


def _linear_basis_of_centred(columns: np.ndarray) -> np.ndarray:
    """An orthonormal basis of centred columns: their directions with variance (singular values
    above 1e-10 of the largest; none for a constant side)."""
    basis, scales, _ = np.linalg.svd(columns, full_matrices=False)
    if not scales.size or scales[0] <= 1e-12:
        return basis[:, :0]
    return np.ascontiguousarray(basis[:, scales > scales[0] * 1e-10])


def _atoms_statistic(x: np.ndarray, y: np.ndarray, k: int) -> tuple[Statistic, str]:
    """The statistic of the estimator for atoms, as it decides (:class:`mitool.estimators.atoms.Atoms`):
    the side with the atoms is Y of the chain rule, or both sides have ties and the mixture
    estimator answers."""
    from mitool.estimators.atoms import atoms_mi
    from mitool.estimators.mixed_ksg import mixed_ksg
    from mitool.estimators.rows import tied_rows

    if tied_rows(x) and tied_rows(y):
        return (
            lambda order: mixed_ksg(x, y[order], k=k)
        ), f"Gao et al.'s mixed KSG (k = {k}; both sides have ties)"
    if tied_rows(x):  # the atoms are x's: it is the chain rule's Y
        return (
            lambda order: atoms_mi(y[order], x, k=k)
        ), f"the chain rule over X's atoms (Ross's I(Y; A) plus KSG off them, k = {k})"
    return (
        lambda order: atoms_mi(x, y[order], k=k)
    ), f"the chain rule over Y's atoms (Ross's I(X; A) plus KSG off them, k = {k})"


def _trained_statistic(estimator: estimators.Estimator, x, y, z, seed: int, permuted: str) -> Statistic:
    """A trained estimator's value on the permuted rows: one training per call."""

    def statistic(order: np.ndarray) -> float:
        if permuted == "y":
            return float(estimator.estimate(x, y[order], z, seed=seed).value)
        return float(estimator.estimate(x[order], y, z, seed=seed).value)

    return statistic


def unconditional_statistic(estimator: estimators.Estimator, x: np.ndarray, y: np.ndarray,
                             seed: int) -> tuple[Statistic, str]:  # fmt: skip
    """The statistic of ``estimator`` on (x, y) as a function of the permutation of y's rows, and
    its description."""
    name, settings = estimator.name, estimator.settings
    if name == "ksg":
        scores = {"rank": "the normal scores of the ranks", "standard": "standardised data"}[
            settings.normalise
        ]
        ks = f"k = {settings.k}" + (f"..{settings.k_max}" if settings.k_max > settings.k else "")
        statistic = ksg_statistic(x, y, settings.k, settings.k_max, settings.normalise)
        return statistic, f"KSG ({ks}, max-norm) on {scores}"
    if name == "plugin":
        correction = "Miller-Madow corrected" if settings.correction else "uncorrected"
        return plugin_statistic(
            x, y, settings.correction
        ), f"the plug-in MI of the joint table ({correction})"
    if name == "ross":
        from mitool.estimators.ross import ross_mi

        return (lambda order: ross_mi(x, y[order], k=settings.k)), f"Ross's k-NN estimate (k = {settings.k})"
    if name == "mixed-ksg":
        from mitool.estimators.mixed_ksg import mixed_ksg

        return (
            lambda order: mixed_ksg(x, y[order], k=settings.k)
        ), f"Gao et al.'s mixed KSG (k = {settings.k})"
    if name == "gaussian":
        from mitool.estimators.gaussian import gaussian_mi

        correct = settings.bias_correction
        return (lambda order: gaussian_mi(x, y[order], bias_correction=correct)), "the Gaussian MI (CCA)"
    if name == "atoms":
        return _atoms_statistic(x, y, settings.k)
    return _trained_statistic(estimator, x, y, None, seed, "y"), f"{name} (trained for each permutation)"


def conditional_statistic(estimator: estimators.Estimator, x: np.ndarray, y: np.ndarray, z: np.ndarray,
                           seed: int) -> tuple[Statistic, str]:  # fmt: skip
    """The statistic of ``estimator`` on (x, y, z) as a function of the draw of x's rows."""
    name, settings = estimator.name, estimator.settings
    if name == "frenzel-pompe":
        scores = "the normal scores of the ranks"
        return frenzel_pompe_statistic(x, y, z, settings.k), (
            f"Frenzel & Pompe's conditional KSG (k = {settings.k}, max-norm) on {scores}"
        )
    if name == "gaussian":
        from mitool.estimators.gaussian import gaussian_conditional_mi

        correct = settings.bias_correction
        return (lambda order: gaussian_conditional_mi(x[order], y, z, bias_correction=correct)), (
            "the Gaussian conditional MI"
        )
    return _trained_statistic(estimator, x, y, z, seed, "x"), f"{name} (trained for each permutation)"
