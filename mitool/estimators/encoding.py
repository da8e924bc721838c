"""Encoding a side that lies on a low-dimensional surface (images) to as many coordinates as the
surface has, so that the flow estimator can model it.

The MI is unchanged by a map of either side that is injective on its support:
I(e(X); Y) = I(X; Y). A 16 x 16 image of a bump at a point u of the unit square is 256 pixels on a
2-dimensional surface; normalizing flows (invertible maps of R^d) cannot make such a side Gaussian,
and a Gaussian model of its pixels means nothing (:data:`mitool.estimators.flow.COLLINEARITY`). An
encoder to 2 coordinates that is injective on the surface loses nothing, and the flows then see
(e(X), e(Y)). Butakov, Tolmachev, Malanchuk & Frolov (NeurIPS 2024, arXiv 2403.02187) compress
their image tasks with an autoencoder before their flows; here:

1. **The surface's dimension** d, by TwoNN (Facco, d'Errico, Rodriguez & Laio 2017, Sci. Rep.
   7:12140, "Estimating the intrinsic dimension of datasets by a minimal neighborhood
   information"): on a d-dimensional surface with a locally even density, the ratio
   mu = r_2 / r_1 of a point's distances to its second and first nearest neighbours follows
   P(mu > m) = m^-d, whose maximum-likelihood exponent over N points is d = N / sum_i log mu_i
   (:func:`intrinsic_dimension`, on at most 2000 rows, rounded to a whole number). The bumps and
   rectangles of the ``highmi`` suite give 1.9-2.0 and 4.2-4.4 (their latents have 2 and 4).
2. **An autoencoder** with a bottleneck of d coordinates (:func:`encode`). The rows are centred and
   projected on their first P = min(32, columns) principal axes (the bumps keep 99.998% of their
   variance, the rectangles 94%; 64 axes for the rectangles moved the estimates at 2.5, 5 and 10
   nats by -0.09, +0.15 and +0.12 nats, one draw each, by a prototype of this module), scaled so
   that the first has unit variance. The code is the first d principal coordinates, each scaled to
   unit variance, plus a 2-hidden-layer MLP of the P coordinates whose last layer starts at zero, so
   that training starts at the principal coordinates; a 2-hidden-layer MLP decodes the code back to
   the P coordinates. Adam minimises the squared error over random batches of the training rows,
   with a one-cycle schedule.
3. **One encoder for both sides** where both lie on a surface and have the same number of
   columns (trained on the rows of both): the codes of a pair that determine each other lie near
   the line e(x) = e(y), which the flows' fixed linear maps align at once. With an encoder per
   side the flows must learn the map from one encoder's codes to the other's to within the
   dependence's spread: bumps as 16 x 16 images at 10 nats, n = 10 000, gave 8.93 (2000 flow
   steps; with the flow's default 600 its fit was refused) against 9.84 with one encoder (the
   prototype's runs).

The rows are reconstructed in their own units, as pixels share one; on a table of measurements in
different units the encoder would describe the columns of large variance and may lose the others,
so the default estimator encodes only data given as images (:func:`mitool.estimation.on_a_surface`).

Measured at n = 10 000 on the ``highmi`` suite's images, by the default estimator (``mitool
benchmark``, seeds 0 and 1, one core; docs/mi-benchmark.md has the table): bumps 16 x 16 at 2.5, 5
and 10 nats and 32 x 32 at 5 nats, and rectangles 16 x 16 at 2.5, 5 and 10 nats, each within 7% of
the truth, in 27 to 54 s an estimate. An encoder that is not injective on the surface (a fold)
loses information, and the estimate is then below the MI; the encoder's relative reconstruction
error (``details``) says how well it describes the rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mitool import checks
from mitool._infra.lazy import lazy_import
from mitool.estimators.base import Progress

torch = lazy_import("torch")

__all__ = ["ENCODER_COMPONENTS", "Encoding", "encode", "intrinsic_dimension"]

ENCODER_COMPONENTS = 32
"""The principal coordinates the autoencoder reconstructs (fewer where the rows have fewer columns)."""


def intrinsic_dimension(rows: np.ndarray, sample: int = 2000, seed: int = 0, name: str = "x") -> float:
    """The dimension of the surface the rows lie on, by TwoNN: N / sum_i log(r_2(i) / r_1(i)) over
    at most ``sample`` rows (a random subset), r_1 and r_2 the Euclidean distances from row i to
    its nearest and second-nearest other rows of the subset; rows with a duplicate (r_1 = 0) are
    left out. See the module. ``name``: the parameter the rows came as, for the error where fewer
    than two rows are distinct.

    >>> import numpy as np
    >>> angle = np.random.default_rng(0).uniform(0, 2 * np.pi, 1000)
    >>> circle = np.stack([np.cos(angle), np.sin(angle)], axis=1) @ np.ones((2, 10))  # a loop in 10-D
    >>> round(intrinsic_dimension(circle))
    1
    """
    rows = np.asarray(rows, dtype=np.float64)
    chosen = np.random.default_rng(seed).choice(len(rows), min(sample, len(rows)), replace=False)
    points = torch.as_tensor(rows[chosen])
    distances = torch.cdist(points, points)
    distances.fill_diagonal_(math.inf)
    nearest = torch.topk(distances, 2, dim=1, largest=False).values.numpy()
    kept = nearest[:, 0] > 0
    if kept.sum() < 2:
        raise checks.ParameterError(name, "has fewer than two distinct rows: it lies on no surface")
    return float(kept.sum() / np.log(nearest[kept, 1] / nearest[kept, 0]).sum())


@dataclass(frozen=True)
class Encoding:
    """The codes of every row, (n, d), float64, and how they were made: d, the TwoNN dimension
    before rounding, the relative reconstruction error of the training rows (the squared error over
    the squared principal coordinates) and the principal coordinates' share of the variance."""

    codes: np.ndarray
    dimension: int
    twonn: float
    reconstruction_error: float
    explained_variance: float


