"""Invertible maps that leave mutual information unchanged, as used by the MI benchmark tasks.

If f and g are injective and smooth, I(f(X); g(Y)) = I(X; Y): the benchmark literature ("Beyond
Normal", Czyz et al. 2023) builds hard tasks from a base distribution with closed-form MI by
applying such maps to X and Y separately. The log density ratio of the mapped pair is the base's
at (f^-1(x'), g^-1(y')): the Jacobians of f and g appear in p(x', y') and in p(x') p(y') alike
and cancel.

Every map works on rows, (n, d) -> (n, d') in float64:

* coordinate-wise: ``cubic`` x^3, ``half-cube`` x sqrt|x|, ``asinh``, ``normal-cdf`` (Phi, onto
  (0, 1)), ``wiggly``
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
from typing import TYPE_CHECKING

from mitool import checks
from mitool._infra.lazy import lazy_import

if TYPE_CHECKING:
    from torch import Tensor

torch = lazy_import("torch")  # the table of maps is read without torch; a map loads it when applied

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


def _cube(x: Tensor) -> Tensor:
    return x.pow(3)


def _cube_root(z: Tensor) -> Tensor:
    return torch.sign(z) * z.abs().pow(1.0 / 3.0)


def _half_cube(x: Tensor) -> Tensor:
    return torch.sign(x) * x.abs().pow(1.5)


def _half_cube_inverse(z: Tensor) -> Tensor:
    return torch.sign(z) * z.abs().pow(2.0 / 3.0)


_WIGGLES = ((0.4, 1.0, 0.0), (0.15, 2.0, 1.0), (0.05, 5.0, 2.0))
"""(amplitude a, frequency w, phase c) of the wiggly map x + sum a sin(w x + c). The slope is at
least 1 - sum a w = 0.05 > 0, so the map is strictly increasing; it moves x by at most 0.6."""


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


@dataclass(frozen=True)
class Map:
    """An injective map of rows, (n, d) -> (n, d'), with its inverse on the image, in float64.

    name: short name. summary: one line. min_dim, max_dim: the input dimensions it accepts (None:
    no upper limit). grows_to: d' when the map changes the dimension (the swiss rolls: 2), None
    when d' = d (:meth:`output_dim`)."""

    name: str
    forward: Callable[[Tensor], Tensor]
    inverse: Callable[[Tensor], Tensor]
    summary: str
    min_dim: int = 1
    max_dim: int | None = None
    grows_to: int | None = None

    @property
    def coordinatewise(self) -> bool:
        """The map acts on each coordinate alone (the same function on each)."""
        return self.grows_to is None and self.min_dim == 1

    def output_dim(self, dim: int) -> int:
        """d' for inputs of dimension ``dim`` (ParameterError when this map does not take ``dim``)."""
        checks.whole_number("dim", dim, self.min_dim, self.max_dim)
        return self.grows_to or dim

    def __call__(self, x: Tensor) -> Tensor:
        return self.forward(x)


def _mixture_quantile_map(
    name: str, weights: tuple[float, ...], means: tuple[float, ...], scale: float = 1.0
) -> Map:
    """u in (0, 1) -> F^-1(u) for the Gaussian mixture F = sum_i w_i Phi((z - m_i) / s): a
    uniform coordinate becomes the mixture (the "Beyond Normal" benchmark's bimodal marginals,
    which it inverts by bisection on [-10, 10]; here on the mixture's own range)."""
    low, high = min(means) - 40.0 * scale, max(means) + 40.0 * scale

    def cdf(z: Tensor) -> Tensor:
        return sum(w * _normal_cdf((z - m) / scale) for w, m in zip(weights, means, strict=True))

    def quantile(u: Tensor) -> Tensor:
        return bisect_increasing(cdf, u, torch.full_like(u, low), torch.full_like(u, high))

    summary = " + ".join(f"{w:g} N({m:g}, {scale:g}^2)" for w, m in zip(weights, means, strict=True))
    return Map(name, quantile, cdf, f"(0, 1) onto the mixture {summary} (its quantile function)")


def _wiggly_map(
    name: str, wiggles: tuple[tuple[float, float, float], ...], summary: str | None = None
) -> Map:
    """x -> x + sum_j a_j sin(w_j x + c_j), strictly increasing when sum_j |a_j w_j| < 1; the
    inverse by bisection within sum_j |a_j| of z. ``summary``: the formula, unless given."""
    reach = sum(abs(a) for a, _, _ in wiggles)

    def forward(x: Tensor) -> Tensor:
        return x + sum(a * torch.sin(w * x + c) for a, w, c in wiggles)

    def inverse(z: Tensor) -> Tensor:
        return bisect_increasing(forward, z, z - reach, z + reach)

    terms = " ".join(f"{'+' if a > 0 else '-'} {abs(a):g} sin({w:g} x {'+' if c >= 0 else '-'} {abs(c):g})"
                     for a, w, c in wiggles)  # fmt: skip
    return Map(name, forward, inverse, summary or f"x {terms}")


def _spiral_map(name: str, first: int, second: int, summary: str | None = None) -> Map:
    """x -> R(|x|^2 / d) x, R(theta) turning the plane of coordinates (first, second) by theta
    (exp(theta A) for the generator A of that plane: A[first, second] = -1, A[second, first] = 1);
    the inverse turns back by |x|^2 / d, which the turn keeps. ``summary``: the planes, unless given."""

    def turn(x: Tensor, sign: float) -> Tensor:
        angle = sign * x.pow(2).sum(-1) / x.shape[1]
        cos, sin = torch.cos(angle), torch.sin(angle)
        turned = x.clone()
        turned[:, first] = cos * x[:, first] - sin * x[:, second]
        turned[:, second] = sin * x[:, first] + cos * x[:, second]
        return turned

    return Map(
        name, lambda x: turn(x, 1.0), lambda z: turn(z, -1.0),
        summary or f"coordinates {first} and {second} turned by |x|^2 / d", second + 1,
    )  # fmt: skip


_ROLL_START, _ROLL_SPAN = 1.5 * math.pi, 3.0 * math.pi


def _swiss_roll_map(name: str, summary: str, scale: float, from_normal: bool) -> Map:
    """One dimension rolled into two: u in (0, 1) (Phi(x) when ``from_normal``), theta = 1.5 pi (1 +
    2u), x -> (theta cos theta, theta sin theta) / ``scale``; theta = scale |point| inverts it."""

    def forward(x: Tensor) -> Tensor:
        theta = _ROLL_START + _ROLL_SPAN * (_normal_cdf(x[:, 0]) if from_normal else x[:, 0])
        return torch.stack([theta * torch.cos(theta), theta * torch.sin(theta)], dim=1) / scale

    def inverse(z: Tensor) -> Tensor:
        u = (scale * torch.linalg.vector_norm(z, dim=1) - _ROLL_START) / _ROLL_SPAN
        return (_normal_quantile(u) if from_normal else u)[:, None]

    return Map(name, forward, inverse, summary, 1, 1, 2)


_UNIT_ROLL_SCALE = 21.0
"""The swiss roll of the "Beyond Normal" benchmark divides by 21 (its docstring: "to make the scale
more similar (but not identical) to the original (0, 1)")."""


MAPS: dict[str, Map] = {
    item.name: item
    for item in (
        Map("cubic", _cube, _cube_root, "x^3 per coordinate"),
        Map("half-cube", _half_cube, _half_cube_inverse, "x sqrt|x| per coordinate"),
        Map("asinh", lambda x: torch.asinh(x), lambda z: torch.sinh(z), "asinh(x) per coordinate"),
        Map("normal-cdf", _normal_cdf, _normal_quantile, "the normal CDF per coordinate, onto (0, 1)"),
        _wiggly_map("wiggly", _WIGGLES, "x + 0.4 sin x + 0.15 sin(2x + 1) + 0.05 sin(5x + 2)"),
        Map("bimodal", _bimodal, _bimodal_inverse, "N(0, 1) onto 1/2 N(-1, 0.4^2) + 1/2 N(1, 0.4^2)"),
        _spiral_map("spiral", 0, 1, "the first two coordinates turned by |x|^2 / d"),
        _swiss_roll_map("swiss-roll", "one dimension rolled into two", 4.5 * math.pi, from_normal=True),
    )
}  # fmt: skip
"""The maps by name."""

BMI_MAPS: dict[str, Map] = {
    item.name: item
    for item in (
        _mixture_quantile_map("bmi-bimodal-x", (0.3, 0.7), (0.0, 5.0)),
        _mixture_quantile_map("bmi-bimodal-y", (0.5, 0.5), (-1.0, 3.0)),
        _wiggly_map("bmi-wiggly-x", ((0.4, 1.0, 0.0), (0.2, 1.7, 1.0), (0.03, 3.3, -2.5))),
        _wiggly_map("bmi-wiggly-y", ((-0.4, 0.4, 0.0), (0.17, 1.3, 3.5), (0.02, 4.3, -2.5))),
        _spiral_map("bmi-spiral-x", 0, 1),
        _spiral_map("bmi-spiral-y", 1, 2),
        _swiss_roll_map("bmi-swiss-roll", "(0, 1) rolled into two dimensions, divided by 21",
                        _UNIT_ROLL_SCALE, from_normal=False),
    )
}  # fmt: skip
"""The maps of the "Beyond Normal" benchmark's task list (cbg-ethz/bmi, ``bmi.benchmark.task_list``)
where they differ from :data:`MAPS`: its bimodal marginals 0.3 N(0, 1) + 0.7 N(5, 1) for X and
1/2 N(-1, 1) + 1/2 N(3, 1) for Y (applied to uniform coordinates), its two wiggly functions, its
spiral (X turned in the plane of coordinates 0 and 1, Y in that of 1 and 2, each at speed 1 / d)
and its swiss roll of a uniform coordinate (scale 1/21)."""
