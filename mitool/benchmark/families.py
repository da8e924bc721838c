"""The ``families`` suite: laws of our own with exact MI, every task drawn from a seed (issue 50).

Unlike the ``bmi`` suites' hand-picked tasks, each family here is a function ``seed -> Task``
(:data:`FAMILIES`): the seed's numpy generator (:func:`family_generator`, keyed by the family too)
draws the dimensions, the MI and every parameter of the law and of its maps, so any number of tasks
can be made; :func:`families_suite` holds the first :data:`SUITE_SEEDS` seeds of each family, named
``<family>-<seed>``. Nothing depends on a task's name.

What a seed draws. The MI: 0 (independence) with probability :data:`INDEPENDENT_SHARE` in the
families whose law allows it, otherwise uniform on [:data:`LEAST_MI`, :data:`MOST_MI`] nats (the
Dirichlet family's range stops where its law would need a rest of concentration below
:data:`LEAST_REST`). Each side's dimension: uniform on 1 .. :data:`SMALL_DIM` (2 .. for the coupling
layers), or with probability :data:`LARGE_SHARE` on :data:`SMALL_DIM` + 1 .. :data:`MOST_DIM`.
The suite holds the laws only; it is meant for n = 1000 to 10 000 (``mitool benchmark --suite
families --sizes 1000,10000``).

A base law with closed-form MI is composed per side with random injective maps f, g: I(f(X); g(Y))
= I(X; Y), and the log density ratio of the mapped pair is the base's at (f^-1(x'), g^-1(y'))
(:class:`mitool.tasks.Mapped`: the Jacobians cancel). The families:

* ``banded-normal``: (X, Y) ~ N(0, Sigma) with AR(1) marginals Sigma_XX[i, j] = a^|i-j|,
  Sigma_YY[i, j] = b^|i-j| and a banded cross-covariance Sigma_XY = t C, C[i, j] ~ N(0, 1) where
  |i - j| <= w (w = 0 .. 3), 0 elsewhere. With s_i the singular values of
  L_X^-1 C L_Y^-T (L the Cholesky factors of the marginals),

      I = 1/2 log(det Sigma_XX det Sigma_YY / det Sigma) = -1/2 sum_i log(1 - t^2 s_i^2),

  increasing in t on [0, 1 / max s_i): t solves I = the drawn MI.
* ``factor-normal``: k = 1 .. 3 latent factors f ~ N(0, I_k) spread over every coordinate,
  X = A f + s D_X^1/2 e, Y = B f + s D_Y^1/2 e' (dense Gaussian loadings A, B, unequal noise
  variances D): Sigma_XX = A A' + s^2 D_X, Sigma_YY = B B' + s^2 D_Y, Sigma_XY = A B', and I by the
  log-determinants above. More noise is X with independent noise added, so I falls with s (to 0) and
  grows without bound as s -> 0 (k <= both dimensions): s solves I = the drawn MI. Independent tasks
  give Y factors of its own (Sigma_XY = 0).
* ``coupled-normal``: a Gaussian with canonical correlations rho_i (:func:`canonical_covariance`:
  I = -1/2 sum_i log(1 - rho_i^2), any correlation matrices on each side), each side then put
  through 2 to 4 random affine coupling layers, each after a random rotation, and a last rotation.
  A coupling layer keeps the first m coordinates a and maps the others b -> b * exp(s(a)) + t(a),
  s = c tanh(.) and t from a one-hidden-layer tanh network with random weights fixed by the seed;
  its inverse is b = (b' - t(a)) exp(-s(a)), exact.
* ``sandwich-normal``: the same Gaussian base, each side put through a rotation, then per
  coordinate an affine map u = c x + m followed by a strictly increasing shape of :data:`SHAPES`
  (sinh, asinh, x + x^3 / 3, softplus, the logistic quantile of Phi, exp, the wiggly map), then a
  second rotation.
* ``heavy-tail``: the Gaussian copula of the same base (unit marginal variances), each coordinate
  x -> F_nu^-1(Phi(x)), F_nu the Student-t distribution function with its own nu in [1, 6] (nu = 1:
  Cauchy): marginals with infinite variance or no mean, the MI the Gaussian's.
* ``multivariate-t``: the multivariate Student-t with nu degrees of freedom and a dispersion Sigma
  of canonical correlations rho_i (:class:`mitool.tasks.StudentT`):
  I = -1/2 sum_i log(1 - rho_i^2) + h(m) + h(n) - h(m + n), h of
  :func:`mitool.tasks.student_t_entropy_term`; the Student term (the shared scale's share) falls
  with nu, and nu is raised until it is a drawn share (1/5 to 4/5) of the MI where it would exceed
  it. Either side may be put through asinh per coordinate and a rotation.
* ``dirichlet``: (P_1, .., P_K) ~ Dirichlet(alpha_X, alpha_Y, a) with X the first dim_x parts, Y
  the next dim_y and one part R of concentration a left over (:class:`DirichletParts`): a law on
  a simplex with sharp edges, X and Y tied by X + Y + R = 1. With A_X, A_Y the sums of the
  concentrations of X and of Y and alpha_0 = A_X + A_Y + a (every sub-vector with its remainder
  is Dirichlet, with the concentrations summed), the log density ratio is
  (a - 1) log r - (A_Y + a - 1) log(1 - sum x) - (A_X + a - 1) log(1 - sum y) + log Gamma(A_X + a)
  + log Gamma(A_Y + a) - log Gamma(a) - log Gamma(alpha_0), and E log P = psi(alpha_P) - psi(alpha_0)
  gives

      I = log Gamma(A_X + a) + log Gamma(A_Y + a) - log Gamma(a) - log Gamma(alpha_0)
          + (a - 1) psi(a) - (A_X + a - 1) psi(A_X + a) - (A_Y + a - 1) psi(A_Y + a)
          + (alpha_0 - 1) psi(alpha_0),

  the MI of the two sums alone; it grows as a falls, and a solves I = the drawn MI. Either side
  may be put through its additive log-ratio x -> log(x_i / (1 - sum x)) (onto R^d; the inverse a
  softmax), then a rotation.

Every truth is exact (closed form; the one-dimensional root finding only chooses the parameter,
and the truth is computed from the parameter found), and ``tests/test_families.py`` checks each
family's against an independent computation: scipy's entropies of the Gaussian, Student-t and
Dirichlet laws, and the Monte Carlo mean of the log density ratio.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from scipy import optimize, special

from mitool import checks, maps
from mitool._infra.lazy import lazy_import
from mitool.tasks import Mapped, MultivariateNormal, StudentT, Task, mi_to_rho, student_t_entropy_term

if TYPE_CHECKING:
    from torch import Tensor

torch = lazy_import("torch")

__all__ = [
    "FAMILIES",
    "SHAPES",
    "DirichletParts",
    "canonical_covariance",
    "dirichlet_mi",
    "families_suite",
    "family_generator",
    "family_task",
]

MOST_MI = 4.0
LEAST_MI = 0.05
"""The drawn MI of a dependent task: uniform on [LEAST_MI, MOST_MI] nats."""

INDEPENDENT_SHARE = 0.2
"""The chance of an independent task (MI 0) in the families whose law allows one."""

SMALL_DIM, MOST_DIM, LARGE_SHARE = 10, 30, 0.15
"""A side's dimension: uniform on 1 .. SMALL_DIM, or with chance LARGE_SHARE on SMALL_DIM + 1 ..
MOST_DIM."""

SUITE_SEEDS = 4
"""Seeds 0 .. SUITE_SEEDS - 1 of every family make the suite."""

LEAST_REST = 0.6
"""The least concentration a of the Dirichlet family's leftover part R. R ~ Beta(a, b), b the sum of
the other concentrations, and below R = 1e-12 the computed 1 - sum x - sum y, on which the log
density ratio depends, keeps at most 4 correct digits: that happens in 5 to 10 draws of 1000 at
a = 0.2 (b = 2 to 60), in 1 to 8 of 10^7 at a = 0.6."""

_HIDDEN = 16
"""The hidden width of the coupling layers' networks."""