def _mlp(inputs: int, hidden: int, outputs: int) -> torch.nn.Module:
    layers = [
        torch.nn.Linear(inputs, hidden),
        torch.nn.GELU(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.GELU(),
    ]
    return torch.nn.Sequential(*layers, torch.nn.Linear(hidden, outputs))


def encode(
    rows: np.ndarray,
    train: np.ndarray,
    *,
    steps: int = 1500,
    batch_size: int = 512,
    lr: float = 3e-3,
    hidden: int = 128,
    seed: int = 0,
    twonn: float | None = None,
    progress: Progress | None = None,
    name: str = "x",
) -> Encoding:
    """Codes of ``rows`` (n, p) from an autoencoder trained on ``rows[train]`` (see the module):
    as many coordinates as ``twonn`` rounded, at least 1 and at most the principal coordinates kept
    (default: the TwoNN dimension of the training rows; an encoder for two sides takes the larger
    of theirs, since near copies of each other's rows make the TwoNN dimension of their union too
    small: bumps at 10 nats, 1.5 for the union against 2.0 for each side). ``progress(step, steps,
    nan)`` every 100 steps. ``name``: the parameter the rows came as (for :func:`intrinsic_dimension`).

    >>> import numpy as np
    >>> t = np.random.default_rng(0).uniform(-1, 1, 2000)
    >>> curve = np.stack([t, t**2, t**3, np.sin(3 * t)], axis=1)        # a curve in 4 dimensions
    >>> encoding = encode(curve, np.arange(1500), steps=300)
    >>> encoding.codes.shape, encoding.dimension
    ((2000, 1), 1)
    """
    rows = np.asarray(rows, dtype=np.float64)
    training = rows[train]
    twonn = intrinsic_dimension(training, seed=seed, name=name) if twonn is None else twonn
    components = min(ENCODER_COMPONENTS, rows.shape[1], len(training))
    dimension = min(max(1, round(twonn)), components)
    mean = training.mean(0)
    _, singular, axes = np.linalg.svd(training - mean, full_matrices=False)
    scale = singular[0] / math.sqrt(len(training))
    principal = torch.as_tensor((rows - mean) @ axes[:components].T / scale, dtype=torch.float32)
    explained = float((singular[:components] ** 2).sum() / (singular**2).sum())
    linear = principal[:, :dimension] / principal[train][:, :dimension].std(0).clamp_min(1e-12)
    from mitool._infra.seeding import seeded

    with seeded(seed):  # the initial weights from a generator of their own
        encoder, decoder = _mlp(components, hidden, dimension), _mlp(dimension, hidden, components)
    torch.nn.init.zeros_(encoder[-1].weight)
    torch.nn.init.zeros_(encoder[-1].bias)
    parameters = [*encoder.parameters(), *decoder.parameters()]
    optimiser = torch.optim.Adam(parameters, lr=lr)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, lr, total_steps=steps)
    generator = torch.Generator().manual_seed(seed)
    train_rows = torch.as_tensor(np.asarray(train))
    for step in range(1, steps + 1):
        batch = train_rows[torch.randint(len(train_rows), (batch_size,), generator=generator)]
        loss = (decoder(encoder(principal[batch]) + linear[batch]) - principal[batch]).pow(2).sum(-1).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        if progress is not None and (step % 100 == 0 or step == steps):
            progress(step, steps, math.nan)
    with torch.no_grad():
        codes = encoder(principal) + linear
        target = principal[train_rows]
        error = (decoder(codes[train_rows]) - target).pow(2).sum() / target.pow(2).sum()
    return Encoding(codes.double().numpy(), dimension, twonn, float(error), explained)
