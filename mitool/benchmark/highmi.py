"""The ``highmi`` suite: strong dependence, 2 to 20 nats, every truth in closed form (issue 27).

Variational bounds saturate here (InfoNCE cannot exceed log of its number of negatives; Butakov et
al. report InfoNCE near 6.2 nats at n = 10 000, and mean absolute errors of 3.8 to 4.6 nats for
KSG, MINE, NWJ and InfoNCE at 10 nats); the suite is meant to be run at n = 10 000 (the benchmark's
sample size; the suite itself holds only the laws). Five families:

* ``normal``: d pairs of unit Gaussians (x_i, y_i) with correlation rho, independent across i, so
  I = -(d / 2) log(1 - rho^2) and rho = sqrt(1 - exp(-2 I / d)) (:func:`mitool.tasks.mi_to_rho`);
  2, 5, 10, 15 and 20 nats at 5 x 5 and 20 x 20, 1 x 1 at 2, 5 and 10 nats (at 15 nats y - rho x
  would have a spread of 3e-7, within a few float32 steps of y), 64 x 64 at 10 and 20 nats
  (:func:`correlated_normal`).
* ``student-t``: the multivariate Student-t with nu = 3 or 5 degrees of freedom and the same
  dispersion Sigma = [[I, rho I], [rho I, I]]: I = -(d / 2) log(1 - rho^2) + h(d) + h(d) - h(2d)
  (Arellano-Valle, Contreras-Reyes & Genton 2013; h of :func:`mitool.tasks.student_t_entropy_term`).
  The Student term s = 2 h(d) - h(2d) does not depend on rho (0.11 to 0.79 nats here), so the rho
  that gives a total I solves the Gaussian part alone: rho = mi_to_rho(I - s, d), exactly
  (:func:`correlated_student_t`).
* ``mapped``: a correlated Gaussian with the same coordinate-wise map on X and on Y (half-cube
  x sqrt|x|, asinh, the normal CDF: :data:`mitool.maps.MAPS`). Injective smooth maps leave the MI
  unchanged, and the log density ratio is the base's at the inverse images (the Jacobians cancel).
  A per-coordinate rank transform undoes these maps, so they test little beyond the Gaussian.
* ``mixed-map``: maps that mix coordinates, so that no per-coordinate transform undoes them: a
  coordinate-wise map followed by a fixed random rotation Q (Haar-distributed, from a fixed seed:
  :func:`rotation`; X and Y get different rotations), x -> Q f(x); and the spiral of
  :data:`mitool.maps.MAPS`, x -> R(|x|^2 / d) x, a turn of the plane of the first two coordinates
  by an angle that depends on the radius. Both are injective and smooth: the MI is the base's.
* ``images`` (Butakov, Tolmachev, Malanchuk & Frolov, NeurIPS 2024, arXiv 2403.02187, the tasks of
  their ``images/`` configs): a latent pair (u, v), u, v in (0, 1)^k, from a Gaussian copula:
  (z_x, z_y) correlated Gaussians as above (k pairs, MI I), u = Phi(z_x), v = Phi(z_y). Phi is
  injective, so I(U; V) = I. Each latent is drawn as an image by an injective continuous map, so
  the images' MI is I too (the MI of a pair is unchanged by injective maps of either side, also
  into a manifold of higher dimension). The rows are the flattened images (n, H * W), row-major
  (pixel (i, j) is row i from the top, column j), and the task carries ``image_shape = (H, W)``:

  - ``bumps`` (their "Gaussians2D"), k = 2: the image exp(-|g - u|^2 / (2 * 0.2^2)) at the pixel
    centres g = ((j + 1/2) / W, (i + 1/2) / H) of the unit square (u_0 horizontal). Its logarithm
    plus |g|^2 / (2 * 0.2^2) is g.u / 0.2^2 - |u|^2 / (2 * 0.2^2), affine in g: a least-squares fit
    over the pixels returns u exactly (:meth:`GaussianBumps.decode`).
  - ``rectangles`` (their "Rectangles2D"), k = 4: the axis-aligned rectangle [x0, x0 + w] x
    [y0, y0 + h] with sides w = a + (b - a) u_2, h = a + (b - a) u_3 (a = 1/4, b = 3/4) and corner
    x0 = (1 - w) u_0, y0 = (1 - h) u_1 (so it lies inside the unit square; the map u -> rectangle is
    smooth with a triangular Jacobian of non-zero diagonal), drawn anti-aliased: each pixel's value is
    the fraction of its area the rectangle covers, c_y(i) c_x(j), a continuous function of u. The
    column sums are c_x(j) h H; a side of at least two pixels leaves a fully covered pixel, so the
    largest column sum is h H, and the first and last partly covered pixels give x0 and x0 + w
    exactly: the map is injective (:meth:`Rectangles.decode`).

  Their log density ratio is the latent Gaussians' at Phi^-1 of the decoded latents (exact on the
  images of the map, meaningless off them).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

from mitool import checks, maps
from mitool._infra.lazy import lazy_import
from mitool.tasks import Mapped, MultivariateNormal, StudentT, Task, mi_to_rho, student_t_entropy_term

if TYPE_CHECKING:
    from torch import Tensor

torch = lazy_import("torch")

__all__ = [
    "GaussianBumps",
    "ImageTask",
    "Rectangles",
    "correlated_normal",
    "correlated_student_t",
    "highmi_suite",
    "rotated_map",
    "rotation",
]

NORMAL_GRID: tuple[tuple[int, float], ...] = (
    *((5, mi) for mi in (2.0, 5.0, 10.0, 15.0, 20.0)),
    *((20, mi) for mi in (2.0, 5.0, 10.0, 15.0, 20.0)),
    *((1, mi) for mi in (2.0, 5.0, 10.0)),
    *((64, mi) for mi in (10.0, 20.0)),
)
"""(dimension a side, nats) of the correlated Gaussians."""

STUDENT_GRID: tuple[tuple[int, int, float], ...] = (
    (3, 5, 5.0), (3, 5, 10.0), (5, 5, 5.0), (5, 5, 10.0), (3, 2, 10.0), (5, 20, 10.0),
)  # fmt: skip
"""(degrees of freedom, dimension a side, nats) of the Student-t tasks."""

_ROTATION_SEEDS = (2703, 2704)
"""The seeds of the rotations of X and of Y in the ``mixed-map`` tasks."""


def _pairs_covariance(dim: int, rho: float) -> Tensor:
    """[[I, rho I], [rho I, I]], of size 2 dim."""
    eye = torch.eye(dim, dtype=torch.float64)
    return torch.cat([torch.cat([eye, rho * eye], 1), torch.cat([rho * eye, eye], 1)], 0)


def _nats(mi: float) -> str:
    return f"{mi:g}nats"


def correlated_normal(dim: int, mi: float) -> MultivariateNormal:
    """``dim`` pairs of unit Gaussians correlated by rho = mi_to_rho(mi, dim), named
    ``normal-<dim>x<dim>-<mi>nats``: I = mi."""
    rho = mi_to_rho(mi, checks.whole_number("dim", dim, 1))
    return MultivariateNormal(_pairs_covariance(dim, rho), dim, f"normal-{dim}x{dim}-{_nats(mi)}")


def correlated_student_t(dim: int, mi: float, dof: float) -> StudentT:
    """The Student-t with ``dof`` degrees of freedom and dispersion [[I, rho I], [rho I, I]] whose
    total MI is ``mi``: rho = mi_to_rho(mi - s, dim), s = 2 h(dim) - h(2 dim) the Student term (which
    does not depend on rho). Named ``student<dof>-<dim>x<dim>-<mi>nats``."""
    checks.whole_number("dim", dim, 1)
    student_term = 2 * student_t_entropy_term(dim, dof) - student_t_entropy_term(2 * dim, dof)
    if not mi > student_term:
        raise ValueError(f"mi must exceed the Student term {student_term:.4g} nats at dim {dim}, nu {dof:g}")
    rho = mi_to_rho(mi - student_term, dim)
    return StudentT(_pairs_covariance(dim, rho), dim, dof, f"student{dof:g}-{dim}x{dim}-{_nats(mi)}")


@functools.cache
def _rotation(dim: int, seed: int) -> Tensor:
    gaussian = np.random.default_rng(seed).standard_normal((dim, dim))
    q, r = np.linalg.qr(gaussian)
    q = q * np.where(np.diag(r) < 0, -1.0, 1.0)[None, :]  # signs fixed: Q is unique and Haar
    return torch.from_numpy(np.ascontiguousarray(q))


def rotation(dim: int, seed: int) -> Tensor:
    """A fixed random orthogonal (dim, dim) float64 matrix: Q of the QR factorisation, signs fixed so
    that R has a positive diagonal, of a Gaussian matrix drawn by numpy's PCG64 generator seeded with
    ``seed`` (Haar-distributed; the same for the same arguments). A copy of a cached matrix."""
    return _rotation(checks.whole_number("dim", dim, 1), int(seed)).clone()


def rotated_map(inner: str, seed: int) -> maps.Map:
    """The map x -> Q f(x), f the coordinate-wise map ``inner`` of :data:`mitool.maps.MAPS` and Q
    = :func:`rotation` (d, seed) for rows of dimension d; inverse z -> f^-1(Q' z). Named
    ``rotated-<inner>``."""
    f = maps.MAPS[checks.choice("inner", inner, maps.MAPS)]
    if not f.coordinatewise:
        raise ValueError(f"inner must be a coordinate-wise map, got {inner!r}")

    def forward(x: Tensor) -> Tensor:
        return f.forward(x) @ _rotation(x.shape[1], seed).T

    def inverse(z: Tensor) -> Tensor:
        return f.inverse(z @ _rotation(z.shape[1], seed))

    return maps.Map(f"rotated-{inner}", forward, inverse, f"{f.summary}, then a fixed rotation", 2)


def _mapped(base: MultivariateNormal, x_map: maps.Map, y_map: maps.Map, name: str, family: str) -> Mapped:
    task = Mapped(base, x_map, y_map, name=name)
    task.family = family
    return task


def _short(map_name: str) -> str:
    """A map's name without hyphens, for task names (``half-cube`` -> ``halfcube``)."""
    return map_name.replace("-", "")


def _suffix(base: Task) -> str:
    """``<dim>x<dim>-<mi>nats`` of a correlated Gaussian's name."""
    return base.name.removeprefix("normal-")


class ImageTask(Task):
    """A Gaussian-copula latent pair (u, v) in (0, 1)^k a side (``latent_dim`` = k pairs of unit
    Gaussians with MI ``mi``, pushed through Phi), each drawn by the injective map :meth:`render` as
    an image of ``image_shape`` (H, W), flattened to H * W; I(X; Y) = ``mi``. Subclasses give
    :meth:`render` and its inverse :meth:`decode`."""

    family = "images"
    kind = "image"
    latent_dim = 1

    def __init__(self, size: int, mi: float) -> None:
        size = checks.whole_number("size", size, 4)
        self.latent = correlated_normal(self.latent_dim, mi)
        self.image_shape = (size, size)
        self.dim_x = self.dim_y = size * size
        self.mi = self.latent.mi
        self.name = f"{self.kind}{size}-{_nats(mi)}"

    def draw_latent(self, n: int, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
        """n latent pairs (u, v), each (n, k) float64 in (0, 1): Phi of the correlated Gaussians."""
        z_x, z_y = self.latent._draw(n, generator)
        cdf = maps.MAPS["normal-cdf"].forward
        return cdf(z_x), cdf(z_y)

    def render(self, latent: Tensor) -> Tensor:
        """Latents (n, k) in (0, 1) -> flattened images (n, H * W), float64."""
        raise NotImplementedError

    def decode(self, images: Tensor) -> Tensor:
        """Flattened images (n, H * W) -> the latents (n, k) that :meth:`render` drew them from."""
        raise NotImplementedError

    def _draw(self, n: int, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
        u, v = self.draw_latent(n, generator)
        return self.render(u), self.render(v)

    def _latent_normal(self, rows: Tensor) -> Tensor:
        flat = rows.double().reshape(-1, rows.shape[-1])
        z = maps.MAPS["normal-cdf"].inverse(self.decode(flat))
        return z.reshape(*rows.shape[:-1], self.latent_dim)

    def log_density_ratio(self, x: Tensor, y: Tensor) -> Tensor:
        """The latent Gaussians' log density ratio at Phi^-1 of the decoded latents (broadcasting)."""
        return self.latent.log_density_ratio(self._latent_normal(x), self._latent_normal(y))


class GaussianBumps(ImageTask):
    """A latent point u in (0, 1)^2 drawn as exp(-|g - u|^2 / (2 width^2)) at the pixel centres
    g = ((j + 1/2) / W, (i + 1/2) / H) (Butakov et al.'s "Gaussians2D", width 0.2). Named
    ``bumps<size>-<mi>nats``."""

    kind = "bumps"
    latent_dim = 2

    def __init__(self, size: int, mi: float, width: float = 0.2) -> None:
        super().__init__(size, mi)
        self.width = checks.positive("width", width)

    @functools.cached_property
    def _grid(self) -> Tensor:
        """The pixel centres (H * W, 2), row-major, (horizontal, vertical)."""
        height, width = self.image_shape
        rows, columns = torch.meshgrid(
            (torch.arange(height, dtype=torch.float64) + 0.5) / height,
            (torch.arange(width, dtype=torch.float64) + 0.5) / width,
            indexing="ij",
        )
        return torch.stack([columns.reshape(-1), rows.reshape(-1)], dim=1)

    @functools.cached_property
    def _fit(self) -> Tensor:
        """The (H * W, 3) pseudo-inverse of the design [g_0, g_1, 1]: least squares over the pixels."""
        design = torch.cat([self._grid, torch.ones(len(self._grid), 1, dtype=torch.float64)], dim=1)
        return torch.linalg.pinv(design).T

    def render(self, latent: Tensor) -> Tensor:
        distance = (self._grid[None, :, :] - latent.double()[:, None, :]).pow(2).sum(-1)
        return torch.exp(-distance / (2.0 * self.width**2))

    def decode(self, images: Tensor) -> Tensor:
        """The centre by least squares: log image + |g|^2 / (2 s^2) = g.u / s^2 - |u|^2 / (2 s^2)."""
        scale = 2.0 * self.width**2
        target = torch.log(images.double()) + self._grid.pow(2).sum(-1) / scale
        return (target @ self._fit)[:, :2] * (scale / 2.0)


class Rectangles(ImageTask):
    """A latent u in (0, 1)^4 drawn as the anti-aliased rectangle [x0, x0 + w] x [y0, y0 + h] (each
    pixel the fraction of its area covered), w = a + (b - a) u_2, h = a + (b - a) u_3, x0 = (1 - w) u_0,
    y0 = (1 - h) u_1, sides between a = ``min_side`` and b = ``max_side`` (Butakov et al.'s
    "Rectangles2D"). Named ``rectangles<size>-<mi>nats``."""

    kind = "rectangles"
    latent_dim = 4

    def __init__(self, size: int, mi: float, min_side: float = 0.25, max_side: float = 0.75) -> None:
        super().__init__(size, mi)
        self.min_side = checks.number("min_side", min_side, above=0.0, below=1.0)
        if not 2.0 / size <= self.min_side < max_side < 1.0:
            raise ValueError(f"need 2 / size <= min_side < max_side < 1, got {min_side}, {max_side}")
        self.max_side = float(max_side)

    def _corners(self, latent: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(x0, x1, y0, y1) of the rectangles of latents (n, 4)."""
        latent = latent.double()
        sides = self.min_side + (self.max_side - self.min_side) * latent[:, 2:]
        starts = (1.0 - sides) * latent[:, :2]
        return starts[:, 0], starts[:, 0] + sides[:, 0], starts[:, 1], starts[:, 1] + sides[:, 1]

    @staticmethod
    def _coverage(start: Tensor, end: Tensor, pixels: int) -> Tensor:
        """(n, pixels): the fraction of each pixel [j, j + 1] / pixels inside [start, end]."""
        edges = torch.arange(pixels + 1, dtype=torch.float64) / pixels
        left = torch.maximum(start[:, None], edges[None, :-1])
        right = torch.minimum(end[:, None], edges[None, 1:])
        return (right - left).clamp_min(0.0) * pixels

    def render(self, latent: Tensor) -> Tensor:
        height, width = self.image_shape
        x0, x1, y0, y1 = self._corners(latent)
        image = self._coverage(y0, y1, height)[:, :, None] * self._coverage(x0, x1, width)[:, None, :]
        return image.reshape(len(latent), height * width)

    @staticmethod
    def _interval(sums: Tensor) -> tuple[Tensor, Tensor]:
        """(start, end) of the interval from an axis's pixel sums (coverage times the other side's
        pixel length): the largest is a fully covered pixel, the first and last covered the ends."""
        pixels = sums.shape[1]
        coverage = sums / sums.max(dim=1, keepdim=True).values
        covered = coverage > 0
        index = torch.arange(pixels)
        first = torch.where(covered, index, pixels).min(dim=1).values
        last = torch.where(covered, index, -1).max(dim=1).values
        rows = torch.arange(len(sums))
        start = (first + 1 - coverage[rows, first]) / pixels
        end = (last + coverage[rows, last]) / pixels
        return start, end

    def decode(self, images: Tensor) -> Tensor:
        height, width = self.image_shape
        image = images.double().reshape(-1, height, width)
        x0, x1 = self._interval(image.sum(dim=1))
        y0, y1 = self._interval(image.sum(dim=2))
        span = self.max_side - self.min_side
        w, h = x1 - x0, y1 - y0
        return torch.stack([x0 / (1.0 - w), y0 / (1.0 - h), (w - self.min_side) / span,
                            (h - self.min_side) / span], dim=1)  # fmt: skip


def highmi_suite() -> list[Task]:
    """The tasks of the ``highmi`` suite (module docstring), in a fixed order."""
    normal = [correlated_normal(dim, mi) for dim, mi in NORMAL_GRID]
    student = [correlated_student_t(dim, mi, dof) for dof, dim, mi in STUDENT_GRID]
    mapped = [
        _mapped(base, maps.MAPS[inner], maps.MAPS[inner], f"{_short(inner)}-{_suffix(base)}", "mapped")
        for inner in ("half-cube", "asinh", "normal-cdf")
        for base in (correlated_normal(5, 5.0), correlated_normal(5, 10.0))
    ]
    rotated = [
        _mapped(base, rotated_map(inner, _ROTATION_SEEDS[0]), rotated_map(inner, _ROTATION_SEEDS[1]),
                f"rotated-{_short(inner)}-{_suffix(base)}", "mixed-map")
        for inner, base in (("half-cube", correlated_normal(5, 5.0)),
                            ("half-cube", correlated_normal(5, 10.0)), ("asinh", correlated_normal(20, 10.0)))
    ]  # fmt: skip
    spiral = maps.MAPS["spiral"]
    spirals = [
        _mapped(base, spiral, spiral, f"spiral-{_suffix(base)}", "mixed-map")
        for base in (correlated_normal(5, 5.0), correlated_normal(5, 10.0))
    ]
    images: list[Task] = [GaussianBumps(16, mi) for mi in (2.5, 5.0, 10.0)]
    images += [GaussianBumps(32, 5.0)] + [Rectangles(16, mi) for mi in (2.5, 5.0, 10.0)]
    return [*normal, *student, *mapped, *rotated, *spirals, *images]