# ----------------------------------------------------------------------------------------------
# draws from a seed


def family_generator(family: str, seed: int) -> np.random.Generator:
    """The numpy generator of task ``<family>-<seed>``: PCG64 seeded with (CRC-32 of the family's
    name, seed), so that the families draw apart for the same seed, reproducibly everywhere."""
    checks.whole_number("seed", seed, 0)
    return np.random.default_rng([zlib.crc32(family.encode()), seed])


def _draw_dim(rng: np.random.Generator, least: int = 1) -> int:
    if rng.random() < LARGE_SHARE:
        return int(rng.integers(SMALL_DIM + 1, MOST_DIM + 1))
    return int(rng.integers(least, SMALL_DIM + 1))


def _draw_mi(rng: np.random.Generator, independent: bool, most: float = MOST_MI) -> float:
    """0 with chance :data:`INDEPENDENT_SHARE` where ``independent``, else uniform on [LEAST_MI, most]."""
    if independent and rng.random() < INDEPENDENT_SHARE:
        return 0.0
    return float(rng.uniform(LEAST_MI, most))


def _haar(rng: np.random.Generator, dim: int) -> np.ndarray:
    """A Haar-distributed orthogonal (dim, dim) matrix: Q of the QR factorisation of a Gaussian
    matrix, the signs fixed so that R has a positive diagonal."""
    q, r = np.linalg.qr(rng.standard_normal((dim, dim)))
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)[None, :]


