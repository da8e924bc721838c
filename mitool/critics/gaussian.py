"""The Gaussian critic: the log density ratio of the Gaussian fitted to the pairs, kept to its
strongest canonical pairs. It is fitted in closed form, not trained; the neural estimators use it as
the base that a network corrects (:mod:`mitool.estimators.neural`).

With the canonical directions a_i, b_i and correlations rho_1 >= rho_2 >= ... of the training
rows (CCA, :func:`canonical_maps`), u_i = a_i'(x - mean_x) and
v_i = b_i'(y - mean_y) have unit variance and are uncorrelated but for the pairs (u_i, v_i); for a
Gaussian (X, Y) the log density ratio is then the sum over the pairs of the bivariate one,

    f(x, y) = sum_{i <= r} [ -1/2 log(1 - rho_i^2)
                             - (rho_i^2 (u_i^2 + v_i^2) - 2 rho_i u_i v_i) / (2 (1 - rho_i^2)) ],

exact (with the true parameters) for Gaussian data: InfoNCE at this critic reaches the MI up to its
own small bias. Keeping r canonical pairs of min(dx, dy) (``rank``) drops the noise of the weak
ones, which a held-out bound pays for in high dimension (a 50 x 50 Gaussian has one canonical
pair; its 49 sampled others only cost). A critic's *rank* is this r, the number of canonical pairs
it keeps (the rank of its interaction matrix): not a rank score (``normalise="rank"``), a listing
order or a process's rank under torchrun.

With few rows in many dimensions the sample canonical directions overfit the training rows (the
inverse of S_xx amplifies the noise of S_xy); regularised CCA shrinks each side's covariance toward
its diagonal first, S -> (1 - s) S + s diag(S) (:func:`canonical_fit` with ``shrinkage``), and
:func:`fit_gaussian_critics` with ``shrink=True`` keeps the s of :data:`SHRINKAGES` whose validation
value is highest, with the rank and the weight. On bmi's own samples of dense 50 x 50 at n = 1000
(five folds, 640 fit rows each) the default went from -0.200 to -0.091 nats with it.

Some pairs may be unrelated: a fraction 1 - w of them drawn from the product of the marginals
(bmi's v2 "sparse Gaussians with inliers", or the mismatched pairs of a collected data set). Both
kinds of pair have the same marginals, so the canonical directions are those of the related pairs
and the observed correlations r_i are w rho_i; the log density ratio of the mixture is

    f_w(x, y) = log(w exp(f_rho(x, y)) + 1 - w),     rho_i = r_i / w,

with f_rho the critic above (w = 1 gives it back). :func:`fit_gaussian_critics` keeps the weight w
of :data:`WEIGHTS` and the rank whose validation value is highest together. On bmi's own samples of
the inliers tasks (25 x 25, 20% unrelated, n = 5000, seeds 3 and 4), the critic alone on the
default's split: the Gaussian critic scored 0.48 and 0.49 on the test pairs, f_w 0.57 and 0.61
(w = 0.8 kept; truth 0.634). With the network on top, the default's errors on the four inliers
tasks went from -0.08 .. -0.15 to -0.05 .. +0.01 nats (docs/mi-benchmark.md, "Mixtures and scale").

The same critic on richer features is a critic too: with the coordinates at unit scale (as the
estimators prepare them), phi(x) = [x, x (|x|^2 / d - 1)] adds each coordinate times the centred
squared norm, so that a linear map of phi(x) can follow a dependence that turns or scales with the
norm (a rotation by an angle that grows with |x|^2 is, to first order, x + (|x|^2 / d - 1) J x).
With t terms, phi_t(x) = [x, x c, x c^2, ..., x c^t] (c = |x|^2 / d - 1) follows the angle to order
t in c: a rotation by theta(|x|^2) is x cos(theta) + J x sin(theta) in the plane it turns, and
both are power series in c. Each term adds d features a side, which the fit rows must carry (on
bmi's own samples at n = 1000, 680 fit rows, two terms in place of one: the spiral 5 x 5 gained
0.12 nats, the spiral 25 x 25, 75 features a side, lost 0.06; a third term's heavy tails cost the
spiral 3 x 3 0.5 nats on one seed), so :func:`fit_gaussian_critics` keeps the t of 1 .. ``terms``
whose validation value is highest, as it keeps the rank (with t of 1 or 2 kept so, the 25 x 25
spiral kept one term and lost nothing). It fits either features (``features``), each run keeping
the rank r whose InfoNCE value on its validation pairs is highest.
Shapes: R runs stacked (R folds or data sets), x (R, B, dx), y (R, M, dy).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mitool._infra.lazy import lazy_import

if TYPE_CHECKING:
    from torch import Tensor

torch = lazy_import("torch")

__all__ = ["GaussianCritics", "canonical_fit", "canonical_maps", "fit_gaussian_critics", "infonce_of_scores"]

MAX_CORRELATION = 0.9999
"""Canonical correlations are kept below this: the critic stays finite for (near) copies."""

SHRINKAGES = (0.0, 0.25, 0.5, 0.75)
"""The shrinkages s of each side's covariance toward its diagonal (regularised CCA:
:func:`canonical_maps`) that :func:`fit_gaussian_critics` may try
with ``shrink=True``; 0 (plain CCA) wins ties."""

WEIGHTS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3)
"""The weights w of the related pairs a Gaussian critic may assume (see the module): the one kept,
with the rank, is the one whose validation value is highest; 1 (every pair related) wins ties."""


def _inverse_root(covariance: np.ndarray) -> np.ndarray:
    values, vectors = np.linalg.eigh(covariance)
    values = np.maximum(values, 1e-9 * max(values.max(), 1e-300))
    return (vectors / np.sqrt(values)) @ vectors.T


def canonical_maps(
    x_train: np.ndarray, y_train: np.ndarray, shrinkage: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Invertible linear maps A (dx, dx) and B (dy, dy) to canonical coordinates: x -> A x and
    y -> B y whiten each side and turn it so that the cross-covariance of the training rows is
    diagonal, the canonical correlations in decreasing order (CCA). With W_x = S_xx^-1/2,
    W_y = S_yy^-1/2 and the SVD W_x S_xy W_y = U D V', A = U' W_x and B = V' W_y. Invertible maps
    of X and of Y leave the MI unchanged; the linear dependence is then in the first coordinates.

    ``shrinkage`` s in [0, 1) is regularised CCA: each side's covariance is shrunk toward its
    diagonal, S -> (1 - s) S + s diag(S), before it is whitened. With few rows in many dimensions
    the sample S_xx^-1 amplifies the noise of S_xy, and the canonical directions overfit the
    training rows (a 50 x 50 Gaussian from 640 rows); shrinking trades that variance for a bias
    toward the directions of S_xy itself (s -> 1: partial least squares). The maps stay invertible."""
    x_centred, y_centred = x_train - x_train.mean(0), y_train - y_train.mean(0)
    count = len(x_train) - 1

    def shrunk(covariance: np.ndarray) -> np.ndarray:
        return (1.0 - shrinkage) * covariance + shrinkage * np.diag(np.diag(covariance))

    white_x = _inverse_root(shrunk(x_centred.T @ x_centred / count))
    white_y = _inverse_root(shrunk(y_centred.T @ y_centred / count))
    left, _, right = np.linalg.svd(white_x @ (x_centred.T @ y_centred / count) @ white_y)
    return left.T @ white_x, right @ white_y


