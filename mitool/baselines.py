"""Estimators of mutual information that train nothing: KSG (nearest neighbours) and the Gaussian
(CCA) estimate, with standard errors from disjoint subsets.

Both take paired samples x (n, dx) and y (n, dy) as numpy arrays (row i of x goes with row i of y)
and return nats. :func:`estimate_baseline` adds the standard error and the confidence interval.

KSG (Kraskov, Stoegbauer & Grassberger 2004, estimator I), on data standardised per coordinate:
with eps_i the max-norm distance from point i to its k-th nearest neighbour in the joint space
(x, y), and n_x(i), n_y(i) the numbers of other points strictly within eps_i of point i in the x
and in the y space,

    I = psi(k) + psi(n) - mean_i [psi(n_x(i) + 1) + psi(n_y(i) + 1)].

It is consistent for any distribution with a density, but biased downwards in high dimension and
at high MI (its neighbourhoods are too large to resolve the dependence). The distances come from
scipy's ``cKDTree`` (one query for the k-th neighbours, one batched radius count per space) when
the joint dimension is small, and from an exact chunked all-pairs computation in torch when it is
large, where k-d trees visit nearly every point anyway (n = 5000 at 25 + 25 dimensions: about
5 s with the trees on a 2-core CPU, about 1 s all-pairs). Both give the same counts (tested).

Gaussian (CCA): the MI of the Gaussian with the sample covariance,
I = 1/2 [log det S_XX + log det S_YY - log det S] = -1/2 sum_i log(1 - rho_i^2) over the canonical
correlations rho_i. Exact for Gaussians up to sampling, and corrected for the bias of log det of a
sample covariance: E log det S = log det Sigma + sum_{i=1..d} psi((n - i)/2) + d log(2 / (n - 1))
for S with n - 1 degrees of freedom. Elsewhere it is the MI of the Gaussian copula of the
covariance, a reference rather than an estimate (it sees only linear dependence: 0 for
y = x^2 with symmetric x).

Standard errors: the estimator on m disjoint subsets of n / m pairs (subsampling; the bootstrap's
repeated points would be zero-distance neighbours for KSG) gives m values v_j; the standard error
of the estimate on all n pairs is std(v) / sqrt(m), since the variance of these estimators falls
like 1/n. It covers the sampling noise of the n pairs, not the estimator's bias.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy.spatial import cKDTree
from scipy.special import digamma

from mitool import checks

__all__ = [
    "BASELINES",
    "Baseline",
    "BaselineResult",
    "estimate_baseline",
    "gaussian_mi",
    "ksg",
    "neighbour_counts",
    "subsample_values",
]

TREE_MAX_DIM = 12
"""Joint dimensions up to this use k-d trees for the neighbour counts, larger ones all pairs."""


def standardise_columns(data: np.ndarray) -> np.ndarray:
    """Each column shifted to mean 0 and scaled to standard deviation 1 (constant columns: 0)."""
    scale = data.std(axis=0)
    return (data - data.mean(axis=0)) / np.where(scale > 0, scale, 1.0)


def _tree_counts(x: np.ndarray, y: np.ndarray, ks: Sequence[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    joint = np.hstack([x, y])
    distances, _ = cKDTree(joint).query(joint, k=max(ks) + 1, p=np.inf)  # the point itself comes first
    tree_x, tree_y = cKDTree(x), cKDTree(y)
    counts = []
    for k in ks:
        radius = np.nextafter(distances[:, k], 0.0)  # "strictly within": the largest float below eps
        count_x = tree_x.query_ball_point(x, radius, p=np.inf, return_length=True) - 1
        count_y = tree_y.query_ball_point(y, radius, p=np.inf, return_length=True) - 1
        counts.append((np.asarray(count_x), np.asarray(count_y)))
    return counts


def _max_norm_distances(rows: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """(r, n) max-norm distances, one coordinate at a time (no (r, n, d) temporary)."""
    distance = (rows[:, None, 0] - points[None, :, 0]).abs()
    for column in range(1, rows.shape[1]):
        torch.maximum(distance, (rows[:, None, column] - points[None, :, column]).abs(), out=distance)
    return distance


def _all_pairs_counts(
    x: np.ndarray, y: np.ndarray, ks: Sequence[int], chunk: int = 256
) -> list[tuple[np.ndarray, np.ndarray]]:
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    counts_x, counts_y = [[] for _ in ks], [[] for _ in ks]
    for start in range(0, len(x), chunk):
        distance_x = _max_norm_distances(xt[start : start + chunk], xt)
        distance_y = _max_norm_distances(yt[start : start + chunk], yt)
        # the k-th neighbour in the joint space; the point itself (distance 0) is the first value
        nearest = torch.maximum(distance_x, distance_y).topk(max(ks) + 1, dim=1, largest=False).values
        for index, k in enumerate(ks):
            radius = nearest[:, k, None]
            counts_x[index].append((distance_x < radius).sum(1) - 1)
            counts_y[index].append((distance_y < radius).sum(1) - 1)
    return [(torch.cat(cx).numpy(), torch.cat(cy).numpy()) for cx, cy in zip(counts_x, counts_y, strict=True)]


def _neighbour_counts_for(
    x: np.ndarray, y: np.ndarray, ks: Sequence[int], method: str
) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`neighbour_counts` for each k of ``ks``, with the distances computed once."""
    checks.choice("method", method, ("auto", "tree", "all-pairs"))
    if method == "auto":
        method = "tree" if x.shape[1] + y.shape[1] <= TREE_MAX_DIM else "all-pairs"
    return _tree_counts(x, y, ks) if method == "tree" else _all_pairs_counts(x, y, ks)