def _random_correlation(rng: np.random.Generator, dim: int) -> np.ndarray:
    """G G' + diag(v) scaled to a unit diagonal: G (dim, m) Gaussian with m = 1 .. dim columns,
    v uniform on [0.2, 1] (positive definite, correlations of either sign and any size)."""
    columns = int(rng.integers(1, dim + 1))
    loadings = rng.standard_normal((dim, columns))
    covariance = loadings @ loadings.T + np.diag(rng.uniform(0.2, 1.0, dim))
    scale = 1.0 / np.sqrt(np.diag(covariance))
    return covariance * scale[:, None] * scale[None, :]


def _symmetric_tensor(matrix: np.ndarray) -> Tensor:
    return torch.from_numpy(np.ascontiguousarray(0.5 * (matrix + matrix.T)))


def _joint(within_x: np.ndarray, cross: np.ndarray, within_y: np.ndarray) -> np.ndarray:
    return np.block([[within_x, cross], [cross.T, within_y]])


def _normal(covariance: np.ndarray, dim_x: int, drawn_mi: float) -> MultivariateNormal:
    """N(0, Sigma) with X the first ``dim_x`` coordinates; its MI exactly 0 where the drawn MI was 0
    (Sigma_XY = 0: the log-determinants would leave a rounding error of either sign)."""
    law = MultivariateNormal(_symmetric_tensor(covariance), dim_x)
    if drawn_mi == 0.0:
        law.mi = 0.0  # also the constant of its log density ratio (then 0 up to rounding)
    return law


def _gaussian_mi(covariance: np.ndarray, dim_x: int) -> float:
    """1/2 log(det Sigma_XX det Sigma_YY / det Sigma) in float64."""
    log_det = [
        np.linalg.slogdet(block)[1]
        for block in (covariance[:dim_x, :dim_x], covariance[dim_x:, dim_x:], covariance)
    ]
    return 0.5 * float(log_det[0] + log_det[1] - log_det[2])


def canonical_covariance(rng: np.random.Generator, dim_x: int, dim_y: int, mi: float) -> np.ndarray:
    """A joint covariance of (X, Y) with unit variances and MI ``mi``:
    [[R_X, L_X C L_Y'], [L_Y C' L_X', R_Y]], R random correlation matrices with Cholesky factors L,
    and C (dim_x, dim_y) zero but for C[i, i] = rho_i on k = 1 .. min(dim_x, dim_y) canonical pairs,
    the pairs sharing ``mi`` by Dirichlet(1, .., 1) weights w_i, rho_i = sqrt(1 - exp(-2 w_i mi)). It is
    [[I, C], [C', I]] with each side mapped linearly by its L, so I = -1/2 sum_i log(1 - rho_i^2) = mi."""
    within_x, within_y = _random_correlation(rng, dim_x), _random_correlation(rng, dim_y)
    pairs = int(rng.integers(1, min(dim_x, dim_y) + 1))
    shares = rng.dirichlet(np.ones(pairs)) * mi
    canonical = np.zeros((dim_x, dim_y))
    for i, share in enumerate(shares):
        canonical[i, i] = mi_to_rho(float(share), 1)
    cross = np.linalg.cholesky(within_x) @ canonical @ np.linalg.cholesky(within_y).T
    return _joint(within_x, cross, within_y)


# ----------------------------------------------------------------------------------------------
# maps of one side (each for one dimension, from the seed's generator)