def radial_features(rows, terms: int = 1):
    """phi_t(x) = [x, x c, ..., x c^t] with c = |x|^2 / d - 1 and t = ``terms``, of rows (..., d) at
    unit scale (numpy arrays or tensors): (..., d (t + 1))."""
    centred = (rows**2).sum(-1, keepdims=True) / rows.shape[-1] - 1.0
    parts = [rows]
    for _ in range(terms):
        parts.append(parts[-1] * centred)
    return np.concatenate(parts, axis=-1) if isinstance(rows, np.ndarray) else torch.cat(parts, dim=-1)


def _plain_features(rows, terms: int = 0):
    """The rows as they are (the features of the plain Gaussian critic; ``terms`` is 0)."""
    return rows


def canonical_fit(x: np.ndarray, y: np.ndarray, shrinkage: float = 0.0) -> tuple[np.ndarray, ...]:
    """(mean_x (dx,), mean_y (dy,), A (m, dx), B (m, dy), rho (m,)) of the training rows: the m =
    min(dx, dy) canonical directions (of regularised CCA with ``shrinkage``:
    :func:`canonical_maps`), unit-variance, and the training rows'
    correlation along each, in the maps' order."""
    map_x, map_y = canonical_maps(x, y, shrinkage)
    m = min(x.shape[1], y.shape[1])
    mean_x, mean_y = x.mean(0), y.mean(0)
    u, v = (x - mean_x) @ map_x[:m].T, (y - mean_y) @ map_y[:m].T
    scale_u, scale_v = u.std(0, ddof=1), v.std(0, ddof=1)
    map_x, map_y = map_x[:m] / scale_u[:, None], map_y[:m] / scale_v[:, None]
    rho = np.clip(((u / scale_u) * (v / scale_v)).sum(0) / (len(x) - 1), -MAX_CORRELATION, MAX_CORRELATION)
    return mean_x, mean_y, map_x, map_y, rho


