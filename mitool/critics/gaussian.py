"""The Gaussian critic: the log density ratio of the Gaussian fitted to the pairs, kept to its
strongest canonical pairs. It is fitted in closed form, not trained; the neural estimators use it as
the base that a network corrects (:mod:`mitool.estimators.neural`).

With the canonical directions a_i, b_i and correlations rho_1 >= rho_2 >= ... of the training
rows (CCA, :func:`mitool.estimators.preparation.canonical_maps`), u_i = a_i'(x - mean_x) and
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

The same critic on richer features is a critic too: with the coordinates at unit scale (as the
estimators prepare them), phi(x) = [x, x (|x|^2 / d - 1)] adds each coordinate times the centred
squared norm, so that a linear map of phi(x) can follow a dependence that turns or scales with the
norm (a rotation by an angle that grows with |x|^2 is, to first order, x + (|x|^2 / d - 1) J x).
:func:`fit_gaussian_critics` fits either (``features``), each run keeping the rank r whose InfoNCE
value on its validation pairs is highest. Shapes: R runs stacked (R folds or data sets),
x (R, B, dx), y (R, M, dy).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mitool.lazy import lazy_import

if TYPE_CHECKING:
    from torch import Tensor

torch = lazy_import("torch")

__all__ = ["GaussianCritics", "canonical_fit", "fit_gaussian_critics", "infonce_of_scores"]

MAX_CORRELATION = 0.9999
"""Canonical correlations are kept below this: the critic stays finite for (near) copies."""


def radial_features(rows):
    """phi(x) = [x, x (|x|^2 / d - 1)] of rows (..., d) at unit scale (numpy arrays or tensors)."""
    centred = (rows**2).sum(-1, keepdims=True) / rows.shape[-1] - 1.0
    parts = [rows, rows * centred]
    return np.concatenate(parts, axis=-1) if isinstance(rows, np.ndarray) else torch.cat(parts, dim=-1)


def canonical_fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """(mean_x (dx,), mean_y (dy,), A (m, dx), B (m, dy), rho (m,)) of the training rows: the m =
    min(dx, dy) canonical directions, unit-variance, in decreasing order of correlation."""
    from mitool.estimators.preparation import canonical_maps

    map_x, map_y = canonical_maps(x, y)
    m = min(x.shape[1], y.shape[1])
    mean_x, mean_y = x.mean(0), y.mean(0)
    u, v = (x - mean_x) @ map_x[:m].T, (y - mean_y) @ map_y[:m].T
    scale_u, scale_v = u.std(0, ddof=1), v.std(0, ddof=1)
    map_x, map_y = map_x[:m] / scale_u[:, None], map_y[:m] / scale_v[:, None]
    rho = np.clip(((u / scale_u) * (v / scale_v)).sum(0) / (len(x) - 1), -MAX_CORRELATION, MAX_CORRELATION)
    return mean_x, mean_y, map_x, map_y, rho


FEATURES: dict[str, object] = {"plain": lambda rows: rows, "radial": radial_features}
"""The features a Gaussian critic may work on: the inputs, or phi (:func:`radial_features`)."""


@dataclass
class GaussianCritics:
    """R Gaussian critics stacked, on ``features`` of the inputs (a key of :data:`FEATURES`): means
    (R, f), canonical directions (R, m, f), correlations (R, m) with those beyond each run's rank set
    to zero (a pair with rho = 0 adds nothing)."""

    mean_x: Tensor
    mean_y: Tensor
    map_x: Tensor
    map_y: Tensor
    rho: Tensor
    features: str = "plain"

    def all_pairs(self, x: Tensor, y: Tensor) -> Tensor:
        """S[r, i, j] = f_r(x_ri, y_rj): (R, B, M) for x (R, B, dx), y (R, M, dy)."""
        lift = FEATURES[self.features]
        u = (lift(x) - self.mean_x[:, None]) @ self.map_x.mT  # (R, B, m)
        v = (lift(y) - self.mean_y[:, None]) @ self.map_y.mT  # (R, M, m)
        rho = self.rho[:, None, :]
        one = 1.0 - rho**2
        cross = (u * (rho / one)) @ v.mT
        own_x = (u**2 * rho**2 / (2 * one)).sum(-1)
        own_y = (v**2 * rho**2 / (2 * one)).sum(-1)
        constant = -0.5 * torch.log(one).sum(-1)  # (R, 1)
        return cross - own_x[:, :, None] - own_y[:, None, :] + constant[:, :, None]

    def run(self, index: int) -> Callable[[Tensor, Tensor], Tensor]:
        """Critic ``index`` alone, as ``critic(x (B, dx), y (M, dy)) -> (B, M)``."""
        one = GaussianCritics(*(part[index : index + 1] for part in self.parts()), features=self.features)
        return lambda x, y: one.all_pairs(x[None], y[None])[0]

    def parts(self) -> tuple[Tensor, ...]:
        return self.mean_x, self.mean_y, self.map_x, self.map_y, self.rho

    def repeat_interleave(self, times: int) -> GaussianCritics:
        """Each critic repeated ``times`` times in a row (the members of an ensemble)."""
        return GaussianCritics(
            *(part.repeat_interleave(times, dim=0) for part in self.parts()), features=self.features
        )


def infonce_of_scores(scores: Tensor) -> float:
    """InfoNCE of a (b, b) all-pairs score matrix: mean_i [S_ii - logsumexp_j S_ij] + log b."""
    return float((scores.diagonal() - torch.logsumexp(scores, dim=1)).mean() + math.log(scores.shape[0]))


def _held_out(scores_of: Callable[[Tensor, Tensor], Tensor], x: Tensor, y: Tensor, block: int) -> float:
    """The InfoNCE value of a critic on held-out rows, in blocks of at most ``block`` rows."""
    values, sizes = [], []
    for rows in torch.tensor_split(torch.arange(len(x)), max(1, math.ceil(len(x) / block))):
        values.append(infonce_of_scores(scores_of(x[rows], y[rows])))
        sizes.append(len(rows))
    return float(np.average(values, weights=sizes))


def _rank_values(fitted: Sequence[Tensor], x: Tensor, y: Tensor, block: int) -> list[float]:
    """The validation InfoNCE value of a fitted critic (mean_x, mean_y, map_x, map_y, rho, on x and y
    as given) kept to each rank r = 0 .. m: the critic is a sum over the canonical pairs, so the
    scores of rank r + 1 are those of rank r plus pair r + 1's term (one pass over the pairs per block)."""
    mean_x, mean_y, map_x, map_y, rho = fitted
    totals, sizes = torch.zeros(len(rho) + 1, dtype=torch.float64), []
    for rows in torch.tensor_split(torch.arange(len(x)), max(1, math.ceil(len(x) / block))):
        u = (x[rows] - mean_x) @ map_x.T  # (b, m)
        v = (y[rows] - mean_y) @ map_y.T
        scores = torch.zeros(len(rows), len(rows), dtype=u.dtype, device=u.device)
        totals[0] += infonce_of_scores(scores) * len(rows)
        for pair in range(len(rho)):
            r, one = rho[pair], 1.0 - rho[pair] ** 2
            scores += (
                (r / one) * u[:, pair, None] * v[None, :, pair]
                - (r**2 / (2 * one)) * (u[:, pair, None] ** 2 + v[None, :, pair] ** 2)
                - 0.5 * torch.log(one)
            )
            totals[pair + 1] += infonce_of_scores(scores) * len(rows)
        sizes.append(len(rows))
    return (totals / sum(sizes)).tolist()