def _chain(name: str, parts: Sequence[maps.Map], dim: int) -> maps.Map:
    """The maps ``parts`` one after the other (the inverse: their inverses in reverse order)."""

    def forward(rows: Tensor) -> Tensor:
        for part in parts:
            rows = part.forward(rows)
        return rows

    def inverse(rows: Tensor) -> Tensor:
        for part in reversed(parts):
            rows = part.inverse(rows)
        return rows

    return maps.Map(name, forward, inverse, " then ".join(part.summary for part in parts), dim, dim)


def _rotation_map(rng: np.random.Generator, dim: int) -> maps.Map:
    """x -> Q x for a Haar-distributed orthogonal Q (:func:`_haar`); the inverse z -> Q' z."""
    q = torch.from_numpy(np.ascontiguousarray(_haar(rng, dim)))
    return maps.Map("rotation", lambda x: x @ q.T, lambda z: z @ q, f"a random {dim}-d rotation", dim, dim)


def _coupling_map(rng: np.random.Generator, dim: int) -> maps.Map:
    """An affine coupling layer with random weights: a = x[:m] kept (m = 1 .. dim - 1), b = x[m:] ->
    b * exp(s(a)) + t(a) with h = tanh(a W1 + b1), s = c tanh(h Ws + bs), t = h Wt + bt, gains drawn
    in [1, 2.5] and c in [0.3, 1] (each scale factor within e^-1 .. e). Needs dim >= 2."""
    kept = int(rng.integers(1, dim))
    changed, gain, bound = dim - kept, float(rng.uniform(1.0, 2.5)), float(rng.uniform(0.3, 1.0))

    def tensor(scale: float, *shape: int) -> Tensor:
        return torch.from_numpy(rng.normal(0.0, scale, shape))

    w1, b1 = tensor(gain / math.sqrt(kept), kept, _HIDDEN), tensor(0.5, _HIDDEN)
    ws, bs = tensor(1.0 / math.sqrt(_HIDDEN), _HIDDEN, changed), tensor(0.5, changed)
    wt, bt = tensor(gain / math.sqrt(_HIDDEN), _HIDDEN, changed), tensor(0.5, changed)

    def shift_and_log_scale(kept_part: Tensor) -> tuple[Tensor, Tensor]:
        hidden = torch.tanh(kept_part @ w1 + b1)
        return hidden @ wt + bt, bound * torch.tanh(hidden @ ws + bs)

    def forward(x: Tensor) -> Tensor:
        shift, log_scale = shift_and_log_scale(x[:, :kept])
        return torch.cat([x[:, :kept], x[:, kept:] * torch.exp(log_scale) + shift], dim=1)

    def inverse(z: Tensor) -> Tensor:
        shift, log_scale = shift_and_log_scale(z[:, :kept])
        return torch.cat([z[:, :kept], (z[:, kept:] - shift) * torch.exp(-log_scale)], dim=1)

    return maps.Map("coupling", forward, inverse, f"a coupling layer keeping {kept} of {dim}", dim, dim)


def _cubic_inverse(z: Tensor) -> Tensor:
    """The root of x + x^3 / 3 = z: 2 sinh(asinh(3 z / 2) / 3) (sinh 3u = 3 sinh u + 4 sinh^3 u)."""
    return 2.0 * torch.sinh(torch.asinh(1.5 * z) / 3.0)


def _softplus(x: Tensor) -> Tensor:
    return x.clamp_min(0.0) + torch.log1p(torch.exp(-x.abs()))


def _softplus_inverse(z: Tensor) -> Tensor:
    """log(e^z - 1), as z + log(1 - e^-z) above log 2 (no overflow) and log(expm1 z) below."""
    above = z + torch.log1p(-torch.exp(-z.clamp_min(math.log(2.0))))
    below = torch.log(torch.expm1(z.clamp_max(math.log(2.0))))
    return torch.where(z > math.log(2.0), above, below)


def _logistic_quantile(x: Tensor) -> Tensor:
    """logit(Phi(x)) = log Phi(x) - log Phi(-x): a normal variable becomes a logistic one."""
    return torch.special.log_ndtr(x) - torch.special.log_ndtr(-x)