FEATURES: dict[str, Callable] = {"plain": _plain_features, "radial": radial_features}
"""The features a Gaussian critic may work on, as functions of (rows, terms): the inputs, or phi_t
(:func:`radial_features`)."""


def _terms_of(features: Tensor | np.ndarray, rows: Tensor | np.ndarray) -> int:
    """The t of features of width d (t + 1) on rows of width d (0 for the plain features)."""
    return features.shape[-1] // rows.shape[-1] - 1


@dataclass
class GaussianCritics:
    """R Gaussian critics stacked, on ``features`` of the inputs (a key of :data:`FEATURES`, with
    as many terms as the maps are wide): means (R, f), canonical directions (R, m, f), correlations
    rho (R, m) of the related pairs with those beyond each run's rank set to zero (a pair with
    rho = 0 adds nothing), the weight w (R,) of the related pairs (ones when not given; see the
    module), and each run's number of radial terms t (R,): a run of fewer terms than the features
    have is zero on the columns (and canonical pairs) of the others."""

    mean_x: Tensor
    mean_y: Tensor
    map_x: Tensor
    map_y: Tensor
    rho: Tensor
    weight: Tensor | None = None
    terms: Tensor | None = None
    features: str = "plain"

    def __post_init__(self) -> None:
        if self.weight is None:
            self.weight = torch.ones(self.rho.shape[:1], dtype=self.rho.dtype, device=self.rho.device)
        if self.terms is None:
            self.terms = torch.full(self.rho.shape[:1], int(self.features == "radial"), dtype=torch.int64)

    def all_pairs(self, x: Tensor, y: Tensor) -> Tensor:
        """S[r, i, j] = f_r(x_ri, y_rj): (R, B, M) for x (R, B, dx), y (R, M, dy)."""
        lift = FEATURES[self.features]
        u = (lift(x, _terms_of(self.map_x, x)) - self.mean_x[:, None]) @ self.map_x.mT  # (R, B, m)
        v = (lift(y, _terms_of(self.map_y, y)) - self.mean_y[:, None]) @ self.map_y.mT  # (R, M, m)
        rho = self.rho[:, None, :]
        one = 1.0 - rho**2
        cross = (u * (rho / one)) @ v.mT
        own_x = (u**2 * rho**2 / (2 * one)).sum(-1)
        own_y = (v**2 * rho**2 / (2 * one)).sum(-1)
        constant = -0.5 * torch.log(one).sum(-1)  # (R, 1)
        scores = cross - own_x[:, :, None] - own_y[:, None, :] + constant[:, :, None]
        return _with_unrelated_pairs(scores, self.weight[:, None, None])

    def run(self, index: int) -> Callable[[Tensor, Tensor], Tensor]:
        """Critic ``index`` alone, as ``critic(x (B, dx), y (M, dy)) -> (B, M)``."""
        one = GaussianCritics(*(part[index : index + 1] for part in self.parts()), features=self.features)
        return lambda x, y: one.all_pairs(x[None], y[None])[0]

    def parts(self) -> tuple[Tensor, ...]:
        return self.mean_x, self.mean_y, self.map_x, self.map_y, self.rho, self.weight, self.terms

    def without(self, runs: Sequence[int]) -> GaussianCritics:
        """The same critics but for ``runs``, which become the zero critic (rho = 0 and w = 1: every
        score exactly 0), as for a network that starts alone."""
        rho, weight = self.rho.clone(), self.weight.clone()
        rho[list(runs)], weight[list(runs)] = 0.0, 1.0
        return GaussianCritics(
            self.mean_x, self.mean_y, self.map_x, self.map_y, rho, weight, self.terms, self.features
        )

    def repeat_interleave(self, times: int) -> GaussianCritics:
        """Each critic repeated ``times`` times in a row (the members of an ensemble)."""
        return GaussianCritics(
            *(part.repeat_interleave(times, dim=0) for part in self.parts()), features=self.features
        )


