"""Invertible maps that leave mutual information unchanged, as used by the MI benchmark tasks.

If f and g are injective and smooth, I(f(X); g(Y)) = I(X; Y): the benchmark literature ("Beyond
Normal", Czyz et al. 2023) builds hard tasks from a base distribution with closed-form MI by
applying such maps to X and Y separately. The log density ratio of the mapped pair is the base's
at (f^-1(x'), g^-1(y')): the Jacobians of f and g appear in p(x', y') and in p(x') p(y') alike
and cancel.

Every map works on rows, (n, d) -> (n, d') in float64:

* coordinate-wise: ``half-cube`` x sqrt|x|, ``asinh``, ``normal-cdf`` (Phi, onto (0, 1)), ``wiggly``
  (x plus small sines, strictly increasing), ``bimodal`` (the inverse CDF of a two-Gaussian mixture
  applied to Phi(x): a unit Gaussian becomes the bimodal mixture);
* ``spiral``: x -> R(|x|^2 / d) x, the rotation R(theta) = exp(theta A) turning the plane of the
  first two coordinates by theta (A the antisymmetric generator of that plane), with the speed
  1 / d of the "Beyond Normal" benchmark's current version; it keeps |x|, so its inverse is
  x -> R(-|x|^2 / d) x; needs d >= 2;
* ``swiss-roll``: one dimension into two, u = Phi(x), theta = 1.5 pi (1 + 2u),
  x -> (theta cos theta, theta sin theta) / (4.5 pi); theta = 4.5 pi |point| inverts it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from mitool import checks

__all__ = ["MAPS", "Map", "bisect_increasing"]

_SQRT2 = math.sqrt(2.0)


def _normal_cdf(x: Tensor) -> Tensor:
    """Phi(x) through erfc, precise in the lower tail (torch's ndtr gives 0 at x = -9)."""
    return 0.5 * torch.special.erfc(-x / _SQRT2)


def _normal_quantile(p: Tensor) -> Tensor:
    return torch.special.ndtri(p)


def bisect_increasing(
    function: Callable[[Tensor], Tensor], target: Tensor, low: Tensor, high: Tensor, iterations: int = 64
) -> Tensor:
    """The solution z of function(z) = target, elementwise, for a strictly increasing ``function``
    with function(low) <= target <= function(high); 64 halvings reach float64 resolution."""
    low, high = low.clone(), high.clone()
    for _ in range(iterations):
        middle = 0.5 * (low + high)
        below = function(middle) < target
        low = torch.where(below, middle, low)
        high = torch.where(below, high, middle)
    return 0.5 * (low + high)


def _half_cube(x: Tensor) -> Tensor:
    return torch.sign(x) * x.abs().pow(1.5)


def _half_cube_inverse(z: Tensor) -> Tensor:
    return torch.sign(z) * z.abs().pow(2.0 / 3.0)


_WIGGLES = ((0.4, 1.0, 0.0), (0.15, 2.0, 1.0), (0.05, 5.0, 2.0))
"""(amplitude a, frequency w, phase c) of the wiggly map x + sum a sin(w x + c). The slope is at
least 1 - sum a w = 0.05 > 0, so the map is strictly increasing; it moves x by at most 0.6."""
_WIGGLE_REACH = sum(amplitude for amplitude, _, _ in _WIGGLES)


def _wiggly(x: Tensor) -> Tensor:
    return x + sum(a * torch.sin(w * x + c) for a, w, c in _WIGGLES)


def _wiggly_inverse(z: Tensor) -> Tensor:
    return bisect_increasing(_wiggly, z, z - _WIGGLE_REACH, z + _WIGGLE_REACH)


_MODE, _MODE_WIDTH = 1.0, 0.4
"""The bimodal map's mixture: 1/2 N(-1, 0.4^2) + 1/2 N(1, 0.4^2)."""


def _mixture_cdf(z: Tensor) -> Tensor:
    return 0.5 * (_normal_cdf((z + _MODE) / _MODE_WIDTH) + _normal_cdf((z - _MODE) / _MODE_WIDTH))


def _bimodal(x: Tensor) -> Tensor:
    """F^-1(Phi(x)) for the mixture F. Since Phi((z - m)/s) <= F(z) <= Phi((z + m)/s), the answer
    lies in [s x - m, s x + m]; bisection there (on -|x| and mirrored: the map is odd, which keeps
    the upper tail as precise as the lower one)."""
    negative = -x.abs()
    target = _normal_cdf(negative)
    low, high = _MODE_WIDTH * negative - _MODE, _MODE_WIDTH * negative + _MODE
    return torch.sign(x) * -bisect_increasing(_mixture_cdf, target, low, high)


def _bimodal_inverse(z: Tensor) -> Tensor:
    return torch.sign(z) * -_normal_quantile(_mixture_cdf(-z.abs()))


def _rotate_plane(x: Tensor, angle: Tensor) -> Tensor:
    """Turn the first two coordinates of each row by ``angle`` (n,); the others stay."""
    cos, sin = torch.cos(angle), torch.sin(angle)
    first, second = x[:, 0], x[:, 1]
    turned = torch.stack([cos * first - sin * second, sin * first + cos * second], dim=1)
    return torch.cat([turned, x[:, 2:]], dim=1)


def _spiral(x: Tensor) -> Tensor:
    return _rotate_plane(x, x.pow(2).sum(-1) / x.shape[1])


def _spiral_inverse(z: Tensor) -> Tensor:
    return _rotate_plane(z, -z.pow(2).sum(-1) / z.shape[1])


_ROLL_START, _ROLL_SPAN, _ROLL_SCALE = 1.5 * math.pi, 3.0 * math.pi, 4.5 * math.pi


def _swiss_roll(x: Tensor) -> Tensor:
    theta = _ROLL_START + _ROLL_SPAN * _normal_cdf(x[:, 0])
    return torch.stack([theta * torch.cos(theta), theta * torch.sin(theta)], dim=1) / _ROLL_SCALE


def _swiss_roll_inverse(z: Tensor) -> Tensor:
    theta = _ROLL_SCALE * torch.linalg.vector_norm(z, dim=1)
    return _normal_quantile((theta - _ROLL_START) / _ROLL_SPAN)[:, None]


@dataclass(frozen=True)
class Map:
    """An injective map of rows, (n, d) -> (n, d'), with its inverse on the image, in float64.

    name: short name. summary: one line. min_dim, max_dim: the input dimensions it accepts (None:
    no upper limit). out_dim: d' as a function of d (the identity except for the swiss roll)."""

    name: str
    forward: Callable[[Tensor], Tensor]
    inverse: Callable[[Tensor], Tensor]
    summary: str
    min_dim: int = 1
    max_dim: int | None = None
    grows_to: int | None = None

    def output_dim(self, dim: int) -> int:
        """d' for inputs of dimension ``dim`` (ParameterError when this map does not take ``dim``)."""
        checks.whole_number("dim", dim, self.min_dim, self.max_dim)
        return self.grows_to or dim

    def __call__(self, x: Tensor) -> Tensor:
        return self.forward(x)


MAPS: dict[str, Map] = {
    item.name: item
    for item in (
        Map("half-cube", _half_cube, _half_cube_inverse, "x sqrt|x| per coordinate"),
        Map("asinh", torch.asinh, torch.sinh, "asinh(x) per coordinate"),
        Map("normal-cdf", _normal_cdf, _normal_quantile, "the normal CDF per coordinate, onto (0, 1)"),
        Map("wiggly", _wiggly, _wiggly_inverse, "x + 0.4 sin x + 0.15 sin(2x + 1) + 0.05 sin(5x + 2)"),
        Map("bimodal", _bimodal, _bimodal_inverse, "N(0, 1) onto 1/2 N(-1, 0.4^2) + 1/2 N(1, 0.4^2)"),
        Map("spiral", _spiral, _spiral_inverse, "the first two coordinates turned by |x|^2 / d", 2),
        Map("swiss-roll", _swiss_roll, _swiss_roll_inverse, "one dimension rolled into two", 1, 1, 2),
    )
}  # fmt: skip
"""The maps by name."""