def _logistic_quantile_inverse(z: Tensor) -> Tensor:
    """Phi^-1(sigmoid(z)), through the lower tail for both signs (the map is odd)."""
    return -torch.sign(z) * torch.special.ndtri(torch.sigmoid(-z.abs()))


SHAPES: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[Tensor], Tensor]]] = {
    "sinh": (lambda x: torch.sinh(x), lambda z: torch.asinh(z)),
    "asinh": (lambda x: torch.asinh(x), lambda z: torch.sinh(z)),
    "cubic": (lambda x: x + x.pow(3) / 3.0, _cubic_inverse),
    "softplus": (_softplus, _softplus_inverse),
    "logistic": (_logistic_quantile, _logistic_quantile_inverse),
    "exp": (lambda x: torch.exp(x), lambda z: torch.log(z)),
    "wiggly": (maps.MAPS["wiggly"].forward, maps.MAPS["wiggly"].inverse),
}
"""Strictly increasing shapes of one coordinate, (forward, inverse)."""


def _shapes_map(rng: np.random.Generator, dim: int, names: Sequence[str] = tuple(SHAPES)) -> maps.Map:
    """Per coordinate j: u = c_j x_j + m_j (c_j in [0.5, 1.5], m_j in [-0.5, 0.5]), then the shape
    of :data:`SHAPES` drawn for j from ``names``."""
    chosen = [names[int(i)] for i in rng.integers(0, len(names), dim)]
    scale, offset = (
        torch.from_numpy(rng.uniform(0.5, 1.5, dim)),
        torch.from_numpy(rng.uniform(-0.5, 0.5, dim)),
    )
    columns = {name: [j for j in range(dim) if chosen[j] == name] for name in dict.fromkeys(chosen)}

    def forward(x: Tensor) -> Tensor:
        out = torch.empty_like(x)
        for name, js in columns.items():
            out[:, js] = SHAPES[name][0](x[:, js] * scale[js] + offset[js])
        return out

    def inverse(z: Tensor) -> Tensor:
        out = torch.empty_like(z)
        for name, js in columns.items():
            out[:, js] = (SHAPES[name][1](z[:, js]) - offset[js]) / scale[js]
        return out

    return maps.Map("shapes", forward, inverse, f"shapes {', '.join(chosen)} per coordinate", dim, dim)


def _student_quantile_map(rng: np.random.Generator, dim: int) -> maps.Map:
    """x_j -> F_nu_j^-1(Phi(x_j)), nu_j log-uniform on [1, 6]; computed through the lower tail for
    both signs (the map is odd): -sign(x) F^-1(Phi(-|x|)), inverse -sign(z) Phi^-1(F(-|z|))."""
    dof = np.exp(rng.uniform(0.0, math.log(6.0), dim))

    def forward(x: Tensor) -> Tensor:
        lower = special.stdtrit(dof, special.ndtr(-x.abs().numpy()))
        return -torch.sign(x) * torch.from_numpy(lower)

    def inverse(z: Tensor) -> Tensor:
        lower = special.ndtri(special.stdtr(dof, -z.abs().numpy()))
        return -torch.sign(z) * torch.from_numpy(lower)

    summary = f"Student-t quantiles of Phi, nu = {', '.join(f'{nu:.2f}' for nu in dof)}"
    return maps.Map("student-quantiles", forward, inverse, summary, dim, dim)


def _log_ratio_map(dim: int) -> maps.Map:
    """The additive log-ratio of the open simplex {x > 0, sum x < 1}: z_i = log x_i - log(1 - sum x),
    onto R^dim; the inverse x = softmax(z, 0) without its last entry."""

    def forward(x: Tensor) -> Tensor:
        return torch.log(x) - torch.log1p(-x.sum(dim=1, keepdim=True))

    def inverse(z: Tensor) -> Tensor:
        padded = torch.cat([z, torch.zeros(len(z), 1, dtype=z.dtype)], dim=1)
        return torch.softmax(padded, dim=1)[:, :-1]

    return maps.Map("log-ratio", forward, inverse, "the additive log-ratio of the simplex", dim, dim)


def _mapped(base: Task, x_map: maps.Map | None, y_map: maps.Map | None, family: str, seed: int) -> Task:
    task = Mapped(base, x_map, y_map, name=f"{family}-{seed}")
    task.family = family
    return task


def _named(task: Task, family: str, seed: int) -> Task:
    task.name, task.family = f"{family}-{seed}", family
    return task


