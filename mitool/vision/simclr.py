"""SimCLR-style contrastive learning with in-batch negatives; with the dcl or dclw bound, DCL.

Chen, Kornblith, Norouzi, Hinton, "A Simple Framework for Contrastive Learning of Visual
Representations" (ICML 2020, arXiv 2002.05709) and Yeh, Hong, Hsu, Liu, Chen, LeCun, "Decoupled
Contrastive Learning" (ECCV 2022, arXiv 2110.06848).

One encoder f and head g embed both views of the N images of the global batch (B per rank):

    z_i^(v) = normalize(g(f(x_i^(v))))                     v in {1, 2}, gradients through both
    pos_i^(v)   = <z_i^(1), z_i^(2)> / tau                  the other view of the same image
    neg_i^(v)   = { <z_i^(v), z_j^(l)> / tau : l in {1, 2}, j != i }     2N - 2 scores
    loss        = bound(pos, neg) over the 2B local anchors (both views: symmetric)

The negatives are DCL's U_{i,k} (same-view and cross-view, all but the anchor and its positive).
With the infonce bound this is SimCLR's NT-Xent, -log e^{pos} / (e^{pos} + sum e^{neg}); with dcl
the positive leaves the denominator, loss = mean(-pos + log sum e^{neg}), which is negative once
training works; dclw weights the positive with 2 - 2N softmax(cos / sigma) over the 2N anchors
(sigma = 0.5). The weight is detached (no gradient flows through it), as in current lightly
(``negative_mises_fisher_weights`` detaches its inputs); the DCL implementation lightly cites
(raminnakhli/Decoupled-Contrastive-Learning), and lightly before that change, let the gradient flow
through the weight as well: this project follows the detached form.

Under DDP the embeddings of every rank are gathered with their gradients, so each anchor sees
all 2N - 2 negatives of the global batch, dclw's weight is normalised over the global batch of
anchors (an all-gathered log-sum-exp, :meth:`~mitool.vision.common.ContrastiveMethod.with_global_weight`;
lightly normalises over each rank's), and the gradient equals one process's on the global
batch; BatchNorm is synchronised across ranks. Both views go through the encoder as one batch of
2B images (one BN statistic for the two views, as in SimCLR). The scores are formed in float32
(autocast off for the (2B, 2N) product).

Augmentation: the same MoCo v2 two-view augmentation as the other methods
(:mod:`mitool.vision.augment`: jitter 0.4/0.4/0.4/0.1, blur with probability 0.5 at every image
size, 32 px included), not SimCLR's own (jitter strength 1.0, i.e. 0.8/0.8/0.8/0.2, and no blur on
CIFAR-10): our choice, so that the methods differ only in their loss and encoders.

Head: Linear(w, w) -> BN -> ReLU -> Linear(w, 128), w the backbone's feature width.

Defaults (``METHODS["simclr"].defaults``): InfoNCE, tau 0.1, lr 0.3 x batch / 256 after 10 warmup
epochs, with LARS (SimCLR's optimizer: weight decay 1e-6, trust coefficient 0.001, biases and
BatchNorm excluded; :mod:`mitool.vision.lars`) from a global batch of ``lars_from_batch``, with
momentum SGD (weight decay 1e-4) below it. K is not a setting: every anchor has the 2N - 2 other
views of the batch as negatives.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mitool.bounds import BoundResult
from mitool.vision import distributed
from mitool.vision.choices import EMBEDDING_DIM
from mitool.vision.common import ContrastiveMethod, MakeBackbone
from mitool.vision.method_specs import METHODS

if TYPE_CHECKING:
    from mitool.vision.config import PretrainConfig

__all__ = ["SimCLR", "in_batch_scores", "projection_head"]


def projection_head(feature_width: int, embedding_dim: int = EMBEDDING_DIM) -> nn.Module:
    """Linear(w, w) -> BN -> ReLU -> Linear(w, embedding_dim)."""
    return nn.Sequential(
        nn.Linear(feature_width, feature_width),
        nn.BatchNorm1d(feature_width),
        nn.ReLU(),
        nn.Linear(feature_width, embedding_dim),
    )


@functools.lru_cache(maxsize=8)
def _score_columns(local: int, total: int, offset: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """(positive (2B,), negatives (2B, 2N - 2)): for each anchor row of :func:`in_batch_scores`,
    the column of its positive and the columns of its negatives in order (all but itself and its
    positive). Built once per shape on the host and moved to ``device``: selecting with these
    indices needs no synchronisation, where a boolean mask would (its result's size)."""
    rows = torch.arange(2 * local)
    image = rows % local + offset
    itself = image + (rows >= local).long() * total
    positive = image + (rows < local).long() * total
    low, high = torch.minimum(itself, positive)[:, None], torch.maximum(itself, positive)[:, None]
    negatives = torch.arange(2 * total - 2).expand(2 * local, -1)
    negatives = negatives + (negatives >= low).long()  # skip the lower of the two columns, then
    negatives = negatives + (negatives >= high).long()  # the higher: the others in order
    return positive.to(device), negatives.to(device)


def in_batch_scores(
    local_1: Tensor, local_2: Tensor, all_1: Tensor, all_2: Tensor, offset: int, temperature: float
) -> tuple[Tensor, Tensor]:
    """``(pos, neg)`` of the 2B local anchors against the 2N embeddings of the global batch.

    local_v: (B, D) this rank's normalised embeddings of view v; all_v: (N, D) the global batch's
    (rows offset .. offset + B - 1 are this rank's). Anchor rows are [view 1, view 2]; candidate
    columns are [all_1, all_2]. pos: (2B,); neg: (2B, 2N - 2), each row without the anchor itself
    and its positive, the remaining columns in order. The scores are float32, formed with
    autocast off whatever the embeddings' dtype.
    """
    local, total = local_1.shape[0], all_1.shape[0]
    with torch.autocast(local_1.device.type, enabled=False):
        anchors = torch.cat([local_1, local_2]).float()
        scores = anchors @ torch.cat([all_1, all_2]).float().t() / temperature  # (2B, 2N)
    positive, negatives = _score_columns(local, total, offset, scores.device)
    return scores.gather(1, positive[:, None]).squeeze(1), scores.gather(1, negatives)


class SimCLR(ContrastiveMethod):
    """SimCLR / DCL. ``forward(view_1, view_2)`` -> the bound's result over the 2B local anchors.

    make_backbone: returns (backbone, feature_width); loss: a bound of the InfoNCE family, e.g.
    infonce (SimCLR), dcl or dclw (DCL), with loss_options its options (dclw's temperature is
    ``temperature``). Settings left None take the method's defaults
    (:data:`mitool.vision.method_specs.METHODS`).
    """

    spec = METHODS["simclr"]

    def __init__(
        self,
        make_backbone: MakeBackbone,
        loss: str | None = None,
        loss_options: dict[str, float] | None = None,
        temperature: float | None = None,
        embedding_dim: int = EMBEDDING_DIM,
    ) -> None:
        super().__init__(loss, loss_options, temperature)
        self.backbone, feature_width = make_backbone()
        self.head = projection_head(feature_width, embedding_dim)
        self.bound = self.scores_bound()

    @classmethod
    def from_config(cls, config: PretrainConfig, make_backbone: MakeBackbone) -> SimCLR:
        return cls(
            make_backbone, config.loss, config.loss_options(), config.temperature, config.embedding_dim
        )

    @classmethod
    def describe_negatives(cls, config: PretrainConfig) -> str:
        return f"K = 2N - 2 = {2 * config.batch_size - 2} in the batch"

    def forward(self, view_1: Tensor, view_2: Tensor) -> BoundResult:
        embeddings = F.normalize(self.head(self.backbone(torch.cat([view_1, view_2]))), dim=1)
        local_1, local_2 = embeddings.chunk(2)
        all_1, all_2 = distributed.gather_with_grad(local_1), distributed.gather_with_grad(local_2)
        offset = distributed.rank() * local_1.shape[0]
        pos, neg = in_batch_scores(local_1, local_2, all_1, all_2, offset, self.temperature)
        return self.with_global_weight(self.bound(pos, neg), pos)
