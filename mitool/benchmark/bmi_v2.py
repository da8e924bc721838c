"""The 26 tasks of the "Beyond Normal" benchmark's second version (the ``bmi-v2`` suite).

cbg-ethz/bmi lists them in ``workflows/benchmark/v2/config.py``; the new families are defined in
``src/bmi/benchmark/tasks/mixtures.py`` as "Bend and Mix Models" (``src/bmi/samplers/_tfp/``:
Gaussian mixtures whose joint and marginal densities are all exact mixtures). Each task here is
named by bmi's task id, in bmi's order, and standardised column by column (:class:`Standardised`),
as that config wraps every task in ``transform_rescale`` (``sklearn.preprocessing.scale``); the
affine map leaves the MI unchanged. Thirteen tasks are v1 tasks (the same laws as the ``bmi`` suite's
tasks of the same id, taken from it); the other thirteen are Gaussian mixtures, two of them under an
invertible map of X:

* ``1v1-X-0.9`` (``task_x``): 1/2 N(0, [[1, 0.9], [0.9, 1]]) + 1/2 N(0, [[1, -0.9], [-0.9, 1]]);
* ``1v1-AI`` (``task_ai``): six equally weighted bivariate normals drawing the letters "A" and
  "I": means (1, 0), (1, 1), (1, -1), (-0.8, -0.2), (-1.2, 0), (-0.4, 0) and covariances
  diag(0.01, 0.2), diag(0.05, 0.001) twice, diag(0.03, 0.001), and [[0.04, +-c], [+-c, 0.2]] with
  c = 0.95 sqrt(0.04 * 0.2) (the two legs of the A);
* ``2v1-waves-12-5.0-3.0`` (``task_waves``): K uniform on {0, .., 11}; (X1, X2, Y) ~
  N(1.5 (K, 0, K mod 4), diag(0.1, 1, 0.1)); then X -> (0.1 (x1 + 5 sin(3 x2)) - 0.8, 0.5 x2);
* ``2v1-galaxy-0.5-3.0`` (``task_galaxy``): 1/2 N(-1.5 (1, 1, 1), I_3) + 1/2 N(1.5 (1, 1, 1), I_3)
  over (X1, X2, Y); then X -> R(0.5 |x|^2) x, R(t) the rotation of the plane by the angle t (bmi's
  ``Spiral`` with generator [[0, -1], [1, 0]] and speed 0.5, not divided by the dimension);
* ``<d>v1-concentric_gaussians-<K>`` (``task_concentric_multinormal``), d = 3, 5, 25 and K = 5,
  10: component i = 1..K of weight 1/K is X ~ N(0, i^2 I_d), Y ~ N(i, 10^-4), independent
  within the component: the scale of X carries the information about Y;
* ``mult-sparse-w-inliers-<d>-<d>-2-2.0-<f>`` (``task_multinormal_sparse_w_inliers``), d = 5, 25
  and f = 0.2, 0.5: (1 - f) N(0, S) + f N(0, S_XX) x N(0, S_YY), S the 2-pair correlation of
  ``multinormal-sparse`` (x_i, y_i correlated by 0.8 for i = 1, 2; bmi's LVM with lambda = eta = 2):
  a fraction f of the pairs is drawn from the product of the marginals (bmi calls f the "inlier
  fraction"). Both components have the marginals N(0, S_XX) and N(0, S_YY).

Truths. The v1 tasks keep their closed forms (:mod:`mitool.tasks`: Gaussian, Student-t, additive
uniform 1 / (4 eps) for eps > 1/2, all invariant under the maps). No mixture has a closed form:
their MI is the Monte Carlo mean of the exact pointwise MI log p(x, y) - log p(x) - log p(y) of the
untransformed mixture (the maps of X are diffeomorphisms, so it is the MI of the mapped task; the
densities are exact mixtures of Gaussians evaluated in float64), over n draws:
:data:`MONTE_CARLO_MI` holds (mean, standard error) from

    python -m mitool.benchmark.bmi_v2 --n 2000000 --seed 0

(:func:`monte_carlo_mi` (task, n, seed) per task), each standard error at most 0.005 nats.
bmi does the same in float32 over 100 000 draws (``BMMSampler``, seed 0): its values agree within
their larger error. Low-dimensional quadratures confirm them (``tests/test_bmi_v2.py``): the
concentric MI is I(|X|; K) of scaled chi laws (Y names its component: their Y lie 100
standard deviations apart); the inliers' pointwise MI is log((1 - f) e^g + f) with g the Gaussian one,
which depends on two exponential variables only; waves and galaxy reduce to two dimensions.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mitool import maps
from mitool._infra.lazy import lazy_import
from mitool.benchmark.bmi_v1 import bmi_v1_suite
from mitool.tasks import Mapped, Standardised, Task

if TYPE_CHECKING:
    from torch import Tensor

torch = lazy_import("torch")

__all__ = ["MONTE_CARLO_MI", "GaussianMixture", "bmi_v2_suite", "is_mixture", "monte_carlo_mi"]


MONTE_CARLO_MI: dict[str, tuple[float, float]] = {
    "1v1-X-0.9": (0.409812, 0.000529),
    "1v1-AI": (0.774950, 0.000616),
    "2v1-waves-12-5.0-3.0": (1.306680, 0.000272),
    "2v1-galaxy-0.5-3.0": (0.494329, 0.000361),
    "3v1-concentric_gaussians-5": (0.455561, 0.000472),
    "5v1-concentric_gaussians-5": (0.627654, 0.000503),
    "3v1-concentric_gaussians-10": (0.560132, 0.000528),
    "5v1-concentric_gaussians-10": (0.751696, 0.000564),
    "25v1-concentric_gaussians-5": (1.190124, 0.000449),
    "mult-sparse-w-inliers-5-5-2-2.0-0.2": (0.636224, 0.000819),
    "mult-sparse-w-inliers-25-25-2-2.0-0.2": (0.635903, 0.000818),
    "mult-sparse-w-inliers-5-5-2-2.0-0.5": (0.269735, 0.000594),
    "mult-sparse-w-inliers-25-25-2-2.0-0.5": (0.269579, 0.000594),
}
"""Task id -> (MI in nats, its standard error) of each mixture: the mean of the exact pointwise MI
over 2 000 000 draws, seed 0 (:func:`monte_carlo_mi`; ``python -m mitool.benchmark.bmi_v2``)."""


class GaussianMixture(Task):
    """(X, Y) from the mixture sum_k w_k N(mu_k, Sigma_k) over the dim_x + dim_y coordinates, X
    the first dim_x. The marginals are the mixtures of the components' marginals with the same
    weights, so log p(x, y), log p(x) and log p(y) are all exact (log-sum-exp over components).

    ``mi``: the MI in nats (there is no closed form; see :func:`monte_carlo_mi`), ``mi_error``
    its standard error."""

    family = "mixture"

    def __init__(
        self, name: str, weights: Sequence[float], means: Sequence[Sequence[float]],
        covariances: Sequence[Sequence[Sequence[float]]], dim_x: int, mi: float = math.nan,
        mi_error: float = math.nan,
    ) -> None:  # fmt: skip
        self.name = name
        self.weights = torch.as_tensor(weights, dtype=torch.float64)
        self.means = torch.as_tensor(means, dtype=torch.float64)
        self.covariances = torch.as_tensor(covariances, dtype=torch.float64)
        count, total = self.means.shape
        if self.weights.shape != (count,) or self.covariances.shape != (count, total, total):
            raise ValueError(f"{name}: weights, means and covariances disagree in shape")
        if not (self.weights > 0).all() or abs(float(self.weights.sum()) - 1.0) > 1e-12:
            raise ValueError(f"{name}: the weights must be positive and sum to 1")
        self.dim_x, self.dim_y = dim_x, total - dim_x
        self.mi, self.mi_error = mi, mi_error
        self._cholesky = torch.linalg.cholesky(self.covariances)
        self._joint = (self.means, self._cholesky)
        self._x, self._y = (
            (self.means[:, part], torch.linalg.cholesky(self.covariances[:, part, part]))
            for part in (slice(0, dim_x), slice(dim_x, total))
        )

    def _draw(self, n: int, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
        component = torch.multinomial(self.weights, n, replacement=True, generator=generator)
        noise = torch.randn(n, self.means.shape[1], generator=generator, dtype=torch.float64)
        rows = self.means[component] + torch.einsum("nij,nj->ni", self._cholesky[component], noise)
        return rows[:, : self.dim_x], rows[:, self.dim_x :]

    def _log_density(self, rows: Tensor, part: tuple[Tensor, Tensor]) -> Tensor:
        """log sum_k w_k N(rows; mu_k, L_k L_k') for rows of any leading shape."""
        means, cholesky = part
        dim = means.shape[1]
        flat = rows.double().reshape(-1, dim)
        terms = []
        for k in range(means.shape[0]):
            white = torch.linalg.solve_triangular(cholesky[k], (flat - means[k]).T, upper=False)
            log_det = torch.log(torch.diagonal(cholesky[k])).sum()
            terms.append(-0.5 * white.pow(2).sum(0) - log_det)
        stacked = torch.stack(terms, dim=1) + torch.log(self.weights)
        log_density = torch.logsumexp(stacked, dim=1) - 0.5 * dim * math.log(2.0 * math.pi)
        return log_density.reshape(rows.shape[:-1])

    def log_density_ratio(self, x: Tensor, y: Tensor) -> Tensor:
        x, y = x.double(), y.double()
        shape = torch.broadcast_shapes(x.shape[:-1], y.shape[:-1])
        x, y = x.expand(*shape, self.dim_x), y.expand(*shape, self.dim_y)
        joint = self._log_density(torch.cat([x, y], dim=-1), self._joint)
        return joint - self._log_density(x, self._x) - self._log_density(y, self._y)


# ----------------------------------------------------------------------------------------------
# the maps of X of the waves and the galaxy


def waves_map(amplitude: float = 5.0, frequency: float = 3.0) -> maps.Map:
    """bmi's waves of X: (x1, x2) -> (0.1 (x1 + a sin(f x2)) - 0.8, 0.5 x2), triangular and so
    invertible: x2 = 2 z2, x1 = 10 (z1 + 0.8) - a sin(f x2)."""

    def forward(x: Tensor) -> Tensor:
        first = x[:, 0] + amplitude * torch.sin(frequency * x[:, 1])
        return torch.stack([0.1 * first - 0.8, 0.5 * x[:, 1]], dim=1)

    def inverse(z: Tensor) -> Tensor:
        second = 2.0 * z[:, 1]
        first = 10.0 * (z[:, 0] + 0.8) - amplitude * torch.sin(frequency * second)
        return torch.stack([first, second], dim=1)

    summary = f"(x1, x2) -> (0.1 (x1 + {amplitude:g} sin {frequency:g} x2) - 0.8, 0.5 x2)"
    return maps.Map("bmi-waves", forward, inverse, summary, 2, 2)


def galaxy_map(speed: float = 0.5) -> maps.Map:
    """bmi's ``Spiral`` of the plane with generator [[0, -1], [1, 0]] and ``speed``: x -> R(speed
    |x|^2) x, R(t) the rotation by the angle t (exp(t A)); the turn keeps |x|, so turning back by
    speed |x|^2 inverts it."""

    def turn(x: Tensor, sign: float) -> Tensor:
        angle = sign * speed * x.pow(2).sum(-1)
        cos, sin = torch.cos(angle), torch.sin(angle)
        return torch.stack([cos * x[:, 0] - sin * x[:, 1], sin * x[:, 0] + cos * x[:, 1]], dim=1)

    summary = f"the plane turned by {speed:g} |x|^2"
    return maps.Map("bmi-galaxy-spiral", lambda x: turn(x, 1.0), lambda z: turn(z, -1.0), summary, 2, 2)


# ----------------------------------------------------------------------------------------------
# the mixtures


def _diagonal(*variances: float) -> list[list[float]]:
    return [[variances[i] if i == j else 0.0 for j in range(len(variances))] for i in range(len(variances))]


def _mixture(name: str, weights, means, covariances, dim_x: int) -> GaussianMixture:
    mi, error = MONTE_CARLO_MI.get(name, (math.nan, math.nan))
    return GaussianMixture(name, weights, means, covariances, dim_x, mi, error)


def task_x(correlation: float = 0.9) -> GaussianMixture:
    covariances = [[[1.0, s * correlation], [s * correlation, 1.0]] for s in (-1.0, 1.0)]
    return _mixture(f"1v1-X-{correlation}", [0.5, 0.5], [[0.0, 0.0]] * 2, covariances, 1)


def task_ai() -> GaussianMixture:
    leg = 0.95 * math.sqrt(0.04 * 0.2)
    means = [[1.0, 0.0], [1.0, 1.0], [1.0, -1.0], [-0.8, -0.2], [-1.2, 0.0], [-0.4, 0.0]]
    covariances = [
        _diagonal(0.01, 0.2), _diagonal(0.05, 0.001), _diagonal(0.05, 0.001), _diagonal(0.03, 0.001),
        [[0.04, leg], [leg, 0.2]], [[0.04, -leg], [-leg, 0.2]],
    ]  # fmt: skip
    return _mixture("1v1-AI", [1 / 6] * 6, means, covariances, 1)


def task_waves(components: int = 12, amplitude: float = 5.0, frequency: float = 3.0) -> Task:
    name = f"2v1-waves-{components}-{amplitude}-{frequency}"
    means = [[1.5 * k, 0.0, 1.5 * (k % 4)] for k in range(components)]
    base = _mixture(name, [1 / components] * components, means, [_diagonal(0.1, 1.0, 0.1)] * components, 2)
    return Mapped(base, waves_map(amplitude, frequency), None, name=name)


def task_galaxy(speed: float = 0.5, distance: float = 3.0) -> Task:
    name = f"2v1-galaxy-{speed}-{distance}"
    means = [[s * distance / 2] * 3 for s in (-1.0, 1.0)]
    base = _mixture(name, [0.5, 0.5], means, [_diagonal(1.0, 1.0, 1.0)] * 2, 2)
    return Mapped(base, galaxy_map(speed), None, name=name)


def task_concentric(dim_x: int, components: int) -> GaussianMixture:
    means = [[0.0] * dim_x + [float(i)] for i in range(1, components + 1)]
    covariances = [_diagonal(*([float(i * i)] * dim_x), 1e-4) for i in range(1, components + 1)]
    name = f"{dim_x}v1-concentric_gaussians-{components}"
    return _mixture(name, [1 / components] * components, means, covariances, dim_x)


def task_inliers(dim: int, inlier_fraction: float, pairs: int = 2, strength: float = 2.0) -> GaussianMixture:
    """bmi's LVM (alpha = beta = 0, epsilon = 1, lambda = eta = strength) gives the correlation
    strength^2 / (1 + strength^2) to the first ``pairs`` pairs (x_i, y_i) and none elsewhere."""
    correlation = strength**2 / (1.0 + strength**2)
    signal = [[1.0 if i == j else 0.0 for j in range(2 * dim)] for i in range(2 * dim)]
    for i in range(pairs):
        signal[i][dim + i] = signal[dim + i][i] = correlation
    product = [[1.0 if i == j else 0.0 for j in range(2 * dim)] for i in range(2 * dim)]
    name = f"mult-sparse-w-inliers-{dim}-{dim}-{pairs}-{strength}-{inlier_fraction}"
    weights = [1.0 - inlier_fraction, inlier_fraction]
    return _mixture(name, weights, [[0.0] * (2 * dim)] * 2, [signal, product], dim)


# ----------------------------------------------------------------------------------------------
# the suite


def bmi_v2_suite() -> list[Task]:
    """The 26 tasks of bmi's ``workflows/benchmark/v2/config.py``, in its order, named by bmi's
    task ids, each standardised per column; grouped into families as that file's comments group
    them."""
    laws = {task.name: task.base for task in bmi_v1_suite()}  # the v1 tasks' laws, unscaled
    from_v1 = laws.__getitem__
    groups: dict[str, list[Task]] = {
        "one-dimensional": [
            from_v1("1v1-additive-0.75"), from_v1("asinh-student-identity-1-1-1"), task_x(), task_ai(),
        ],
        "swiss roll": [from_v1("swissroll_x-normal_cdf-1v1-normal-0.75")],
        "nv1 mixtures": [
            task_waves(), task_galaxy(),
            *(task_concentric(d, k) for d, k in ((3, 5), (5, 5), (3, 10), (5, 10), (25, 5))),
        ],
        "multinormal": [
            *(from_v1(f"multinormal-dense-{d}-{d}-0.5") for d in (5, 25, 50)),
            *(from_v1(f"multinormal-sparse-{d}-{d}-2-2.0") for d in (5, 25)),
        ],
        "inliers": [task_inliers(d, f) for f in (0.2, 0.5) for d in (5, 25)],
        "transformed student-t": [
            from_v1(f"asinh-student-identity-{d}-{d}-{nu}") for d, nu in ((2, 1), (3, 2), (5, 2))
        ],
        "spiral": [from_v1(f"spiral-multinormal-sparse-{d}-{d}-2-2.0") for d in (3, 5)],
    }  # fmt: skip
    return [Standardised(task, family=family) for family, members in groups.items() for task in members]


def _unscaled(task: Task) -> Task:
    """The law under a suite task's standardisation (which has no log density of its own)."""
    while isinstance(task, Standardised):
        task = task.base
    return task


def is_mixture(task: Task) -> bool:
    """Whether ``task`` (under its standardisation and maps) is a :class:`GaussianMixture`."""
    task = _unscaled(task)
    return isinstance(task, GaussianMixture) or isinstance(getattr(task, "base", None), GaussianMixture)


def monte_carlo_mi(task: Task, n: int, seed: int, chunk: int = 100_000) -> tuple[float, float]:
    """(mean, standard error) of the exact pointwise MI log p(x, y) - log p(x) - log p(y) over n
    draws of ``task`` (a suite task: its standardisation is undone; the maps' Jacobians cancel),
    drawn in chunks from a CPU generator seeded with ``seed``."""
    task = _unscaled(task)
    generator = torch.Generator().manual_seed(seed)
    total = squares = 0.0
    done = 0
    while done < n:
        size = min(chunk, n - done)
        x, y = task._draw(size, generator)
        ratio = task.log_density_ratio(x, y)
        total, squares, done = total + float(ratio.sum()), squares + float(ratio.pow(2).sum()), done + size
    mean = total / n
    variance = max(squares / n - mean * mean, 0.0) * n / max(n - 1, 1)
    return mean, math.sqrt(variance / n)


def main(argv: list[str] | None = None) -> int:
    """Print :data:`MONTE_CARLO_MI` anew: each mixture's Monte Carlo MI and standard error."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--n", type=int, default=2_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tasks", default=None, help="Comma-separated task ids (default: all mixtures).")
    arguments = parser.parse_args(argv)
    chosen = set(arguments.tasks.split(",")) if arguments.tasks else None
    for task in bmi_v2_suite():
        if is_mixture(task) and (chosen is None or task.name in chosen):
            mi, error = monte_carlo_mi(task, arguments.n, arguments.seed)
            print(f'    "{task.name}": ({mi:.6f}, {error:.6f}),', flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
