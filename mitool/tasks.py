"""Tasks with analytic mutual information: correlated Gaussians and MI-preserving transforms.

The standard toy problem of the variational-bounds literature (Poole et al. 2019; Song & Ermon
2020): x ~ N(0, I_d) and y = rho x + sqrt(1 - rho^2) eps with eps ~ N(0, I_d), coordinate by
coordinate, so that

    I(X; Y) = -(d / 2) log(1 - rho^2)    nats,    rho = sqrt(1 - exp(-2 I / d)).

An invertible transform of y applied coordinate-wise (cubic y^3, asinh, half-cube
sign(y)|y|^{3/2}) leaves the MI unchanged but makes the optimal critic harder to represent.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["TRANSFORMS", "CorrelatedGaussian", "Stage", "Staircase", "mi_to_rho", "rho_to_mi"]


def _check_dim(dim: int) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim must be an integer >= 1, got {dim!r}")
    return dim


def rho_to_mi(rho: float, dim: int) -> float:
    """MI in nats of d independent pairs of unit Gaussians with correlation rho:
    -dim/2 * log(1 - rho^2). Needs |rho| < 1 and dim >= 1."""
    _check_dim(dim)
    rho = float(rho)
    if not abs(rho) < 1:
        raise ValueError(f"rho must satisfy |rho| < 1, got {rho}")
    return -0.5 * dim * math.log1p(-rho * rho)


def mi_to_rho(mi: float, dim: int) -> float:
    """The correlation rho >= 0 at which d Gaussian pairs share ``mi`` nats:
    sqrt(1 - exp(-2 mi / dim)). Needs mi >= 0 (finite) and dim >= 1."""
    _check_dim(dim)
    mi = float(mi)
    if not (mi >= 0 and math.isfinite(mi)):
        raise ValueError(f"mi must be a finite number >= 0 (nats), got {mi}")
    return math.sqrt(-math.expm1(-2.0 * mi / dim))


def _signed_power(y: Tensor, power: float) -> Tensor:
    return torch.sign(y) * y.abs().pow(power)


TRANSFORMS: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[Tensor], Tensor]]] = {
    "cubic": (lambda y: y.pow(3), lambda z: _signed_power(z, 1.0 / 3.0)),
    "asinh": (torch.asinh, torch.sinh),
    "half-cube": (lambda y: _signed_power(y, 1.5), lambda z: _signed_power(z, 2.0 / 3.0)),
}
"""Invertible coordinate-wise transforms of y, as (forward, inverse) pairs: they preserve the MI."""


class CorrelatedGaussian:
    """x ~ N(0, I_dim), y = rho x + sqrt(1 - rho^2) eps, then y -> transform(y) if given.

    Give exactly one of ``mi`` (nats, >= 0) or ``rho`` (|rho| < 1). ``transform`` is None or one of
    :data:`TRANSFORMS` ("cubic", "asinh", "half-cube"); it leaves :attr:`mi` unchanged.
    """

    def __init__(
        self, dim: int, mi: float | None = None, rho: float | None = None, transform: str | None = None
    ) -> None:
        self.dim = _check_dim(dim)
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
        return y if self.transform is None else TRANSFORMS[self.transform][0](y)

    def _invert(self, y: Tensor) -> Tensor:
        return y if self.transform is None else TRANSFORMS[self.transform][1](y)

    def sample(
        self,
        n: int,
        generator: torch.Generator | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> tuple[Tensor, Tensor]:
        """n joint samples (x, y), each of shape (n, dim)."""
        _check_count(n)
        x = torch.randn(n, self.dim, generator=generator, device=device, dtype=dtype)
        noise = torch.randn(n, self.dim, generator=generator, device=device, dtype=dtype)
        y = self.rho * x + math.sqrt(1.0 - self.rho**2) * noise
        return x, self._apply(y)

    def sample_marginal_y(
        self,
        n: int,
        generator: torch.Generator | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> Tensor:
        """n samples of the marginal p(y) (the transform applied), shape (n, dim): extra negatives."""
        _check_count(n)
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


def _check_count(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n (the number of samples) must be an integer >= 1, got {n!r}")


@dataclass(frozen=True)
class Stage:
    """One stage of a staircase: ``mi`` nats for steps [start, start + steps)."""

    index: int
    mi: float
    start: int
    steps: int

    @property
    def stop(self) -> int:
        return self.start + self.steps


class Staircase:
    """A schedule of true-MI stages, e.g. 2, 4, 6, 8, 10 nats for 4000 steps each (the literature's
    protocol, d = 20). ``steps_per_stage`` is one number for every stage or one per stage."""

    def __init__(
        self, mi_values: Sequence[float] = (2, 4, 6, 8, 10), steps_per_stage: int | Sequence[int] = 4000
    ):
        values = [float(v) for v in mi_values]
        if not values:
            raise ValueError("mi_values must hold at least one MI value (nats)")
        for value in values:
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"mi values must be finite and >= 0 (nats), got {value}")
        if isinstance(steps_per_stage, int):
            steps = [steps_per_stage] * len(values)
        else:
            steps = [int(s) for s in steps_per_stage]
        if len(steps) != len(values):
            raise ValueError(f"steps_per_stage must be one number or {len(values)} numbers, got {len(steps)}")
        if any(s < 1 for s in steps):
            raise ValueError(f"steps_per_stage must be >= 1, got {steps}")
        self.stages: tuple[Stage, ...] = tuple(
            Stage(index, value, sum(steps[:index]), count)
            for index, (value, count) in enumerate(zip(values, steps, strict=True))
        )

    @property
    def total_steps(self) -> int:
        return self.stages[-1].stop

    def __iter__(self) -> Iterator[Stage]:
        return iter(self.stages)

    def __len__(self) -> int:
        return len(self.stages)

    def stage_at(self, step: int) -> Stage:
        """The stage that holds ``step`` (0-based, < total_steps)."""
        if not 0 <= step < self.total_steps:
            raise ValueError(f"step must be in [0, {self.total_steps}), got {step}")
        for stage in self.stages:
            if step < stage.stop:
                return stage
        raise AssertionError("unreachable")

    def mi_at(self, step: int) -> float:
        return self.stage_at(step).mi
