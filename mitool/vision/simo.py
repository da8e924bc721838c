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
log(1 + alpha) - loss. The scores are formed in float32 (autocast off for them).

The authors' configuration (V2AI/SelfSup, examples/simo/simo.res50.scratch.imagenet.224size.256bs.200e:
``CLR.ALPHA=256, K=256`` at a batch of 256, tau 0.2, m 0.999, SGD lr 0.03, cosine, SyncBN) takes
every other key of the batch: ``randperm(N - 1)[:K]`` keeps all 255, one subset drawn per step and
shared by every query (rank 0's draw, gathered), and its alpha / K factor is commented out, so the
loss is plain InfoNCE there. This project's defaults (``METHODS["simo"].defaults``) keep alpha =
256, tau, m and the lr, but sample K = 16 negatives per query, each query its own subset: our
choice, to exercise EqCo's claim that alpha / K makes the result independent of K (the paper's
K-sweep), not the authors' released setting (``--negatives 255`` at batch 256 is that one, up to
the per-query subsets). SGD lr 0.03 x batch / 256 after 5 warmup epochs (the paper warms up
without saying how long; 5 epochs is ours). One direction only (query view 1, key view 2), as in the
authors' code. Sizes: K < N, and a batch shortened by unreadable images must still hold more
than K images.

Head: Linear(w, w, no bias) -> BN -> ReLU -> Linear(w, 128, no bias) -> BN. BatchNorm is
synchronised across ranks under DDP (no shuffle-BN); the sampled indices are drawn for the whole
global batch from the same random stream on every rank, so a run on W ranks draws the same
negatives as one process holding the global batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from mitool import checks
from mitool.bounds import BoundResult
from mitool.vision import distributed
from mitool.vision.choices import EMBEDDING_DIM
from mitool.vision.common import MakeBackbone, MomentumMethod
from mitool.vision.method_specs import METHODS

if TYPE_CHECKING:
    from mitool.vision.config import PretrainConfig

__all__ = ["SiMo", "bn_head", "sample_negative_indices"]


def bn_head(feature_width: int, embedding_dim: int = EMBEDDING_DIM) -> nn.Module:
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


class SiMo(MomentumMethod):
    """SiMo. ``forward(view_1, view_2)`` -> the bound's result (loss, mi, npc) for the local queries.

    make_backbone: returns (backbone, feature_width); loss: a bound of the InfoNCE family ("eqco"
    in SiMo) and loss_options its options (alpha for eqco, sigma for dclw); negatives: K sampled
    per query. Settings left None take the method's defaults (:data:`mitool.vision.method_specs.METHODS`).
    """

    spec = METHODS["simo"]

    def __init__(
        self,
        make_backbone: MakeBackbone,
        loss: str | None = None,
        loss_options: dict[str, float] | None = None,
        temperature: float | None = None,
        negatives: int | None = None,
        key_momentum: float | None = None,
        embedding_dim: int = EMBEDDING_DIM,
    ) -> None:
        super().__init__(make_backbone, bn_head, embedding_dim, key_momentum, loss, loss_options, temperature)
        negatives = self.spec.setting("negatives", negatives)
        self.negatives = checks.whole_number("negatives", negatives, minimum=1)

    @classmethod
    def from_config(cls, config: PretrainConfig, make_backbone: MakeBackbone) -> SiMo:
        return cls(
            make_backbone, config.loss, config.loss_options(), config.temperature, config.negatives,
            config.key_momentum, config.embedding_dim,
        )  # fmt: skip

    @classmethod
    def check_sizes(cls, config: PretrainConfig, world: int) -> None:
        if config.negatives >= config.batch_size:
            raise checks.ParameterError(
                "negatives",
                f"must be less than the global batch ({config.batch_size}) for simo, whose negatives "
                f"are the other keys of the batch; got {config.negatives}",
            )

    @classmethod
    def usable_rows(cls, rows: int, config: PretrainConfig, world: int) -> int:
        return super().usable_rows(rows, config, world) if rows * world > config.negatives else 0

    @classmethod
    def describe_negatives(cls, config: PretrainConfig) -> str:
        return f"K = {config.negatives} sampled per query"

    def forward(self, view_1: Tensor, view_2: Tensor) -> BoundResult:
        self.update_key_encoder()
        keys = self.key_embeddings(view_2)
        all_keys = distributed.gather_without_grad(keys)
        queries = self.query_embeddings(view_1)
        local = queries.shape[0]
        positions = torch.arange(local, device=queries.device) + distributed.rank() * local
        index = sample_negative_indices(all_keys.shape[0], positions, self.negatives)
        return self.embedding_bound(queries, keys, all_keys[index])  # negatives (B, K, d)