def infonce_of_scores(scores: Tensor) -> float:
    """InfoNCE of a (b, b) all-pairs score matrix: mean_i [S_ii - logsumexp_j S_ij] + log b."""
    return float((scores.diagonal() - torch.logsumexp(scores, dim=1)).mean() + math.log(scores.shape[0]))


def infonce_of_mixture(scores: Tensor, weight: float) -> float:
    """InfoNCE of the mixture's critic f_w = log(w exp(S) + 1 - w) (see the module) from the related
    pairs' (b, b) scores S, without forming f_w: its row sums are w sum_j exp(S_ij) + b (1 - w), so

        logsumexp_j f_w(i, j) = logaddexp(log w + logsumexp_j S_ij, log b + log(1 - w)),

    and the value is mean_i [f_w(i, i) - logsumexp_j f_w(i, j)] + log b: the same number as
    ``infonce_of_scores(_with_unrelated_pairs(scores, weight))`` (up to rounding) for two
    transcendental functions of b values a row, not of b^2 (the scan of :func:`_rank_values` makes
    one such value per weight, rank and block)."""
    if weight == 1.0:
        return infonce_of_scores(scores)
    b = scores.shape[0]
    log_w, log_rest = math.log(weight), math.log1p(-weight)
    rest = torch.tensor(log_rest, dtype=scores.dtype, device=scores.device)
    diagonal = torch.logaddexp(scores.diagonal() + log_w, rest)
    rows = torch.logaddexp(torch.logsumexp(scores, dim=1) + log_w, rest + math.log(b))
    return float((diagonal - rows).mean() + math.log(b))


def _held_out(scores_of: Callable[[Tensor, Tensor], Tensor], x: Tensor, y: Tensor, block: int) -> float:
    """The InfoNCE value of a critic on held-out rows, in blocks of at most ``block`` rows."""
    values, sizes = [], []
    for rows in torch.tensor_split(torch.arange(len(x)), max(1, math.ceil(len(x) / block))):
        values.append(infonce_of_scores(scores_of(x[rows], y[rows])))
        sizes.append(len(rows))
    return float(np.average(values, weights=sizes))


def _with_unrelated_pairs(scores: Tensor, weight: Tensor | float) -> Tensor:
    """log(w exp(scores) + 1 - w): the related pairs' critic made the mixture's, a share 1 - w of the
    pairs unrelated (see the module); ``weight`` broadcasts against ``scores``, which are returned
    as they are where every w is 1."""
    weight = torch.as_tensor(weight, dtype=scores.dtype, device=scores.device)
    if bool((weight == 1.0).all()):
        return scores
    return torch.logaddexp(scores + torch.log(weight), torch.log1p(-weight))


def related_correlations(observed: np.ndarray, weight: float) -> np.ndarray:
    """rho_i = r_i / w, the correlations of the related pairs when a fraction w of the pairs is
    related and the observed canonical correlations are r_i, kept within :data:`MAX_CORRELATION`."""
    return np.clip(observed / weight, -MAX_CORRELATION, MAX_CORRELATION)


def _rank_values(fitted: Sequence[Tensor], weight: float, x: Tensor, y: Tensor, block: int) -> list[float]:
    """The validation InfoNCE value of a fitted critic (mean_x, mean_y, map_x, map_y, rho, on x and y
    as given) of related-pair weight ``weight``, kept to each rank r = 0 .. m: the Gaussian part is a
    sum over the canonical pairs, so its scores at rank r + 1 are those at rank r plus pair r + 1's
    term (one pass over the pairs per block)."""
    mean_x, mean_y, map_x, map_y, rho = fitted
    totals, sizes = torch.zeros(len(rho) + 1, dtype=torch.float64), []
    for rows in torch.tensor_split(torch.arange(len(x)), max(1, math.ceil(len(x) / block))):
        u = (x[rows] - mean_x) @ map_x.T  # (b, m)
        v = (y[rows] - mean_y) @ map_y.T
        scores = torch.zeros(len(rows), len(rows), dtype=u.dtype, device=u.device)
        totals[0] += infonce_of_scores(scores) * len(rows)
        for pair in range(len(rho)):
            r = float(rho[pair])
            one = 1.0 - r**2
            own = r**2 / (2 * one)
            # in place, three passes over the block: (r / one) u_i v_j, then the terms of u_i and v_j
            scores.addr_(u[:, pair], v[:, pair], alpha=r / one)
            scores.add_((-own * u[:, pair] ** 2 - 0.5 * math.log(one))[:, None])
            scores.add_((-own * v[:, pair] ** 2)[None, :])
            totals[pair + 1] += infonce_of_mixture(scores, weight) * len(rows)
        sizes.append(len(rows))
    return (totals / sum(sizes)).tolist()


