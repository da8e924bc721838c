"""Tasks with known conditional MI I(X; Y | Z) (the ``conditional`` suite); a task's ``sample``
gives (x, y, z).

* ``GaussianConditional``: (X, Y, Z) jointly Gaussian with covariance S;
  I = 1/2 log(det S_XZ det S_YZ / (det S_Z det S_XYZ)); under invertible maps of X, Y and Z apart
  (``maps``) the same (X's map changes neither p(y, z) nor, given z, how x and y depend);
* ``CommonCause``: Z causes both, X = A Z + a e1, Y = B Z + b e2: I(X; Y) is large, I(X; Y | Z) = 0;
* ``NonlinearCause``: X = f(Z) + e1, Y = g(Z) + c e1 + e2 with nonlinear f, g: given Z, (X, Y) is
  Gaussian with correlation c s1 / sqrt(c^2 s1^2 + s2^2), so I = 1/2 log(1 + c^2 s1^2 / s2^2),
  whatever f and g;
* ``DiscreteCause``: Z in {0, .., m - 1} with shares p_z, (X, Y) | Z = z bivariate normal with
  correlation rho_z: I = -sum_z p_z 1/2 log(1 - rho_z^2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mitool import maps
from mitool._infra.lazy import lazy_import
from mitool.benchmark.discrete import _numpy_generator
from mitool.tasks import Task

torch = lazy_import("torch")

__all__ = [
    "CommonCause",
    "DiscreteCause",
    "GaussianConditional",
    "NonlinearCause",
    "conditional_suite",
    "gaussian_cmi",
]


def gaussian_cmi(covariance: np.ndarray, dims: tuple[int, int, int]) -> float:
    """I(X; Y | Z) of the Gaussian with ``covariance`` over (x, y, z) of dimensions ``dims``."""
    dx, dy, dz = dims
    x, y, z = list(range(dx)), list(range(dx, dx + dy)), list(range(dx + dy, dx + dy + dz))

    def log_det(index: list[int]) -> float:
        return float(np.linalg.slogdet(covariance[np.ix_(index, index)])[1]) if index else 0.0

    return 0.5 * (log_det(x + z) + log_det(y + z) - log_det(z) - log_det(x + y + z))


class _ConditionalTask(Task):
    """A task of (x, y, z) rows drawn with numpy by ``_rows(n, rng)``."""

    dim_z: int

    def sample(self, n: int, generator=None, device=None, dtype=None):
        parts = self._rows(n, _numpy_generator(generator))
        return tuple(
            torch.as_tensor(
                np.asarray(part, float).reshape(n, -1), dtype=dtype or torch.float32, device=device
            )
            for part in parts
        )

    def _rows(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        raise NotImplementedError


class GaussianConditional(_ConditionalTask):
    family = "gaussian"

    def __init__(
        self,
        covariance: np.ndarray,
        dims: tuple[int, int, int],
        name: str,
        maps_of: Sequence[str | None] = (None, None, None),
    ) -> None:
        self.covariance, self.dims = np.asarray(covariance, float), dims
        self.dim_x, self.dim_y, self.dim_z = dims
        self.maps = [None if m is None else maps.MAPS[m] for m in maps_of]
        self.name, self.mi = name, gaussian_cmi(self.covariance, dims)
        self.family = "mapped gaussian" if any(self.maps) else "gaussian"

    def _rows(self, n, rng):
        joint = rng.multivariate_normal(np.zeros(sum(self.dims)), self.covariance, size=n)
        parts = np.split(joint, np.cumsum(self.dims)[:-1], axis=1)
        return tuple(
            part if m is None else m(torch.from_numpy(part)).numpy()
            for part, m in zip(parts, self.maps, strict=True)
        )


def random_covariance(dims: tuple[int, int, int], seed: int, strength: float = 0.6) -> np.ndarray:
    """A covariance of (x, y, z) with dependence all round: Z drives X and Y, and X and Y share a
    factor of their own (so that I(X; Y | Z) > 0): w = L u with u standard normal."""
    rng = np.random.default_rng(seed)
    total = sum(dims)
    loadings = strength * rng.normal(size=(total, total)) / math.sqrt(total) + np.eye(total)
    return loadings @ loadings.T


class CommonCause(_ConditionalTask):
    family = "common cause"

    def __init__(self, dim_z: int, noise: float) -> None:
        self.dim_x = self.dim_y = 1
        self.dim_z, self.noise = dim_z, noise
        self.name, self.mi = f"common-cause-{dim_z}-{noise:g}", 0.0

    def marginal_mi(self) -> float:
        """I(X; Y), large: X = sum(Z) + noise e1, Y = sum(Z) + noise e2."""
        variance = self.dim_z
        return -0.5 * math.log(1 - (variance / (variance + self.noise**2)) ** 2)

    def _rows(self, n, rng):
        z = rng.normal(size=(n, self.dim_z))
        cause = z.sum(1)
        return cause + self.noise * rng.normal(size=n), cause + self.noise * rng.normal(size=n), z


class NonlinearCause(_ConditionalTask):
    family = "nonlinear"

    def __init__(self, coupling: float, dim_z: int = 2) -> None:
        self.dim_x = self.dim_y = 1
        self.dim_z, self.coupling = dim_z, coupling
        self.name = f"nonlinear-cause-{dim_z}-{coupling:g}"
        self.mi = 0.5 * math.log(1 + coupling**2 * 0.5**2 / 0.5**2)

    def _rows(self, n, rng):
        z = rng.normal(size=(n, self.dim_z))
        shared = 0.5 * rng.normal(size=n)
        x = np.sin(2 * z[:, 0]) + z[:, -1] ** 2 + shared
        y = np.cos(z[:, 0]) * z[:, -1] + self.coupling * shared + 0.5 * rng.normal(size=n)
        return x, y, z


class DiscreteCause(_ConditionalTask):
    family = "discrete z"

    def __init__(self, shares: Sequence[float], correlations: Sequence[float]) -> None:
        self.shares, self.correlations = np.asarray(shares, float), np.asarray(correlations, float)
        self.dim_x = self.dim_y = self.dim_z = 1
        self.name = "discrete-cause-" + "-".join(f"{r:g}" for r in correlations)
        self.mi = float(-(self.shares * 0.5 * np.log(1 - self.correlations**2)).sum())

    def _rows(self, n, rng):
        z = rng.choice(len(self.shares), size=n, p=self.shares)
        rho = self.correlations[z]
        x = rng.normal(size=n)
        return x, rho * x + np.sqrt(1 - rho**2) * rng.normal(size=n), z


def conditional_suite() -> list[Task]:
    """The ``conditional`` suite."""
    tasks: list[Task] = [
        GaussianConditional(
            np.array([[1, 0.6, 0.5], [0.6, 1, 0.4], [0.5, 0.4, 1]]), (1, 1, 1), "gaussian-cmi-1-1-1"
        )
    ]
    for dims, seed in (((2, 2, 2), 2), ((3, 3, 4), 3), ((5, 5, 5), 4)):
        tasks.append(
            GaussianConditional(random_covariance(dims, seed), dims, "gaussian-cmi-{}-{}-{}".format(*dims))
        )
    covariance = random_covariance((2, 2, 2), 2)
    tasks.append(
        GaussianConditional(
            covariance, (2, 2, 2), "mapped-gaussian-cmi-2-2-2", ("half-cube", "asinh", "normal-cdf")
        )
    )
    tasks += [
        CommonCause(1, 0.3),
        CommonCause(3, 0.5),
        NonlinearCause(1.0),
        NonlinearCause(0.5, dim_z=3),
        DiscreteCause((0.3, 0.5, 0.2), (0.0, 0.5, 0.9)),
    ]
    return tasks