# ----------------------------------------------------------------------------------------------
# the families


def _ar1(dim: int, coefficient: float) -> np.ndarray:
    index = np.arange(dim)
    return coefficient ** np.abs(index[:, None] - index[None, :])


def banded_normal(seed: int) -> Task:
    """The ``banded-normal`` family (module docstring): AR(1) marginals with coefficients in
    [-0.6, 0.9], a cross-covariance t C of band width 0 .. 3."""
    family = "banded-normal"
    rng = family_generator(family, seed)
    dim_x, dim_y = _draw_dim(rng), _draw_dim(rng)
    mi = _draw_mi(rng, independent=True)
    width = int(rng.integers(0, 4))
    within_x, within_y = _ar1(dim_x, rng.uniform(-0.6, 0.9)), _ar1(dim_y, rng.uniform(-0.6, 0.9))
    band = np.abs(np.arange(dim_x)[:, None] - np.arange(dim_y)[None, :]) <= width
    cross = rng.standard_normal((dim_x, dim_y)) * band
    whitened = np.linalg.solve(np.linalg.cholesky(within_x), cross)
    whitened = np.linalg.solve(np.linalg.cholesky(within_y), whitened.T).T
    singular = np.linalg.svd(whitened, compute_uv=False)
    relative = singular / singular[0]

    def excess(fraction: float) -> float:  # I at t = fraction / max s_i, less the drawn MI
        return -0.5 * float(np.log1p(-((fraction * relative) ** 2)).sum()) - mi

    fraction = 0.0 if mi == 0.0 else optimize.brentq(excess, 0.0, 1.0 - 1e-15, xtol=1e-15, rtol=1e-15)
    scale = fraction / singular[0]
    covariance = _joint(within_x, scale * cross, within_y)
    return _named(_normal(covariance, dim_x, mi), family, seed)


def factor_normal(seed: int) -> Task:
    """The ``factor-normal`` family (module docstring): k = 1 .. min(3, dim_x, dim_y) factors,
    noise variances s^2 d_j with d_j uniform on [0.5, 2]."""
    family = "factor-normal"
    rng = family_generator(family, seed)
    dim_x, dim_y = _draw_dim(rng), _draw_dim(rng)
    mi = _draw_mi(rng, independent=True)
    factors = int(rng.integers(1, min(3, dim_x, dim_y) + 1))
    load_x, load_y = rng.standard_normal((dim_x, factors)), rng.standard_normal((dim_y, factors))
    noise_x, noise_y = rng.uniform(0.5, 2.0, dim_x), rng.uniform(0.5, 2.0, dim_y)
    shared = 0.0 if mi == 0.0 else 1.0  # independent: Y loads on factors of its own

    def covariance(log_noise: float) -> np.ndarray:
        variance = math.exp(2.0 * log_noise)
        return _joint(
            load_x @ load_x.T + variance * np.diag(noise_x),
            shared * load_x @ load_y.T,
            load_y @ load_y.T + variance * np.diag(noise_y),
        )

    log_noise = 0.0
    if mi > 0.0:
        log_noise = optimize.brentq(
            lambda s: _gaussian_mi(covariance(s), dim_x) - mi, -10.0, 10.0, xtol=1e-13
        )
    return _named(_normal(covariance(log_noise), dim_x, mi), family, seed)


def _canonical_normal(rng: np.random.Generator, least_dim: int, independent: bool) -> MultivariateNormal:
    dim_x, dim_y = _draw_dim(rng, least_dim), _draw_dim(rng, least_dim)
    mi = _draw_mi(rng, independent)
    return _normal(canonical_covariance(rng, dim_x, dim_y, mi), dim_x, mi)


def coupled_normal(seed: int) -> Task:
    """The ``coupled-normal`` family (module docstring): dimensions 2 and up a side."""
    family = "coupled-normal"
    rng = family_generator(family, seed)
    base = _canonical_normal(rng, 2, independent=True)

    def side(dim: int) -> maps.Map:
        layers = int(rng.integers(2, 5))
        parts = [part for _ in range(layers) for part in (_rotation_map(rng, dim), _coupling_map(rng, dim))]
        return _chain(f"{layers}-couplings", [*parts, _rotation_map(rng, dim)], dim)

    return _mapped(base, side(base.dim_x), side(base.dim_y), family, seed)