def fit_gaussian_critics(
    fits: Sequence[tuple[np.ndarray, np.ndarray]],
    validations: Sequence[tuple[Tensor, Tensor]],
    block: int,
    device: str = "cpu",
    features: str = "plain",
) -> tuple[GaussianCritics, list[int], list[float]]:
    """One Gaussian critic per run on ``features`` of the inputs, fitted on its fit rows (numpy,
    float64) and kept to the rank r in 0 .. min(dx, dy) whose InfoNCE value on its validation rows
    (tensors) is highest; returns the stacked critics, each run's rank and validation value."""
    lift = FEATURES[features]
    kept, ranks, values = [], [], []
    for (x, y), (x_validation, y_validation) in zip(fits, validations, strict=True):
        fitted = canonical_fit(lift(x), lift(y))
        as_tensors = [torch.as_tensor(part, dtype=torch.float32) for part in fitted]
        by_rank = _rank_values(as_tensors, lift(x_validation.cpu()), lift(y_validation.cpu()), block)
        rank = int(np.argmax(by_rank))
        kept.append((*fitted[:4], np.where(np.arange(len(fitted[4])) < rank, fitted[4], 0.0)))
        ranks.append(rank)
        values.append(by_rank[rank])
    columns = zip(*kept, strict=True)
    stacked = [torch.as_tensor(np.stack(part), dtype=torch.float32, device=device) for part in columns]
    return GaussianCritics(*stacked, features=features), ranks, values