def fit_gaussian_critics(
    fits: Sequence[tuple[np.ndarray, np.ndarray]],
    validations: Sequence[tuple[Tensor, Tensor]],
    block: int,
    device: str = "cpu",
    features: str = "plain",
    shrink: bool = False,
    terms: int = 1,
) -> tuple[GaussianCritics, list[int], list[float]]:
    """One Gaussian critic per run on ``features`` of the inputs, fitted on its fit rows (numpy,
    float64), with the weight w of :data:`WEIGHTS` and the rank r in 0 .. min(dx, dy) (with
    ``shrink`` the shrinkage of :data:`SHRINKAGES`, and on the radial features the number of terms
    t in 1 .. ``terms``) whose InfoNCE value on its validation rows (tensors) is highest; returns
    the stacked critics, each run's rank and validation value (each run's weight and terms are the
    critics' ``weight`` and ``terms``)."""
    lift = FEATURES[features]
    kept, ranks, values = [], [], []
    for (x, y), (x_validation, y_validation) in zip(fits, validations, strict=True):
        best = (-math.inf, 0, 1.0, 0, ())
        for count in range(1, terms + 1) if features == "radial" else (0,):
            lifted = lift(x, count), lift(y, count)
            lifted_validation = lift(x_validation.cpu(), count), lift(y_validation.cpu(), count)
            for shrinkage in SHRINKAGES if shrink else (0.0,):
                *fitted, observed = canonical_fit(*lifted, shrinkage)
                as_tensors = [torch.as_tensor(part, dtype=torch.float32) for part in fitted]
                for weight in WEIGHTS:
                    rho = torch.as_tensor(related_correlations(observed, weight), dtype=torch.float32)
                    by_rank = _rank_values([*as_tensors, rho], weight, *lifted_validation, block)
                    rank = int(np.argmax(by_rank))
                    # strictly: ties keep the earlier (rank 0 is the same for all, fewer terms first)
                    if by_rank[rank] > best[0]:
                        best = (by_rank[rank], rank, weight, count, (fitted, observed))
        value, rank, weight, count, (fitted, observed) = best
        rho = np.where(np.arange(len(observed)) < rank, related_correlations(observed, weight), 0.0)
        widths = (x.shape[1] * (terms + 1), y.shape[1] * (terms + 1)) if features == "radial" else None
        kept.append((*_widened(fitted, rho, widths), np.float64(weight), np.int64(count)))
        ranks.append(rank)
        values.append(value)
    columns = zip(*kept, strict=True)
    stacked = [torch.as_tensor(np.stack(part), device=device) for part in columns]
    stacked = [part.float() if part.is_floating_point() else part for part in stacked]
    return GaussianCritics(*stacked, features=features), ranks, values


def _widened(
    fitted: Sequence[np.ndarray], rho: np.ndarray, widths: tuple[int, int] | None
) -> tuple[np.ndarray, ...]:
    """A fitted critic's (mean_x, mean_y, map_x, map_y, rho) made as wide as features of ``widths``
    (f_x, f_y) by zeros: the columns of terms it did not keep and the canonical pairs they would
    have had (min(f_x, f_y) in all) add nothing, so every run of a stack has the same shapes."""
    mean_x, mean_y, map_x, map_y = fitted
    if widths is None:
        return mean_x, mean_y, map_x, map_y, rho
    pairs = min(widths)
    return (
        np.pad(mean_x, (0, widths[0] - len(mean_x))),
        np.pad(mean_y, (0, widths[1] - len(mean_y))),
        np.pad(map_x, ((0, pairs - len(map_x)), (0, widths[0] - map_x.shape[1]))),
        np.pad(map_y, ((0, pairs - len(map_y)), (0, widths[1] - map_y.shape[1]))),
        np.pad(rho, (0, pairs - len(rho))),
    )
