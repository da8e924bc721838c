"""Laws of (X, Y) with closed-form mutual information: the correlated Gaussians of the toy study,
and the families of the MI benchmark. (What the studies do with them lives with the studies: the toy
study's schedule of stages in :mod:`mitool.toy.staircase`, the benchmark's suites in
:mod:`mitool.benchmark.suites`.)

The toy problem of the variational-bounds literature (Poole et al. 2019; Song & Ermon 2020):
x ~ N(0, I_d) and y = rho x + sqrt(1 - rho^2) eps with eps ~ N(0, I_d), coordinate by
coordinate, so that

    I(X; Y) = -(d / 2) log(1 - rho^2)    nats,    rho = sqrt(1 - exp(-2 I / d)).

An invertible transform of y applied coordinate-wise (cubic y^3, asinh, half-cube
sign(y)|y|^{3/2}) leaves the MI unchanged but makes the optimal critic harder to represent.

The benchmark families (every one a :class:`Task`: ``.sample(n, generator)``, ``.mi`` in nats,
``.dim_x``, ``.dim_y``, a short ``.name``, ``.family`` and ``.log_density_ratio(x, y)``, the optimal
critic log p(x, y) / (p(x) p(y))):

* :class:`MultivariateNormal` with any joint covariance Sigma of (X, Y):
  I = 1/2 log(det Sigma_XX det Sigma_YY / det Sigma); :func:`dense_normal`, :func:`sparse_normal`,
  :func:`block_normal` build the usual covariances;
* :class:`StudentT`, the multivariate Student-t with dispersion Sigma and nu degrees of freedom:
  I = 1/2 log(det Sigma_XX det Sigma_YY / det Sigma) + h(m) + h(n) - h(m + n) with
  h(k) = log Gamma(nu/2) - log Gamma((nu+k)/2) + (k/2) log(nu pi) + ((nu+k)/2)[psi((nu+k)/2) - psi(nu/2)]
  (Arellano-Valle, Contreras-Reyes & Genton 2013; see the class);
* :class:`AdditiveUniform`: X ~ U(0, 1), Y = X + U(-eps, eps);
* :class:`Mapped`: any task with invertible maps (:data:`mitool.maps.MAPS`) applied to X and Y.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mitool import checks, maps
from mitool._infra.lazy import lazy_import

if TYPE_CHECKING:
    from torch import Tensor

torch = lazy_import("torch")  # the suites and names are read without torch; sampling loads it

__all__ = [
    "TRANSFORMS",
    "AdditiveUniform",
    "CorrelatedGaussian",
    "Mapped",
    "MultivariateNormal",
    "Standardised",
    "StudentT",
    "Task",
    "block_normal",
    "dense_normal",
    "mi_to_rho",
    "rho_to_mi",
    "sparse_normal",
    "student_t",
    "student_t_entropy_term",
]


def rho_to_mi(rho: float, dim: int) -> float:
    """MI in nats of d independent pairs of unit Gaussians with correlation rho:
    -dim/2 * log(1 - rho^2). Needs |rho| < 1 and dim >= 1."""
    checks.whole_number("dim", dim, 1)
    rho = float(rho)
    if not abs(rho) < 1:
        raise ValueError(f"rho must satisfy |rho| < 1, got {rho}")
    return -0.5 * dim * math.log1p(-rho * rho)


def mi_to_rho(mi: float, dim: int) -> float:
    """The correlation rho >= 0 at which d Gaussian pairs share ``mi`` nats:
    sqrt(1 - exp(-2 mi / dim)). Needs mi >= 0 (finite) and dim >= 1."""
    checks.whole_number("dim", dim, 1)
    mi = float(mi)
    if not (mi >= 0 and math.isfinite(mi)):
        raise ValueError(f"mi must be a finite number >= 0 (nats), got {mi}")
    return math.sqrt(-math.expm1(-2.0 * mi / dim))


TRANSFORMS: tuple[str, ...] = tuple(name for name, item in maps.MAPS.items() if item.coordinatewise)
"""The maps of :data:`mitool.maps.MAPS` that act on each coordinate alone (cubic, half-cube, asinh,
normal-cdf, wiggly, bimodal): a correlated Gaussian's y may be put through one; the MI is unchanged."""


