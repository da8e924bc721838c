"""SiMo, "simplified MoCo", from Zhu, Huang, Li, Zhang, Sun, "EqCo: Equivalent Rules for
Self-supervised Contrastive Learning" (arXiv 2010.01929).

MoCo without the queue: the negatives of a query are other keys of the same global batch, and the
EqCo loss makes the result independent of how many are used. For a global batch of N images
(B per rank) with views x^(1), x^(2):

    q = normalize(g(f(x^(1))))             query encoder f and head g, with gradient
    k = normalize(g'(f'(x^(2))))           momentum key encoder, no gradient, keys of all N images
    theta' <- m theta' + (1 - m) theta     m = 0.999
    pos_i  = q_i . k_i / tau                                    (B,)
    neg_ij = q_i . k_{s_ij} / tau,  s_i: K indices drawn        (B, K)
             uniformly without replacement from {1..N} \\ {i}
    loss   = eqco(pos, neg; alpha) = mean_i log(e^{pos_i} + (alpha / K) sum_j e^{neg_ij}) - pos_i

computed by :func:`mitool.fused.contrastive_bound` on the embeddings with the per-query
negatives all_keys[s_i] (B, K, d), the formula being :mod:`mitool.bounds`' eqco (or the chosen
bound of the InfoNCE family); i.e. InfoNCE with the margin m = tau log(alpha / K) on the positive; MI estimate
log(1 + alpha) - loss. Default K = 16 sampled negatives, alpha = 256 (the paper's batch 256
configuration, where K = alpha = 256 and the loss is plain InfoNCE), tau = 0.2. One direction
only (query view 1, key view 2), as in the authors' configuration.

Head: Linear(w, w, no bias) -> BN -> ReLU -> Linear(w, 128, no bias) -> BN. BatchNorm is
synchronised across ranks under DDP (no shuffle-BN); the sampled indices are drawn for the whole
global batch from the same random stream on every rank, so a run on W ranks draws the same
negatives as one process holding the global batch.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mitool.bounds import BoundResult
from mitool.fused import contrastive_bound
from mitool.vision import distributed
from mitool.vision.common import check_bound, momentum_update

__all__ = ["SiMo", "sample_negative_indices"]


def bn_head(feature_width: int, embedding_dim: int = 128) -> nn.Module:
    """SiMo's head: Linear(w, w, no bias) -> BN -> ReLU -> Linear(w, embedding_dim, no bias) -> BN."""
    return nn.Sequential(
        nn.Linear(feature_width, feature_width, bias=False),
        nn.BatchNorm1d(feature_width),
        nn.ReLU(),
        nn.Linear(feature_width, embedding_dim, bias=False),
        nn.BatchNorm1d(embedding_dim),
    )


def sample_negative_indices(global_batch: int, positions: Tensor, count: int) -> Tensor:
    """For each query position p (a row of the global batch), ``count`` distinct key indices
    drawn uniformly from {0, ..., global_batch - 1} without p. Returns (len(positions), count).

    Draws a (global_batch, global_batch - 1) uniform matrix and keeps the rows of ``positions``
    (so every rank consumes the same random numbers); the ``count`` largest entries of a row are a
    uniform subset of the other keys, and index j >= p is shifted to j + 1 to skip the positive.
    """
    if not 1 <= count <= global_batch - 1:
        raise ValueError(
            f"negatives must be between 1 and the global batch - 1 = {global_batch - 1} for simo, got {count}"
        )
    draws = torch.rand(global_batch, global_batch - 1, device=positions.device)[positions]
    chosen = draws.topk(count, dim=1).indices
    return chosen + (chosen >= positions[:, None]).long()


class SiMo(nn.Module):
    """SiMo. ``forward(view_1, view_2)`` -> the bound's result (loss, mi, npc) for the local queries.

    make_backbone: returns (backbone, feature_width); bound: the name of a bound of the InfoNCE
    family ("eqco" in SiMo) and bound_options its options (``{"alpha": 256}`` for eqco, sigma
    for dclw); negatives: K sampled per query.
    """

    def __init__(
        self,
        make_backbone: Callable[[], tuple[nn.Module, int]],
        bound: str = "eqco",
        bound_options: dict[str, float] | None = None,
        temperature: float = 0.2,
        negatives: int = 16,
        key_momentum: float = 0.999,
        embedding_dim: int = 128,
    ) -> None:
        super().__init__()
        if negatives < 1:
            raise ValueError(f"negatives (sampled per query) must be >= 1 for simo, got {negatives}")
        self.backbone, feature_width = make_backbone()
        self.head = bn_head(feature_width, embedding_dim)
        self.key_backbone = copy.deepcopy(self.backbone).requires_grad_(False)
        self.key_head = copy.deepcopy(self.head).requires_grad_(False)
        self.bound, self.bound_options = check_bound(
            bound, {"alpha": 256.0} if bound == "eqco" and bound_options is None else bound_options
        )
        self.temperature = temperature
        self.negatives = negatives
        self.key_momentum = key_momentum

    def forward(self, view_1: Tensor, view_2: Tensor) -> BoundResult:
        with torch.no_grad():
            momentum_update(self.key_backbone, self.backbone, self.key_momentum)
            momentum_update(self.key_head, self.head, self.key_momentum)
            keys = F.normalize(self.key_head(self.key_backbone(view_2)), dim=1)
            all_keys = distributed.gather_without_grad(keys)
        queries = F.normalize(self.head(self.backbone(view_1)), dim=1)
        local = queries.shape[0]
        positions = torch.arange(local, device=queries.device) + distributed.rank() * local
        index = sample_negative_indices(all_keys.shape[0], positions, self.negatives)
        negative_keys = all_keys.to(queries.dtype)[index]  # (B, K, d)
        return contrastive_bound(
            queries, keys.to(queries.dtype), negative_keys, self.temperature, self.bound, **self.bound_options
        )