def neighbour_counts(
    x: np.ndarray, y: np.ndarray, k: int, method: str = "auto"
) -> tuple[np.ndarray, np.ndarray]:
    """n_x(i), n_y(i) of KSG: the other points strictly within the max-norm distance from point i to
    its k-th nearest neighbour in the joint space. ``method``: "tree" (k-d trees), "all-pairs" or
    "auto" (trees up to :data:`TREE_MAX_DIM` joint dimensions)."""
    return _neighbour_counts_for(x, y, [k], method)[0]


def ksg(x: np.ndarray, y: np.ndarray, k: int = 5, method: str = "auto", k_max: int = 0) -> float:
    """KSG estimator I of I(X; Y) in nats, on each column standardised (see the module):
    psi(k) + psi(n) - mean_i[psi(n_x(i) + 1) + psi(n_y(i) + 1)]. With ``k_max`` > k, an ensemble
    over k: the mean of the estimates for k, k + 1, ..., k_max (0, the default: k alone), from one
    computation of the distances."""
    n = len(x)
    checks.whole_number("k", k, 1, n - 1)
    checks.whole_number("k_max", k_max, 0, n - 1)
    if 0 < k_max < k:
        raise checks.ParameterError("k_max", f"must be 0 (k alone) or at least k = {k}, got {k_max}")
    ks = range(k, max(k, k_max) + 1)
    counts = _neighbour_counts_for(standardise_columns(x), standardise_columns(y), ks, method)
    values = [
        digamma(neighbours) + digamma(n) - np.mean(digamma(count_x + 1) + digamma(count_y + 1))
        for neighbours, (count_x, count_y) in zip(ks, counts, strict=True)
    ]
    return float(np.mean(values))


def _expected_log_det_bias(dim: int, degrees: int) -> float:
    """E log det S - log det Sigma for a d-dimensional sample covariance S with ``degrees`` = n - 1."""
    return float(
        sum(digamma((degrees + 1 - i) / 2.0) for i in range(1, dim + 1)) + dim * math.log(2.0 / degrees)
    )