def sandwich_normal(seed: int) -> Task:
    """The ``sandwich-normal`` family (module docstring)."""
    family = "sandwich-normal"
    rng = family_generator(family, seed)
    base = _canonical_normal(rng, 1, independent=True)

    def side(dim: int) -> maps.Map:
        parts = [_rotation_map(rng, dim), _shapes_map(rng, dim), _rotation_map(rng, dim)]
        return _chain("sandwich", parts, dim)

    return _mapped(base, side(base.dim_x), side(base.dim_y), family, seed)


def heavy_tail(seed: int) -> Task:
    """The ``heavy-tail`` family (module docstring)."""
    family = "heavy-tail"
    rng = family_generator(family, seed)
    base = _canonical_normal(rng, 1, independent=True)
    x_map, y_map = _student_quantile_map(rng, base.dim_x), _student_quantile_map(rng, base.dim_y)
    return _mapped(base, x_map, y_map, family, seed)


def _student_term(dim_x: int, dim_y: int, dof: float) -> float:
    """h(m) + h(n) - h(m + n): the MI of a Student-t with no cross-dispersion."""
    return (
        student_t_entropy_term(dim_x, dof)
        + student_t_entropy_term(dim_y, dof)
        - student_t_entropy_term(dim_x + dim_y, dof)
    )


def multivariate_t(seed: int) -> Task:
    """The ``multivariate-t`` family (module docstring): nu log-uniform on [1, 10], raised where the
    Student term would exceed its drawn share of the MI; each side put through asinh and a rotation
    with chance 1/2."""
    family = "multivariate-t"
    rng = family_generator(family, seed)
    dim_x, dim_y = _draw_dim(rng), _draw_dim(rng)
    mi = _draw_mi(rng, independent=False)
    dof, share = math.exp(rng.uniform(0.0, math.log(10.0))), float(rng.uniform(0.2, 0.8))
    if _student_term(dim_x, dim_y, dof) > share * mi:
        log_dof = optimize.brentq(
            lambda v: _student_term(dim_x, dim_y, math.exp(v)) - share * mi, math.log(dof), math.log(1e5),
            xtol=1e-12,
        )  # fmt: skip
        dof = math.exp(log_dof)
    gaussian_part = mi - _student_term(dim_x, dim_y, dof)
    dispersion = _symmetric_tensor(canonical_covariance(rng, dim_x, dim_y, gaussian_part))
    base = StudentT(dispersion, dim_x, dof)

    def side(dim: int) -> maps.Map | None:
        if rng.random() < 0.5:
            return None
        return _chain("asinh-rotation", [_shapes_map(rng, dim, ("asinh",)), _rotation_map(rng, dim)], dim)

    return _mapped(base, side(dim_x), side(dim_y), family, seed)


def dirichlet_mi(total_x: float, total_y: float, rest: float) -> float:
    """I(X; Y) of :class:`DirichletParts` from A_X, A_Y (the sums of the concentrations of X and of
    Y) and a (the leftover part's): the formula of the module docstring."""
    a, total = rest, total_x + total_y + rest
    log_gamma, psi = special.gammaln, special.digamma
    return float(
        log_gamma(total_x + a) + log_gamma(total_y + a) - log_gamma(a) - log_gamma(total)
        + (a - 1.0) * psi(a) - (total_x + a - 1.0) * psi(total_x + a)
        - (total_y + a - 1.0) * psi(total_y + a) + (total - 1.0) * psi(total)
    )  # fmt: skip