class CorrelatedGaussian:
    """x ~ N(0, I_dim), y = rho x + sqrt(1 - rho^2) eps, then y -> transform(y) if given.

    Give exactly one of ``mi`` (nats, >= 0) or ``rho`` (|rho| < 1). ``transform`` is None or one of
    :data:`TRANSFORMS` (coordinate-wise maps of :data:`mitool.maps.MAPS`: "cubic", "asinh", ...); it
    leaves :attr:`mi` unchanged.
    """

    def __init__(
        self, dim: int, mi: float | None = None, rho: float | None = None, transform: str | None = None
    ) -> None:
        self.dim = checks.whole_number("dim", dim, 1)
        if (mi is None) == (rho is None):
            raise ValueError("give exactly one of mi (nats, >= 0) or rho (|rho| < 1)")
        if rho is not None:
            self.mi = rho_to_mi(rho, dim)
            self.rho = float(rho)
        else:
            self.rho = mi_to_rho(mi, dim)
            self.mi = float(mi)
        if transform is not None and transform not in TRANSFORMS:
            raise ValueError(f"unknown transform {transform!r}; valid: none, {', '.join(TRANSFORMS)}")
        self.transform = transform

    def __repr__(self) -> str:
        settings = f"dim={self.dim}, mi={self.mi:.4g}, rho={self.rho:.4g}, transform={self.transform}"
        return f"CorrelatedGaussian({settings})"

    def _apply(self, y: Tensor) -> Tensor:
        return y if self.transform is None else maps.MAPS[self.transform].forward(y)

    def _invert(self, y: Tensor) -> Tensor:
        return y if self.transform is None else maps.MAPS[self.transform].inverse(y)

    def sample(
        self,
        n: int,
        generator: torch.Generator | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> tuple[Tensor, Tensor]:
        """n joint samples (x, y), each of shape (n, dim), in ``dtype`` (default float32)."""
        checks.whole_number("n", n, 1)
        dtype = dtype or torch.float32
        x = torch.randn(n, self.dim, generator=generator, device=device, dtype=dtype)
        noise = torch.randn(n, self.dim, generator=generator, device=device, dtype=dtype)
        y = self.rho * x + math.sqrt(1.0 - self.rho**2) * noise
        return x, self._apply(y)

    def sample_marginal_y(
        self,
        n: int,
        generator: torch.Generator | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> Tensor:
        """n samples of the marginal p(y) (the transform applied), shape (n, dim): extra negatives."""
        checks.whole_number("n", n, 1)
        dtype = dtype or torch.float32
        return self._apply(torch.randn(n, self.dim, generator=generator, device=device, dtype=dtype))

    def log_density_ratio(self, x: Tensor, y: Tensor) -> Tensor:
        """The optimal critic log p(y|x) - log p(y) for matched rows, shape (n,).

        ``y`` is taken as sampled (after the transform, if any): it is mapped back by the inverse
        transform first. The Jacobians of an invertible transform cancel in the ratio, so this is
        the exact log density ratio of the transformed pair too. Its mean over joint samples is
        :attr:`mi`. Broadcasting works: x of shape (B, 1, dim) and y of shape (1, M, dim) give
        the (B, M) matrix of all pairs.
        """
        y = self._invert(y)
        one_minus = 1.0 - self.rho**2
        conditional = (y - self.rho * x).pow(2).sum(-1) / (2.0 * one_minus)
        marginal = y.pow(2).sum(-1) / 2.0
        return marginal - conditional - 0.5 * self.dim * math.log(one_minus)


# ----------------------------------------------------------------------------------------------
# the families of the MI benchmark


class Task:
    """A joint distribution of (X, Y) with closed-form MI.

    name: short name. family: the base distribution ("normal", "student-t", "additive-uniform").
    dim_x, dim_y: dimensions. mi: I(X; Y) in nats. Subclasses draw float64 samples on the CPU in
    ``_draw(n, generator)``; :meth:`sample` converts them.
    """

    name: str
    family: str
    dim_x: int
    dim_y: int
    mi: float

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.name!r}, dim_x={self.dim_x}, dim_y={self.dim_y}, mi={self.mi:.4f})"
        )

    def _draw(self, n: int, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
        raise NotImplementedError

    def sample(
        self,
        n: int,
        generator: torch.Generator | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> tuple[Tensor, Tensor]:
        """n joint samples: x of shape (n, dim_x) and y of shape (n, dim_y) in ``dtype`` (default
        float32). ``generator`` is a CPU generator (the samples are drawn in float64 on the CPU, then
        converted)."""
        checks.whole_number("n", n, 1)
        x, y = self._draw(n, generator)
        dtype = dtype or torch.float32
        return x.to(device=device, dtype=dtype), y.to(device=device, dtype=dtype)

    def log_density_ratio(self, x: Tensor, y: Tensor) -> Tensor:
        """log p(x, y) - log p(x) - log p(y), the optimal critic; its mean over joint samples is
        :attr:`mi`. Broadcasts over leading dimensions: x (B, 1, dim_x) and y (1, M, dim_y) give
        the (B, M) matrix of all pairs."""
        raise NotImplementedError


def _log_det(matrix: Tensor) -> float:
    return float(torch.linalg.slogdet(matrix)[1])


def _quadratic(rows: Tensor, matrix: Tensor) -> Tensor:
    return ((rows @ matrix) * rows).sum(-1)


class _SplitCovariance:
    """A joint (dispersion) matrix Sigma of (X, Y) with the precisions and log-determinants of the
    joint and of both marginals, and the quadratic forms w' Sigma^-1 w that the densities need."""

    def __init__(self, covariance: Tensor, dim_x: int) -> None:
        covariance = torch.as_tensor(covariance, dtype=torch.float64)
        total = covariance.shape[0] if covariance.dim() == 2 else 0
        if covariance.dim() != 2 or covariance.shape[1] != total or total < 2:
            raise checks.ParameterError(
                "covariance", f"must be a square matrix of size >= 2, got {tuple(covariance.shape)}"
            )
        checks.whole_number("dim_x", dim_x, 1, total - 1)
        if not torch.allclose(covariance, covariance.T) or torch.linalg.cholesky_ex(covariance)[1] != 0:
            raise checks.ParameterError("covariance", "must be symmetric and positive definite")
        self.matrix, self.dim_x, self.dim_y = covariance, dim_x, total - dim_x
        self.cholesky = torch.linalg.cholesky(covariance)
        self.precision = torch.linalg.inv(covariance)
        self.x_block, self.y_block = covariance[:dim_x, :dim_x], covariance[dim_x:, dim_x:]
        self.x_precision, self.y_precision = torch.linalg.inv(self.x_block), torch.linalg.inv(self.y_block)
        self.log_dets = (_log_det(covariance), _log_det(self.x_block), _log_det(self.y_block))

    def gaussian_mi(self) -> float:
        """1/2 log(det Sigma_XX det Sigma_YY / det Sigma)."""
        joint, x_part, y_part = self.log_dets
        return 0.5 * (x_part + y_part - joint)

    def forms(self, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(w' Sigma^-1 w, x' Sigma_XX^-1 x, y' Sigma_YY^-1 y) for w = (x, y), broadcasting."""
        x, y = x.double(), y.double()
        p_xx, p_xy = self.precision[: self.dim_x, : self.dim_x], self.precision[: self.dim_x, self.dim_x :]
        p_yy = self.precision[self.dim_x :, self.dim_x :]
        joint = _quadratic(x, p_xx) + 2.0 * ((x @ p_xy) * y).sum(-1) + _quadratic(y, p_yy)
        return joint, _quadratic(x, self.x_precision), _quadratic(y, self.y_precision)

    def normal_draws(self, n: int, generator: torch.Generator | None) -> Tensor:
        """(n, dim_x + dim_y) draws of N(0, Sigma)."""
        noise = torch.randn(n, self.matrix.shape[0], generator=generator, dtype=torch.float64)
        return noise @ self.cholesky.T


class MultivariateNormal(Task):
    """(X, Y) ~ N(0, Sigma) with X the first ``dim_x`` coordinates:
    I = 1/2 log(det Sigma_XX det Sigma_YY / det Sigma), the log density ratio
    -1/2 (w' Sigma^-1 w - x' Sigma_XX^-1 x - y' Sigma_YY^-1 y) + I, with w = (x, y)."""

    family = "normal"

    def __init__(self, covariance: Tensor, dim_x: int, name: str = "normal") -> None:
        self.split = _SplitCovariance(covariance, dim_x)
        self.dim_x, self.dim_y, self.name = self.split.dim_x, self.split.dim_y, name
        self.mi = self.split.gaussian_mi()

    def _draw(self, n: int, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
        joint = self.split.normal_draws(n, generator)
        return joint[:, : self.dim_x], joint[:, self.dim_x :]

    def log_density_ratio(self, x: Tensor, y: Tensor) -> Tensor:
        joint, x_form, y_form = self.split.forms(x, y)
        return -0.5 * (joint - x_form - y_form) + self.mi


def dense_normal(dim_x: int, dim_y: int, correlation: float = 0.5) -> MultivariateNormal:
    """Every pair of the dim_x + dim_y unit-variance coordinates correlated by ``correlation``
    (the benchmark's "dense" normal: 0.294 nats at 2 x 2, 1.292 at 25 x 25 with 0.5). Named
    ``normal-dense-<dim_x>x<dim_y>``, with ``-<correlation>`` when it is not 0.5."""
    total = checks.whole_number("dim_x", dim_x, 1) + checks.whole_number("dim_y", dim_y, 1)
    correlation = checks.number("correlation", correlation, above=-1.0 / (total - 1), below=1.0)
    covariance = torch.full((total, total), correlation, dtype=torch.float64)
    covariance.fill_diagonal_(1.0)
    suffix = "" if correlation == 0.5 else f"-{correlation:g}"
    return MultivariateNormal(covariance, dim_x, f"normal-dense-{dim_x}x{dim_y}{suffix}")


def sparse_normal(dim_x: int, dim_y: int, pairs: int = 2, correlation: float = 0.8) -> MultivariateNormal:
    """Independent unit coordinates except ``pairs`` pairs (x_i, y_i), i < pairs, correlated by
    ``correlation`` (the benchmark's "sparse" normal): I = -pairs/2 log(1 - correlation^2). Named
    ``normal-sparse-<dim_x>x<dim_y>`` plus ``-<pairs>pairs`` and ``-<correlation>`` where they are
    not 2 and 0.8."""
    checks.whole_number("pairs", pairs, 1, min(dim_x, dim_y))
    correlation = checks.number("correlation", correlation, above=-1.0, below=1.0)
    covariance = torch.eye(dim_x + dim_y, dtype=torch.float64)
    for i in range(pairs):
        covariance[i, dim_x + i] = covariance[dim_x + i, i] = correlation
    suffix = ("" if pairs == 2 else f"-{pairs}pairs") + ("" if correlation == 0.8 else f"-{correlation:g}")
    return MultivariateNormal(covariance, dim_x, f"normal-sparse-{dim_x}x{dim_y}{suffix}")


def block_normal(dim_x: int, dim_y: int, blocks: int = 2, loading: float = 0.7) -> MultivariateNormal:
    """Blocks of coordinates sharing a latent factor: coordinate j of X (and of Y) belongs to block
    j mod ``blocks``, and x_j = loading * z_block + sqrt(1 - loading^2) noise, so coordinates of one
    block (within X, within Y and across) are correlated by loading^2, the others independent."""
    checks.whole_number("blocks", blocks, 1, min(dim_x, dim_y))
    loading = checks.number("loading", loading, above=-1.0, below=1.0)
    members = torch.tensor([j % blocks for j in range(dim_x)] + [j % blocks for j in range(dim_y)])
    same = (members[:, None] == members[None, :]).double()
    covariance = loading**2 * same + (1.0 - loading**2) * torch.eye(dim_x + dim_y, dtype=torch.float64)
    suffix = f"-{blocks}blocks" + ("" if loading == 0.7 else f"-{loading:g}")
    return MultivariateNormal(covariance, dim_x, f"normal-block-{dim_x}x{dim_y}{suffix}")


def student_t_entropy_term(dim: int, dof: float) -> float:
    """h(k): the differential entropy (nats) of the standard k-dimensional Student-t with nu degrees
    of freedom (identity dispersion),
    log Gamma(nu/2) - log Gamma((nu+k)/2) + (k/2) log(nu pi) + ((nu+k)/2)[psi((nu+k)/2) - psi(nu/2)]."""
    from scipy.special import digamma

    half, half_total = 0.5 * dof, 0.5 * (dof + dim)
    return (
        math.lgamma(half)
        - math.lgamma(half_total)
        + 0.5 * dim * math.log(dof * math.pi)
        + half_total * float(digamma(half_total) - digamma(half))
    )


class StudentT(Task):
    """The multivariate Student-t with dispersion Sigma and ``dof`` = nu degrees of freedom:
    W = (X, Y) = Z / sqrt(U / nu) with Z ~ N(0, Sigma) and U ~ chi^2_nu.

    MI (Arellano-Valle, Contreras-Reyes & Genton 2013), derived: sub-vectors of a Student-t are
    Student-t with the same nu and the sub-block of Sigma, and H(A T) = H(T) + log|det A|, so the
    entropy of a k-dimensional one is 1/2 log det Sigma + h(k) with h of
    :func:`student_t_entropy_term` (its last term is ((nu+k)/2) E log(1 + Q/nu) for Q = T'T, and
    1 + Q/nu = (U + V)/U with V ~ chi^2_k independent of U, whose expected log is
    psi((nu+k)/2) - psi(nu/2)). Hence

        I = H(X) + H(Y) - H(X, Y) = 1/2 log(det Sigma_XX det Sigma_YY / det Sigma) + h(m) + h(n) - h(m+n),

    which is positive even for a diagonal Sigma (the shared U makes X and Y dependent) and tends to
    the Gaussian value as nu grows. The log density ratio uses the Student-t density
    log Gamma((nu+k)/2) - log Gamma(nu/2) - (k/2) log(nu pi) - 1/2 log det Sigma - ((nu+k)/2) log(1 + q/nu).
    """

    family = "student-t"

    def __init__(self, dispersion: Tensor, dim_x: int, dof: float, name: str = "student-t") -> None:
        self.split = _SplitCovariance(dispersion, dim_x)
        self.dof = checks.positive("dof", dof)
        self.dim_x, self.dim_y, self.name = self.split.dim_x, self.split.dim_y, name
        terms = [
            student_t_entropy_term(k, self.dof) for k in (self.dim_x, self.dim_y, self.dim_x + self.dim_y)
        ]
        self.mi = self.split.gaussian_mi() + terms[0] + terms[1] - terms[2]

    def _draw(self, n: int, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
        from scipy.special import gammaincinv

        joint = self.split.normal_draws(n, generator)
        uniform = torch.rand(n, generator=generator, dtype=torch.float64).clamp_min(1e-300)
        chi2 = 2.0 * torch.from_numpy(gammaincinv(0.5 * self.dof, uniform.numpy()))
        joint = joint / torch.sqrt(chi2 / self.dof)[:, None]
        return joint[:, : self.dim_x], joint[:, self.dim_x :]

    def _log_normaliser(self, dim: int) -> float:
        return (
            math.lgamma(0.5 * (self.dof + dim))
            - math.lgamma(0.5 * self.dof)
            - 0.5 * dim * math.log(self.dof * math.pi)
        )

    def log_density_ratio(self, x: Tensor, y: Tensor) -> Tensor:
        joint, x_form, y_form = self.split.forms(x, y)
        total = self.dim_x + self.dim_y
        constant = (
            self._log_normaliser(total) - self._log_normaliser(self.dim_x) - self._log_normaliser(self.dim_y)
        )
        constant += (
            self.split.gaussian_mi()
        )  # -1/2 log det Sigma + 1/2 log det Sigma_XX + 1/2 log det Sigma_YY
        return (
            constant
            - 0.5 * (self.dof + total) * torch.log1p(joint / self.dof)
            + 0.5 * (self.dof + self.dim_x) * torch.log1p(x_form / self.dof)
            + 0.5 * (self.dof + self.dim_y) * torch.log1p(y_form / self.dof)
        )


def student_t(dim_x: int, dim_y: int, dof: float) -> StudentT:
    """The Student-t with identity dispersion (the benchmark's "student-identity" tasks: all the MI
    comes from the shared scale, 0.432 nats at 2 x 2 with nu = 1)."""
    total = checks.whole_number("dim_x", dim_x, 1) + checks.whole_number("dim_y", dim_y, 1)
    return StudentT(torch.eye(total, dtype=torch.float64), dim_x, dof, f"student-{dim_x}x{dim_y}-nu{dof:g}")


class AdditiveUniform(Task):
    """X ~ U(0, 1) and Y = X + N with N ~ U(-eps, eps), one dimension each.

    H(Y | X) = log(2 eps), and Y's density is the overlap of [y - eps, y + eps] with [0, 1] over
    2 eps (a trapezoid for eps <= 1/2), whose entropy is eps; so I = eps - log(2 eps) for
    eps <= 1/2 and 1 / (4 eps) otherwise."""

    family = "additive-uniform"

    def __init__(self, epsilon: float) -> None:
        self.epsilon = checks.positive("epsilon", epsilon)
        self.dim_x = self.dim_y = 1
        self.name = f"additive-uniform-{self.epsilon:g}"
        eps = self.epsilon
        self.mi = eps - math.log(2.0 * eps) if eps <= 0.5 else 1.0 / (4.0 * eps)

    def _draw(self, n: int, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
        x = torch.rand(n, 1, generator=generator, dtype=torch.float64)
        noise = (2.0 * torch.rand(n, 1, generator=generator, dtype=torch.float64) - 1.0) * self.epsilon
        return x, x + noise

    def log_density_ratio(self, x: Tensor, y: Tensor) -> Tensor:
        x, y, eps = x.double()[..., 0], y.double()[..., 0], self.epsilon
        overlap = (torch.clamp(y + eps, max=1.0) - torch.clamp(y - eps, min=0.0)).clamp_min(0.0)
        inside = (y - x).abs() <= eps
        return torch.where(inside, -torch.log(overlap), torch.full_like(overlap, -math.inf))


class Mapped(Task):
    """A task with invertible maps (names or :class:`mitool.maps.Map` s) applied to X and to Y:
    the same MI, new dimensions for the swiss roll, and the base's log density ratio at the
    inverse images (the maps' Jacobians cancel)."""

    def __init__(
        self, base: Task, x_map: str | maps.Map | None = None, y_map: str | maps.Map | None = None,
        name: str | None = None,
    ) -> None:  # fmt: skip
        self.base = base
        self.x_map, self.y_map = _as_map("x_map", x_map), _as_map("y_map", y_map)
        self.dim_x = self.x_map.output_dim(base.dim_x) if self.x_map else base.dim_x
        self.dim_y = self.y_map.output_dim(base.dim_y) if self.y_map else base.dim_y
        self.family, self.mi = base.family, base.mi
        prefix = "-".join(m.name for m in (self.x_map, self.y_map) if m is not None)
        self.name = name or (f"{prefix}-{base.name}" if prefix else base.name)

    def _draw(self, n: int, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
        x, y = self.base._draw(n, generator)
        return (self.x_map(x) if self.x_map else x), (self.y_map(y) if self.y_map else y)

    def log_density_ratio(self, x: Tensor, y: Tensor) -> Tensor:
        return self.base.log_density_ratio(_invert(self.x_map, x), _invert(self.y_map, y))


class Standardised(Task):
    """A task whose every sample is standardised column by column with its own mean and standard
    deviation (ddof 0), as the "Beyond Normal" benchmark's pipeline rescales its tasks before any
    estimator sees them: an affine map per coordinate, so the MI is the base's. The map depends on
    the sample, so there is no log density ratio. ``name`` and ``family`` default to the base's."""

    def __init__(self, base: Task, name: str | None = None, family: str | None = None) -> None:
        self.base = base
        self.dim_x, self.dim_y, self.mi = base.dim_x, base.dim_y, base.mi
        self.name, self.family = name or base.name, family or base.family

    def _draw(self, n: int, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
        return tuple(_standardise_columns(part) for part in self.base._draw(n, generator))  # type: ignore[return-value]

    def log_density_ratio(self, x: Tensor, y: Tensor) -> Tensor:
        raise NotImplementedError(f"{self.name} standardises each sample by its own statistics")


def _standardise_columns(rows: Tensor) -> Tensor:
    scale = rows.std(dim=0, unbiased=False)
    return (rows - rows.mean(dim=0)) / torch.where(scale > 0, scale, torch.ones_like(scale))


def _as_map(parameter: str, value: str | maps.Map | None) -> maps.Map | None:
    if value is None or isinstance(value, maps.Map):
        return value
    return maps.MAPS[checks.choice(parameter, value, maps.MAPS)]


def _invert(map_: maps.Map | None, rows: Tensor) -> Tensor:
    """The inverse of ``map_`` on rows with any leading dimensions."""
    if map_ is None:
        return rows.double()
    flat = map_.inverse(rows.double().reshape(-1, rows.shape[-1]))
    return flat.reshape(*rows.shape[:-1], flat.shape[-1])
