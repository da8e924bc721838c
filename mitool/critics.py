"""Critic networks f(x, y) that score pairs for the bounds of :mod:`mitool.bounds`.

Every critic is an ``nn.Module`` with two ways to score:

* ``critic(x, y)`` -> (B, M): the all-pairs matrix S[i, j] = f(x_i, y_j) for anchors x (B, dx) and
  candidates y (M, dy). With ``y`` the partners of ``x`` (M = B) the positives sit on the diagonal:
  ``mitool.bounds.split_scores(critic(x, y))`` gives ``(pos, neg)`` with K = B - 1.
  With ``y`` a separate pool of K samples of the marginal p(y) it gives ``neg`` of shape (B, K)
  directly (the K >= B case).
* ``critic.pair_scores(x, y)`` -> (B,): f(x_i, y_i) for matched rows, i.e. ``pos``, without
  scoring every pair.

:func:`bound_scores` gives both, ``(pos, neg)`` as the bounds take them, for either kind of
negatives. :class:`mitool.stacked.StackedCritics` runs R critics of one class as one model (R seeds
at once) with the same code, so a new critic is written once, here.

Multi-layer perceptrons: ``hidden_layers`` counts the hidden layers, each Linear(width) followed by
the activation, and one output Linear follows, so ``hidden_layers=2`` means three Linear layers
(in -> width -> width -> out). This is what Poole et al. (2019) call "layers=2"; other code uses
"layers=2" for three hidden layers. The defaults (two hidden layers of width 256, ReLU, a 32-dim
embedding) are the toy protocol of the variational-bounds literature.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mitool import bounds, checks

__all__ = [
    "ACTIVATIONS",
    "NAMES",
    "BilinearCritic",
    "ConcatCritic",
    "CosineCritic",
    "SeparableCritic",
    "bound_scores",
    "make_critic",
    "mlp",
    "option_names",
    "pick_options",
]

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "elu": nn.ELU,
    "gelu": nn.GELU,
    "tanh": nn.Tanh,
    "silu": nn.SiLU,
    "leaky_relu": nn.LeakyReLU,
}


def mlp(
    in_features: int, out_features: int, hidden: int = 256, hidden_layers: int = 2, activation: str = "relu"
) -> nn.Sequential:
    """A ReLU (or other) MLP: ``hidden_layers`` blocks of Linear(hidden) + activation, then
    Linear(out_features). ``hidden_layers=0`` is a single Linear layer."""
    checks.whole_number("in_features", in_features, 1)
    checks.whole_number("out_features", out_features, 1)
    checks.whole_number("hidden", hidden, 1)
    checks.whole_number("hidden_layers", hidden_layers, 0)
    checks.choice("activation", activation, ACTIVATIONS)
    layers: list[nn.Module] = []
    width = in_features
    for _ in range(hidden_layers):
        layers += [nn.Linear(width, hidden), ACTIVATIONS[activation]()]
        width = hidden
    layers.append(nn.Linear(width, out_features))
    return nn.Sequential(*layers)


def _check_pairs(x: Tensor, y: Tensor, matched: bool) -> None:
    if x.dim() != 2 or y.dim() != 2:
        raise ValueError(f"x and y must be 2-D (rows, features), got {tuple(x.shape)} and {tuple(y.shape)}")
    if matched and x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must have the same number of rows, got {x.shape[0]} and {y.shape[0]}")


class SeparableCritic(nn.Module):
    """Separable critic f(x, y) = g(x) . h(y) with two MLP embeddings g, h of size ``embed_dim``.

    All B x M pairs cost one (B, E) @ (E, M) matmul after embedding B + M rows.
    Defaults: two hidden layers of width 256, ReLU, 32-dim embedding (three Linear layers each).
    """

    def __init__(
        self,
        x_dim: int,
        y_dim: int,
        embed_dim: int = 32,
        hidden: int = 256,
        hidden_layers: int = 2,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        self.embed_x = mlp(x_dim, embed_dim, hidden, hidden_layers, activation)
        self.embed_y = mlp(y_dim, embed_dim, hidden, hidden_layers, activation)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        _check_pairs(x, y, matched=False)
        return self.embed_x(x) @ self.embed_y(y).T

    def pair_scores(self, x: Tensor, y: Tensor) -> Tensor:
        _check_pairs(x, y, matched=True)
        return (self.embed_x(x) * self.embed_y(y)).sum(dim=1)


class ConcatCritic(nn.Module):
    """Joint critic f(x, y) = MLP([x, y]) -> scalar, applied to every pair.

    Scoring B x M pairs runs the MLP on B * M rows. Its first layer is split into the x part and
    the y part (W [x; y] = W_x x + W_y y), so the (B, M, dx + dy) concatenation is never built.
    Defaults: two hidden layers of width 256, ReLU (three Linear layers).
    """

    def __init__(
        self, x_dim: int, y_dim: int, hidden: int = 256, hidden_layers: int = 2, activation: str = "relu"
    ) -> None:
        super().__init__()
        checks.whole_number("hidden_layers", hidden_layers, 1)
        self.net = mlp(x_dim + y_dim, 1, hidden, hidden_layers, activation)
        self.x_dim = x_dim

    def _first_layer_parts(self) -> tuple[Tensor, Tensor, Tensor]:
        first: nn.Linear = self.net[0]
        return first.weight[:, : self.x_dim], first.weight[:, self.x_dim :], first.bias

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        _check_pairs(x, y, matched=False)
        weight_x, weight_y, bias = self._first_layer_parts()
        hidden = (x @ weight_x.T + bias)[:, None, :] + (y @ weight_y.T)[None, :, :]  # (B, M, hidden)
        return self.net[1:](hidden).squeeze(-1)

    def pair_scores(self, x: Tensor, y: Tensor) -> Tensor:
        _check_pairs(x, y, matched=True)
        return self.net(torch.cat([x, y], dim=1)).squeeze(-1)


class BilinearCritic(nn.Module):
    """Bilinear critic f(x, y) = x^T W y with a learned (dx, dy) matrix W (initialised at zero
    plus a little noise). For correlated Gaussians the optimal critic is quadratic, so this one can
    approach but not reach the optimum; it is the smallest critic with a matmul structure."""

    def __init__(self, x_dim: int, y_dim: int) -> None:
        super().__init__()
        checks.whole_number("x_dim", x_dim, 1)
        checks.whole_number("y_dim", y_dim, 1)
        self.weight = nn.Parameter(torch.randn(x_dim, y_dim) * (0.01 / (x_dim * y_dim) ** 0.25))

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        _check_pairs(x, y, matched=False)
        return (x @ self.weight) @ y.T

    def pair_scores(self, x: Tensor, y: Tensor) -> Tensor:
        _check_pairs(x, y, matched=True)
        return ((x @ self.weight) * y).sum(dim=1)


class CosineCritic(SeparableCritic):
    """Cosine critic f(x, y) = cos(g(x), h(y)) / temperature on L2-normalised MLP embeddings.

    The vision form of the score (q . k / tau with unit vectors): bounded in [-1/tau, 1/tau], so
    every bound of the InfoNCE family, including DCL, is well posed with it; the estimates are
    then limited by the bound 2/tau on the score range. Embeddings and defaults as
    :class:`SeparableCritic`, temperature 0.1.
    """

    def __init__(
        self,
        x_dim: int,
        y_dim: int,
        embed_dim: int = 32,
        hidden: int = 256,
        hidden_layers: int = 2,
        activation: str = "relu",
        temperature: float = 0.1,
    ) -> None:
        temperature = checks.positive("temperature", temperature)
        super().__init__(x_dim, y_dim, embed_dim, hidden, hidden_layers, activation)
        self.temperature = temperature

    def _unit_embeddings(self, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        return F.normalize(self.embed_x(x), dim=1), F.normalize(self.embed_y(y), dim=1)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        _check_pairs(x, y, matched=False)
        gx, hy = self._unit_embeddings(x, y)
        return (gx / self.temperature) @ hy.T

    def pair_scores(self, x: Tensor, y: Tensor) -> Tensor:
        _check_pairs(x, y, matched=True)
        gx, hy = self._unit_embeddings(x, y)
        return (gx * hy).sum(dim=1) / self.temperature


_CRITICS: dict[str, type[nn.Module]] = {
    "separable": SeparableCritic,
    "concat": ConcatCritic,
    "bilinear": BilinearCritic,
    "cosine": CosineCritic,
}
NAMES: tuple[str, ...] = tuple(_CRITICS)


def option_names(name: str) -> tuple[str, ...]:
    """The keyword options that critic ``name`` takes (its constructor's, after x_dim and y_dim)."""
    checks.choice("name", name, NAMES)
    parameters = list(inspect.signature(_CRITICS[name]).parameters)
    return tuple(parameters[2:])


def pick_options(name: str, settings: Mapping[str, object]) -> dict[str, object]:
    """The options of critic ``name`` taken from ``settings``, a mapping that may hold other
    settings too (a study's embed_dim, hidden, temperature, ...); those absent or None are left to
    the critic's defaults."""
    return {key: settings[key] for key in option_names(name) if settings.get(key) is not None}


def make_critic(name: str, x_dim: int, y_dim: int, **options: object) -> nn.Module:
    """Build the critic called ``name`` (one of :data:`NAMES`) with its keyword options
    (``embed_dim``, ``hidden``, ``hidden_layers``, ``activation``, ``temperature`` where they apply)."""
    checks.choice("name", name, NAMES)
    checks.whole_number("x_dim", x_dim, 1)
    checks.whole_number("y_dim", y_dim, 1)
    try:
        return _CRITICS[name](x_dim, y_dim, **options)
    except TypeError as error:  # an option this critic does not take
        raise ValueError(f"critic {name!r}: {error}") from None


def bound_scores(
    critic: nn.Module, x: Tensor, y: Tensor, pool: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """The scores a bound takes from ``critic`` for B joint pairs (x (B, dx), y (B, dy)):
    ``pos`` (B,) = f(x_i, y_i) and ``neg`` (B, K) with

    * ``pool`` None: the other rows of the batch, neg[i] = f(x_i, y_j) for j != i (K = B - 1),
      from the all-pairs matrix by :func:`mitool.bounds.split_scores`;
    * ``pool`` (K, dy) samples of the marginal p(y): neg[i, k] = f(x_i, pool_k), one pool shared
      by every anchor (any K, also K >= B).
    """
    if pool is None:
        return bounds.split_scores(critic(x, y))
    return critic.pair_scores(x, y), critic(x, pool)
