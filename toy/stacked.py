"""R critics of one architecture as one model with stacked weights (a leading run axis).

A Linear layer y = x W^T + b of R runs becomes one batched matmul, ``baddbmm(b, x, W^T)`` with
x (R, N, in), W^T (R, in, out), b (R, 1, out). On a CPU this runs the R small products of a
step in one call; on a GPU it replaces R kernel launches by one. The activations are elementwise
and shared. The critics of :mod:`mitool.critics` are mirrored exactly (same formulas, same order
of operations), so a stacked model started from R critics gives their scores up to float rounding:

* separable: S = g(x) h(y)^T, pairs (g(x) * h(y)).sum(-1);
* cosine: S = (n(g(x)) / tau) n(h(y))^T with n the L2 normalisation, pairs (n(g) * n(h)).sum / tau;
* concat: hidden_ij = (W_x x_i + b) + W_y y_j, then the rest of the MLP on every pair (i, j);
* bilinear: S = (x W) y^T.

Shapes: x (R, B, dx), y (R, B, dy), pool (R, K, dy) or None; ``scores`` returns pos (R, B) and
neg (R, B, K_max) with K_max = B - 1 (the other rows, via ``mitool.bounds.split_scores`` under
``vmap``) or K (the pool).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import vmap

from mitool import bounds, critics

__all__ = ["StackedCritic"]


class _StackedMLP:
    """The Linear layers of R ``nn.Sequential`` MLPs, stacked; activations are taken from the first."""

    def __init__(self, networks: Sequence[nn.Sequential], skip_first_weight: bool = False) -> None:
        self.layers: list[tuple[Tensor, Tensor] | nn.Module] = []
        for position, module in enumerate(networks[0]):
            if isinstance(module, nn.Linear):
                linears = [network[position] for network in networks]
                weight = torch.stack([layer.weight.detach().T for layer in linears]).contiguous()
                bias = torch.stack([layer.bias.detach()[None, :] for layer in linears]).contiguous()
                self.layers.append((weight.requires_grad_(True), bias.requires_grad_(True)))
            else:
                self.layers.append(module)

    def parameters(self) -> list[Tensor]:
        return [tensor for layer in self.layers if isinstance(layer, tuple) for tensor in layer]

    def __call__(self, inputs: Tensor, start: int = 0) -> Tensor:
        hidden = inputs
        for layer in self.layers[start:]:
            if isinstance(layer, tuple):
                weight, bias = layer
                hidden = torch.baddbmm(bias, hidden, weight)
            else:
                hidden = layer(hidden)
        return hidden


def _pairs(all_pairs: Tensor) -> tuple[Tensor, Tensor]:
    """pos (R, B) and neg (R, B, B - 1) from the (R, B, B) all-pairs matrices."""
    return vmap(bounds.split_scores)(all_pairs)


class StackedCritic:
    """R critics of one kind (all :class:`~mitool.critics.SeparableCritic`, all Cosine, all Concat
    or all Bilinear, with the same sizes) as one model. ``parameters()`` are leaf tensors with a
    leading run axis of size R: train them with any elementwise optimiser (Adam)."""

    def __init__(self, critic_list: Sequence[nn.Module]) -> None:
        kinds = {type(critic) for critic in critic_list}
        if len(kinds) != 1:
            raise ValueError(
                f"StackedCritic needs critics of one kind, got {sorted(k.__name__ for k in kinds)}"
            )
        self.kind = kinds.pop()
        first = critic_list[0]
        if self.kind in (critics.SeparableCritic, critics.CosineCritic):
            self.embed_x = _StackedMLP([critic.embed_x for critic in critic_list])
            self.embed_y = _StackedMLP([critic.embed_y for critic in critic_list])
            self.temperature = getattr(first, "temperature", None)
            self._parameters = self.embed_x.parameters() + self.embed_y.parameters()
        elif self.kind is critics.ConcatCritic:
            self.net = _StackedMLP([critic.net for critic in critic_list])
            self.x_dim = first.x_dim
            weight, bias = self.net.layers[0]
            # split W^T (R, dx + dy, hidden) into the x rows and the y rows, as ConcatCritic does
            self.first_x = weight.detach()[:, : self.x_dim].clone().requires_grad_(True)
            self.first_y = weight.detach()[:, self.x_dim :].clone().requires_grad_(True)
            self.first_bias = bias
            self._parameters = [self.first_x, self.first_y, self.first_bias] + self.net.parameters()[2:]
        elif self.kind is critics.BilinearCritic:
            self.weight = torch.stack([critic.weight.detach() for critic in critic_list]).requires_grad_(True)
            self._parameters = [self.weight]
        else:
            raise ValueError(
                f"StackedCritic: unsupported critic {self.kind.__name__}; supported: "
                "SeparableCritic, CosineCritic, ConcatCritic, BilinearCritic"
            )
        expected = sum(p.numel() for p in first.parameters()) * len(critic_list)
        if sum(p.numel() for p in self._parameters) != expected:
            raise AssertionError("stacked parameters do not cover the critics' parameters")

    def parameters(self) -> list[Tensor]:
        return list(self._parameters)

    def replace_parameters(self, new_parameters: Sequence[Tensor]) -> None:
        """Swap in new leaf tensors (same order as :meth:`parameters`), e.g. after dropping runs."""
        new_parameters = list(new_parameters)
        self._parameters = new_parameters
        if self.kind in (critics.SeparableCritic, critics.CosineCritic):
            count = len(self.embed_x.parameters())
            _assign(self.embed_x, new_parameters[:count])
            _assign(self.embed_y, new_parameters[count:])
        elif self.kind is critics.ConcatCritic:
            self.first_x, self.first_y, self.first_bias = new_parameters[:3]
            _assign(self.net, [self.first_x, self.first_bias] + new_parameters[3:])
        else:
            (self.weight,) = new_parameters

    def scores(self, x: Tensor, y: Tensor, pool: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """pos (R, B) and neg (R, B, K_max): the other rows of the batch, or the shared pool."""
        if self.kind in (critics.SeparableCritic, critics.CosineCritic):
            gx, hy = self.embed_x(x), self.embed_y(y)
            if self.kind is critics.CosineCritic:
                gx, hy = F.normalize(gx, dim=-1), F.normalize(hy, dim=-1)
            if pool is None:
                if self.kind is critics.CosineCritic:
                    return _pairs(torch.bmm(gx / self.temperature, hy.transpose(1, 2)))
                return _pairs(torch.bmm(gx, hy.transpose(1, 2)))
            h_pool = self.embed_y(pool)
            if self.kind is critics.CosineCritic:
                h_pool = F.normalize(h_pool, dim=-1)
                pos = (gx * hy).sum(dim=-1) / self.temperature
                return pos, torch.bmm(gx / self.temperature, h_pool.transpose(1, 2))
            return (gx * hy).sum(dim=-1), torch.bmm(gx, h_pool.transpose(1, 2))
        if self.kind is critics.ConcatCritic:
            from_x = torch.baddbmm(self.first_bias, x, self.first_x)  # (R, B, hidden)
            candidates = y if pool is None else pool
            from_y = torch.bmm(candidates, self.first_y)  # (R, M, hidden)
            runs, batch, width = from_x.shape
            grid = (from_x[:, :, None, :] + from_y[:, None, :, :]).reshape(runs, -1, width)
            all_pairs = self.net(grid, start=1).reshape(runs, batch, -1)
            if pool is None:
                return _pairs(all_pairs)
            pos = self.net((from_x + torch.bmm(y, self.first_y)), start=1).squeeze(-1)
            return pos, all_pairs
        projected = torch.bmm(x, self.weight)
        if pool is None:
            return _pairs(torch.bmm(projected, y.transpose(1, 2)))
        return (projected * y).sum(dim=-1), torch.bmm(projected, pool.transpose(1, 2))


def _assign(network: _StackedMLP, tensors: list[Tensor]) -> None:
    pairs = iter(zip(tensors[0::2], tensors[1::2], strict=True))
    network.layers = [next(pairs) if isinstance(layer, tuple) else layer for layer in network.layers]
