"""Tasks with discrete or mixed variables and known MI (the ``discrete`` suite).

Every truth is exact or computed to 1e-6 by sums and quadrature, except the Gaussian-class tasks,
whose MI is a Monte Carlo mean of the exact log density ratio over 2 million draws (standard error
stated in ``note``, below 0.002 nats):

* ``DiscreteTable``: X, Y from a joint table; I = sum p log p / (p_x p_y);
* ``PoissonSum``: X ~ Pois(a), Y = X + Pois(b); I = H(Pois(a + b)) - H(Pois(b));
* ``BinomialThinning``: X ~ Bin(m, p), Y ~ Bin(X, q); the joint table summed;
* ``GaussianClasses``: Y uniform over C classes, X | Y = c ~ N(mu_c, I);
* ``ZeroInflated``: X ~ N(0, 1), Y = 0 with probability pi, else X + sigma eps; Y = 0 tells the
  coin, so I = (1 - pi) * 1/2 log(1 + 1 / sigma^2);
* ``Rounded``: X ~ N(0, 1), Y = round(s X + eps); I = E_x sum_k p(k | x) log p(k | x) / p(k), by
  Gauss-Hermite quadrature;
* ``PoissonRate``: X ~ N(0, s^2), Y ~ Pois(exp(X)); the same quadrature.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from mitool._infra.lazy import lazy_import
from mitool.tasks import Task

torch = lazy_import("torch")

__all__ = [
    "BinomialThinning",
    "DiscreteTable",
    "GaussianClasses",
    "PoissonRate",
    "PoissonSum",
    "Rounded",
    "ZeroInflated",
    "discrete_suite",
    "table_mi",
]


def table_mi(joint: np.ndarray) -> float:
    """I(X; Y) of a joint probability table (rows: x, columns: y)."""
    joint = joint / joint.sum()
    outer = joint.sum(1, keepdims=True) * joint.sum(0, keepdims=True)
    cells = joint > 0
    return float((joint[cells] * np.log(joint[cells] / outer[cells])).sum())


def _entropy(pmf: np.ndarray) -> float:
    pmf = pmf[pmf > 0]
    return float(-(pmf * np.log(pmf)).sum())


def _numpy_generator(generator) -> np.random.Generator:
    """A numpy generator seeded from the torch generator (the benchmark's seeding)."""
    return np.random.default_rng(int(torch.randint(0, 2**62, (1,), generator=generator)))


class _NumpyTask(Task):
    """A task whose rows are drawn with numpy: ``_rows(n, rng)`` -> (x, y) float64 arrays."""

    note = ""

    def _draw(self, n: int, generator):
        x, y = self._rows(n, _numpy_generator(generator))
        return torch.from_numpy(np.asarray(x, float).reshape(n, -1)), torch.from_numpy(
            np.asarray(y, float).reshape(n, -1)
        )

    def _rows(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError


class DiscreteTable(_NumpyTask):
    """X, Y drawn from a joint table over {0..a-1} x {0..b-1}."""

    family = "discrete"

    def __init__(self, joint: np.ndarray, name: str) -> None:
        self.joint = np.asarray(joint, float) / np.sum(joint)
        self.dim_x = self.dim_y = 1
        self.name, self.mi = name, table_mi(self.joint)

    def _rows(self, n, rng):
        cells = rng.choice(self.joint.size, size=n, p=self.joint.ravel())
        return np.divmod(cells, self.joint.shape[1])


class PoissonSum(_NumpyTask):
    family = "discrete"

    def __init__(self, rate_x: float, rate_noise: float) -> None:
        from scipy.stats import poisson

        counts = np.arange(400)
        self.rates, self.dim_x, self.dim_y = (rate_x, rate_noise), 1, 1
        self.name = f"poisson-sum-{rate_x:g}-{rate_noise:g}"
        self.mi = _entropy(poisson.pmf(counts, rate_x + rate_noise)) - _entropy(
            poisson.pmf(counts, rate_noise)
        )

    def _rows(self, n, rng):
        x = rng.poisson(self.rates[0], n)
        return x, x + rng.poisson(self.rates[1], n)


class BinomialThinning(_NumpyTask):
    family = "discrete"

    def __init__(self, trials: int, p: float, q: float) -> None:
        from scipy.stats import binom

        self.settings, self.dim_x, self.dim_y = (trials, p, q), 1, 1
        self.name = f"binomial-thinning-{trials}-{p:g}-{q:g}"
        values = np.arange(trials + 1)
        joint = binom.pmf(values, trials, p)[:, None] * binom.pmf(values[None, :], values[:, None], q)
        self.mi = table_mi(joint)

    def _rows(self, n, rng):
        trials, p, q = self.settings
        x = rng.binomial(trials, p, n)
        return x, rng.binomial(x, q)


class GaussianClasses(_NumpyTask):
    """Y uniform over the rows of ``means`` (C classes), X | Y = c ~ N(means[c], I); the MI by Monte
    Carlo of log p(x | y) / p(x) over 2 million draws (fixed seed), its standard error in ``note``."""

    family = "classes"

    def __init__(self, means: np.ndarray, name: str, draws: int = 2_000_000) -> None:
        self.means = np.asarray(means, float)
        self.dim_x, self.dim_y, self.name, self.draws = self.means.shape[1], 1, name, draws

    @functools.cached_property
    def _monte_carlo(self) -> tuple[float, float]:
        """(mean, standard error) of log p(x | y) / p(x) over ``draws`` draws of a fixed seed."""
        rng = np.random.default_rng(20261201)
        values = np.concatenate(
            [self.log_ratio(*self._rows(200_000, rng)) for _ in range(self.draws // 200_000)]
        )
        return float(values.mean()), float(values.std() / math.sqrt(len(values)))

    @property
    def mi(self) -> float:  # type: ignore[override]
        return self._monte_carlo[0]

    @property
    def note(self) -> str:  # type: ignore[override]
        return f"Monte Carlo over {self.draws} draws, standard error {self._monte_carlo[1]:.4f} nats"

    def _rows(self, n, rng):
        y = rng.integers(0, len(self.means), n)
        return self.means[y] + rng.normal(size=(n, self.means.shape[1])), y

    def log_ratio(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """log p(x | y) - log p(x), exactly."""
        from scipy.special import logsumexp

        squared = ((x[:, None, :] - self.means[None]) ** 2).sum(-1)  # (n, C)
        own = -0.5 * squared[np.arange(len(x)), y.astype(int)]
        return own - (logsumexp(-0.5 * squared, axis=1) - math.log(len(self.means)))


class ZeroInflated(_NumpyTask):
    family = "mixed"

    def __init__(self, zero_share: float, noise: float) -> None:
        self.settings, self.dim_x, self.dim_y = (zero_share, noise), 1, 1
        self.name = f"zero-inflated-{zero_share:g}-{noise:g}"
        self.mi = (1 - zero_share) * 0.5 * math.log(1 + 1 / noise**2)

    def _rows(self, n, rng):
        share, noise = self.settings
        x = rng.normal(size=n)
        return x, np.where(rng.random(n) < share, 0.0, x + noise * rng.normal(size=n))


def _hermite_mi(
    conditional: Callable[[np.ndarray], np.ndarray], scale: float = 1.0, nodes: int = 200
) -> float:
    """I(X; Y) for X ~ N(0, scale^2) and a discrete Y with p(k | x) = conditional(x) (rows: nodes,
    columns: k), by Gauss-Hermite quadrature over x."""
    points, weights = np.polynomial.hermite_e.hermegauss(nodes)
    weights = weights / weights.sum()
    given = conditional(points * scale)
    marginal = weights @ given
    cells = given > 0
    terms = np.where(
        cells, given * np.log(np.where(cells, given, 1.0) / np.where(marginal > 0, marginal, 1.0)), 0.0
    )
    return float(weights @ terms.sum(1))


class Rounded(_NumpyTask):
    family = "mixed"

    def __init__(self, slope: float) -> None:
        from scipy.stats import norm

        self.slope, self.dim_x, self.dim_y = slope, 1, 1
        self.name = f"rounded-{slope:g}"
        levels = np.arange(-60, 61)
        self.mi = _hermite_mi(
            lambda x: (
                norm.cdf(levels[None] + 0.5 - slope * x[:, None])
                - norm.cdf(levels[None] - 0.5 - slope * x[:, None])
            )
        )

    def _rows(self, n, rng):
        x = rng.normal(size=n)
        return x, np.round(self.slope * x + rng.normal(size=n))


class PoissonRate(_NumpyTask):
    family = "mixed"

    def __init__(self, scale: float) -> None:
        from scipy.stats import poisson

        self.scale, self.dim_x, self.dim_y = scale, 1, 1
        self.name = f"poisson-rate-{scale:g}"
        counts = np.arange(300)
        self.mi = _hermite_mi(lambda x: poisson.pmf(counts[None], np.exp(x)[:, None]), scale)

    def _rows(self, n, rng):
        x = self.scale * rng.normal(size=n)
        return x, rng.poisson(np.exp(x))


def discrete_suite() -> list[Task]:
    """The ``discrete`` suite: both discrete, continuous against discrete, and mixed."""
    symmetric = np.full((4, 4), 0.3 / 16) + np.eye(4) * 0.7 / 4
    random_table = np.random.default_rng(7).dirichlet(np.full(100, 0.5)).reshape(10, 10)
    circle = 2.0 * np.stack(
        [np.cos(np.arange(10) * 2 * np.pi / 10), np.sin(np.arange(10) * 2 * np.pi / 10)], 1
    )
    return [
        DiscreteTable(symmetric, "table-symmetric-4x4"),
        DiscreteTable(random_table, "table-dirichlet-10x10"),
        PoissonSum(4.0, 2.0),
        BinomialThinning(20, 0.5, 0.5),
        GaussianClasses(2.0 * np.arange(3)[:, None], "classes-1d-3"),
        GaussianClasses(1.5 * np.eye(4, 5), "classes-5d-4"),
        GaussianClasses(circle, "classes-2d-10"),
        ZeroInflated(0.3, 0.5),
        Rounded(2.0),
        PoissonRate(0.7),
    ]