class DirichletParts(Task):
    """(X, Y, R) ~ Dirichlet(alpha_X, alpha_Y, a): X the first dim_x parts, Y the next dim_y, R the
    leftover part (one more coordinate of concentration ``rest``). I and the log density ratio: the
    module docstring (:func:`dirichlet_mi`); the ratio is -inf off the simplex."""

    family = "dirichlet"

    def __init__(self, x_concentration: Sequence[float], y_concentration: Sequence[float], rest: float,
                 name: str = "dirichlet") -> None:  # fmt: skip
        self.x_concentration = np.asarray(x_concentration, dtype=np.float64)
        self.y_concentration = np.asarray(y_concentration, dtype=np.float64)
        self.rest = checks.positive("rest", rest)
        if not (self.x_concentration > 0).all() or not (self.y_concentration > 0).all():
            raise checks.ParameterError("concentration", "must be positive")
        self.dim_x, self.dim_y, self.name = len(self.x_concentration), len(self.y_concentration), name
        self.total_x, self.total_y = float(self.x_concentration.sum()), float(self.y_concentration.sum())
        self.mi = dirichlet_mi(self.total_x, self.total_y, self.rest)
        a, total = self.rest, self.total_x + self.total_y + self.rest
        self._constant = float(
            special.gammaln(self.total_x + a) + special.gammaln(self.total_y + a) - special.gammaln(a)
            - special.gammaln(total)
        )  # fmt: skip

    def _draw(self, n: int, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
        """Gamma variates normalised by their sum, from a numpy generator seeded by ``generator``."""
        seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        concentration = np.concatenate([self.x_concentration, self.y_concentration, [self.rest]])
        gammas = np.random.default_rng(seed).standard_gamma(concentration, size=(n, len(concentration)))
        parts = torch.from_numpy(gammas / gammas.sum(axis=1, keepdims=True))
        return parts[:, : self.dim_x], parts[:, self.dim_x : self.dim_x + self.dim_y]

    def log_density_ratio(self, x: Tensor, y: Tensor) -> Tensor:
        sum_x, sum_y = x.double().sum(-1), y.double().sum(-1)
        left = 1.0 - sum_x - sum_y
        inside = (left > 0) & (x.double() > 0).all(-1) & (y.double() > 0).all(-1)
        a = self.rest
        ratio = (
            (a - 1.0) * torch.log(left.clamp_min(1e-300))
            - (self.total_y + a - 1.0) * torch.log1p(-sum_x)
            - (self.total_x + a - 1.0) * torch.log1p(-sum_y)
            + self._constant
        )
        return torch.where(inside, ratio, torch.full_like(ratio, -math.inf))


def dirichlet(seed: int) -> Task:
    """The ``dirichlet`` family (module docstring): concentrations of X and Y uniform on [0.5, 3],
    the leftover's a >= :data:`LEAST_REST` chosen for the drawn MI (at most the MI at a = LEAST_REST,
    and :data:`MOST_MI`); each side raw (on the simplex), its log-ratio, or its log-ratio rotated."""
    family = "dirichlet"
    rng = family_generator(family, seed)
    dim_x, dim_y = _draw_dim(rng), _draw_dim(rng)
    alpha_x, alpha_y = rng.uniform(0.5, 3.0, dim_x), rng.uniform(0.5, 3.0, dim_y)
    total_x, total_y = float(alpha_x.sum()), float(alpha_y.sum())
    mi = _draw_mi(rng, independent=False, most=min(MOST_MI, dirichlet_mi(total_x, total_y, LEAST_REST)))
    log_rest = optimize.brentq(
        lambda v: dirichlet_mi(total_x, total_y, math.exp(v)) - mi, math.log(LEAST_REST), math.log(1e8),
        xtol=1e-13,
    )  # fmt: skip
    base = DirichletParts(alpha_x, alpha_y, math.exp(log_rest))

    def side(dim: int) -> maps.Map | None:
        form = int(rng.integers(0, 3))
        if form == 0:
            return None
        parts = [_log_ratio_map(dim)] + ([_rotation_map(rng, dim)] if form == 2 else [])
        return _chain("log-ratio" + ("-rotation" if form == 2 else ""), parts, dim)

    return _mapped(base, side(dim_x), side(dim_y), family, seed)


FAMILIES: dict[str, Callable[[int], Task]] = {
    "banded-normal": banded_normal,
    "factor-normal": factor_normal,
    "coupled-normal": coupled_normal,
    "sandwich-normal": sandwich_normal,
    "heavy-tail": heavy_tail,
    "multivariate-t": multivariate_t,
    "dirichlet": dirichlet,
}
"""Family name -> the function making its task of a seed (named ``<family>-<seed>``)."""


def family_task(family: str, seed: int) -> Task:
    """Task ``<family>-<seed>`` of :data:`FAMILIES`."""
    return FAMILIES[checks.choice("family", family, FAMILIES)](seed)


def families_suite(seeds: int = SUITE_SEEDS) -> list[Task]:
    """The ``families`` suite: seeds 0 .. ``seeds`` - 1 of every family, family by family."""
    return [make(seed) for make in FAMILIES.values() for seed in range(seeds)]