def gaussian_mi(x: np.ndarray, y: np.ndarray, bias_correction: bool = True) -> float:
    """The MI of the Gaussian with the sample covariance of (x, y), nats (see the module); needs
    more pairs than dx + dy + 1."""
    n, dim_x, dim_y = len(x), x.shape[1], y.shape[1]
    if n <= dim_x + dim_y + 1:
        raise checks.ParameterError(
            "x", f"has too few samples ({n}) for a {dim_x + dim_y}-dimensional covariance"
        )
    correlation = np.corrcoef(np.hstack([x, y]), rowvar=False).reshape(dim_x + dim_y, dim_x + dim_y)
    log_dets = [
        np.linalg.slogdet(block)[1]
        for block in (correlation[:dim_x, :dim_x], correlation[dim_x:, dim_x:], correlation)
    ]
    value = 0.5 * (log_dets[0] + log_dets[1] - log_dets[2])
    if bias_correction:
        biases = [_expected_log_det_bias(d, n - 1) for d in (dim_x, dim_y, dim_x + dim_y)]
        value -= 0.5 * (biases[0] + biases[1] - biases[2])
    return float(value)


def subsample_values(
    function: Callable[[np.ndarray, np.ndarray], float], x: np.ndarray, y: np.ndarray, subsets: int, seed: int
) -> np.ndarray:
    """``function`` on ``subsets`` disjoint random subsets of the pairs (the standard error's raw
    material, see the module)."""
    order = np.random.default_rng(seed).permutation(len(x))
    return np.array([function(x[part], y[part]) for part in np.array_split(order, subsets)])


@dataclass(frozen=True)
class Baseline:
    """A non-neural estimator: ``function(x, y, **options) -> nats``, its options with defaults, the
    fewest pairs per subset it needs (as a function of the joint dimension), a summary, and what
    each option means."""

    name: str
    function: Callable[..., float]
    summary: str
    options: dict[str, object]
    min_pairs: Callable[[int], int]
    meanings: dict[str, str]


BASELINES: dict[str, Baseline] = {
    "ksg": Baseline(
        "ksg", ksg, "KSG nearest neighbours (estimator I, max-norm, standardised data)", {"k": 5, "k_max": 0},
        lambda dim: 20,
        {"k": "neighbours", "k_max": "above k: the mean of the estimates for k .. k_max (0: k alone)"},
    ),
    "gaussian": Baseline(
        "gaussian", gaussian_mi, "MI of the Gaussian with the sample covariance (CCA), bias-corrected",
        {"bias_correction": True}, lambda dim: dim + 10,
        {"bias_correction": "remove the small-sample bias of the log-determinants"},
    ),
}  # fmt: skip
"""The baselines by name."""


@dataclass(frozen=True)
class BaselineResult:
    """value: nats on all pairs; stderr: from ``subsets`` disjoint subsets (see the module)."""

    value: float
    stderr: float
    subsets: int
    options: dict[str, object]


def estimate_baseline(
    name: str, x: np.ndarray, y: np.ndarray, subsets: int = 10, seed: int = 0, **options: object
) -> BaselineResult:
    """Baseline ``name`` on (x, y), with its standard error from ``subsets`` disjoint subsets (fewer
    when the data are too small for that many; none below two)."""
    baseline = BASELINES[checks.choice("estimator", name, BASELINES)]
    unknown = sorted(set(options) - set(baseline.options))
    if unknown:
        raise checks.ParameterError(
            unknown[0], f"is not an option of {name} (its options: {', '.join(baseline.options)})"
        )
    chosen = {**baseline.options, **options}
    checks.whole_number("subsets", subsets, 2)
    needed = baseline.min_pairs(x.shape[1] + y.shape[1])
    if len(x) < needed:
        raise checks.ParameterError("x", f"has too few samples ({len(x)}; at least {needed} for {name})")

    def run(x_part: np.ndarray, y_part: np.ndarray) -> float:
        return baseline.function(x_part, y_part, **chosen)

    value = run(x, y)
    subsets = min(subsets, len(x) // needed)
    if subsets < 2:
        return BaselineResult(value, math.nan, 0, chosen)
    values = subsample_values(run, x, y, subsets, seed)
    return BaselineResult(value, float(values.std(ddof=1) / math.sqrt(subsets)), subsets, chosen)
