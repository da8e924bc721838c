"""The critic networks of :mod:`mitool.critics`: each critic's arithmetic, written once as
functions of its weights (see the package's docstring), and the MLP pieces they share."""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mitool import bounds, checks

__all__ = [
    "ACTIVATIONS",
    "BilinearCritic",
    "ConcatCritic",
    "CosineCritic",
    "Critic",
    "SeparableCritic",
    "Weights",
    "bound_scores",
    "linear",
    "mlp",
    "sequential",
]

Weights = Mapping[str, Tensor]
"""A critic's weights by parameter name ("embed_x.0.weight", ...), each of the parameter's shape or
with a leading run axis R (R critics' weights stacked)."""

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


def linear(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """x W^T + b. One layer: x (..., in), weight (out, in), bias (out,). R stacked layers: weight
    (R, out, in), bias (R, out) and x (R, ..., in), one batched matmul (``baddbmm``) for all R."""
    if weight.dim() == 2:
        return F.linear(x, weight, bias)
    if x.dim() == 3:
        return torch.baddbmm(bias.unsqueeze(1), x, weight.mT)
    rows = x.reshape(weight.shape[0], -1, x.shape[-1])
    return torch.baddbmm(bias.unsqueeze(1), rows, weight.mT).reshape(*x.shape[:-1], weight.shape[-2])


def sequential(network: nn.Sequential, weights: Weights, prefix: str, x: Tensor, start: int = 0) -> Tensor:
    """``network[start:](x)`` computed with ``weights[f"{prefix}.{index}.weight"]`` (and bias) in place
    of its own Linear layers' (see :func:`linear`); its other modules must be elementwise (the
    activations of :func:`mlp`), so they serve any leading axes."""
    for index, module in enumerate(network):
        if index < start:
            continue
        if isinstance(module, nn.Linear):
            x = linear(x, weights[f"{prefix}.{index}.weight"], weights[f"{prefix}.{index}.bias"])
        else:
            x = module(x)
    return x


def _check_pairs(x: Tensor, y: Tensor, matched: bool) -> None:
    if x.dim() != 2 or y.dim() != 2:
        raise ValueError(f"x and y must be 2-D (rows, features), got {tuple(x.shape)} and {tuple(y.shape)}")
    if matched and x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must have the same number of rows, got {x.shape[0]} and {y.shape[0]}")


class Critic(nn.Module):
    """A critic f(x, y): the arithmetic in :meth:`all_pairs` and :meth:`matched_pairs`, functions of
    explicit ``weights`` (see :data:`Weights`) that also take R stacked critics' weights with x, y of
    shape (R, rows, features); ``forward`` and ``pair_scores`` apply them with the module's own."""

    def all_pairs(self, weights: Weights, x: Tensor, y: Tensor) -> Tensor:
        """S[..., i, j] = f(x_i, y_j): (B, M) for x (B, dx), y (M, dy); (R, B, M) stacked."""
        raise NotImplementedError

    def matched_pairs(self, weights: Weights, x: Tensor, y: Tensor) -> Tensor:
        """f(x_i, y_i): (B,) for x (B, dx), y (B, dy); (R, B) stacked."""
        raise NotImplementedError

    def weights(self) -> dict[str, Tensor]:
        """The module's own weights by parameter name."""
        return dict(self.named_parameters())

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        """The (B, M) matrix of f(x_i, y_j) for anchors x (B, dx) and candidates y (M, dy)."""
        _check_pairs(x, y, matched=False)
        return self.all_pairs(self.weights(), x, y)

    def pair_scores(self, x: Tensor, y: Tensor) -> Tensor:
        """f(x_i, y_i) (B,) for matched rows."""
        _check_pairs(x, y, matched=True)
        return self.matched_pairs(self.weights(), x, y)

    def start_at_zero(self) -> Critic:
        """Set the output layer to zero, so that f = 0 everywhere while the gradients still flow
        (a correction that starts from a base critic, :mod:`mitool.critics.gaussian`); returns self.
        ValueError for a critic whose score cannot be zero."""
        raise ValueError(f"the {type(self).__name__} cannot start at a zero score")


def _zero(layer: nn.Module) -> None:
    with torch.no_grad():
        for parameter in layer.parameters():
            parameter.zero_()


class SeparableCritic(Critic):
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

    def embeddings(self, weights: Weights, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        """g(x) and h(y)."""
        return sequential(self.embed_x, weights, "embed_x", x), sequential(
            self.embed_y, weights, "embed_y", y
        )

    def all_pairs(self, weights: Weights, x: Tensor, y: Tensor) -> Tensor:
        gx, hy = self.embeddings(weights, x, y)
        return gx @ hy.mT

    def matched_pairs(self, weights: Weights, x: Tensor, y: Tensor) -> Tensor:
        gx, hy = self.embeddings(weights, x, y)
        return (gx * hy).sum(dim=-1)

    def start_at_zero(self) -> SeparableCritic:
        """g's output layer zero: g(x) = 0, so f = g . h = 0, and h still gives g's layer a gradient."""
        _zero(self.embed_x[-1])
        return self


class ConcatCritic(Critic):
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

    def all_pairs(self, weights: Weights, x: Tensor, y: Tensor) -> Tensor:
        weight, bias = weights["net.0.weight"], weights["net.0.bias"]
        from_x = linear(x, weight[..., : self.x_dim], bias)  # (..., B, hidden)
        from_y = y @ weight[..., self.x_dim :].mT  # (..., M, hidden)
        hidden = from_x.unsqueeze(-2) + from_y.unsqueeze(-3)  # (..., B, M, hidden)
        return sequential(self.net, weights, "net", hidden, start=1).squeeze(-1)

    def matched_pairs(self, weights: Weights, x: Tensor, y: Tensor) -> Tensor:
        return sequential(self.net, weights, "net", torch.cat([x, y], dim=-1)).squeeze(-1)

    def start_at_zero(self) -> ConcatCritic:
        _zero(self.net[-1])
        return self


class BilinearCritic(Critic):
    """Bilinear critic f(x, y) = x^T W y with a learned (dx, dy) matrix W (initialised at zero
    plus a little noise). For correlated Gaussians the optimal critic is quadratic, so this one can
    approach but not reach the optimum; it is the smallest critic with a matmul structure."""

    def __init__(self, x_dim: int, y_dim: int) -> None:
        super().__init__()
        checks.whole_number("x_dim", x_dim, 1)
        checks.whole_number("y_dim", y_dim, 1)
        self.weight = nn.Parameter(torch.randn(x_dim, y_dim) * (0.01 / (x_dim * y_dim) ** 0.25))

    def all_pairs(self, weights: Weights, x: Tensor, y: Tensor) -> Tensor:
        return (x @ weights["weight"]) @ y.mT

    def matched_pairs(self, weights: Weights, x: Tensor, y: Tensor) -> Tensor:
        return ((x @ weights["weight"]) * y).sum(dim=-1)

    def start_at_zero(self) -> BilinearCritic:
        _zero(self)
        return self


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

    def embeddings(self, weights: Weights, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        """g(x) and h(y), each scaled to unit length."""
        gx, hy = super().embeddings(weights, x, y)
        return F.normalize(gx, dim=-1), F.normalize(hy, dim=-1)

    def all_pairs(self, weights: Weights, x: Tensor, y: Tensor) -> Tensor:
        gx, hy = self.embeddings(weights, x, y)
        return (gx / self.temperature) @ hy.mT

    def matched_pairs(self, weights: Weights, x: Tensor, y: Tensor) -> Tensor:
        gx, hy = self.embeddings(weights, x, y)
        return (gx * hy).sum(dim=-1) / self.temperature

    def start_at_zero(self) -> CosineCritic:
        raise ValueError("the cosine critic cannot start at a zero score (its embeddings are normalised)")


def bound_scores(
    critic: Critic, x: Tensor, y: Tensor, pool: Tensor | None = None, weights: Weights | None = None
) -> tuple[Tensor, Tensor]:
    """The scores a bound takes from ``critic`` for B joint pairs (x (B, dx), y (B, dy)):
    ``pos`` (B,) = f(x_i, y_i) and ``neg`` (B, K) with

    * ``pool`` None: the other rows of the batch, neg[i] = f(x_i, y_j) for j != i (K = B - 1),
      from the all-pairs matrix by :func:`mitool.bounds.split_scores`;
    * ``pool`` (K, dy) samples of the marginal p(y): neg[i, k] = f(x_i, pool_k), one pool shared
      by every anchor (any K, also K >= B).

    ``weights``: in place of the critic's own; R stacked critics' weights (a leading run axis) with
    x, y, pool of shapes (R, rows, features) give pos (R, B) and neg (R, B, K).
    """
    if weights is None:
        _check_pairs(x, y, matched=True)
        if pool is not None:
            _check_pairs(x, pool, matched=False)
        weights = critic.weights()
    if pool is None:
        scores = critic.all_pairs(weights, x, y)
        return bounds.split_scores(scores)
    return critic.matched_pairs(weights, x, y), critic.all_pairs(weights, x, pool)
