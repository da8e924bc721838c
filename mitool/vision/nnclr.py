"""NNCLR: nearest-neighbour contrastive learning, with any bound of the InfoNCE family.

Dwibedi, Aytar, Tompson, Sermanet, Zisserman, "With a Little Help from My Friends: Nearest-Neighbor
Contrastive Learning of Visual Representations" (ICCV 2021, arXiv 2104.14548). With the dcl loss it
is the DCL paper's best system (Yeh et al., ECCV 2022: NNCLR + DCL, 72.3% ImageNet linear top-1 at
batch 512 and 400 epochs): ``--method nnclr --loss dcl``.

One encoder f, a projection head g and a prediction head h embed both views of the N images of
the global batch (B per rank); Q is the support set, a first-in first-out queue of S past
projections (the paper's Algorithm 1):

    z_i^(v) = normalize(g(f(x_i^(v))))                 projection, the embedding the support set holds
    p_i^(v) = normalize(h(g(f(x_i^(v)))))              prediction, with gradient
    nn_i^(v) = argmax_{q in Q} <z_i^(v), q>            the nearest neighbour (cosine) in Q, no gradient
    pos_i = <nn_i^(1), p_i^(2)> / tau                  view 1's neighbour against view 2's prediction
    neg_i = { <nn_i^(1), p_k^(2)> / tau : k != i }     the N - 1 other predictions of the global batch
    (and the same with the views swapped: 2B anchors, the symmetric loss)
    loss = bound(pos, neg) over the 2B anchors        = (L(nn^(1), p^(2)) + L(nn^(2), p^(1))) / 2
    Q <- Q with the oldest N entries replaced by z^(1) of the global batch (gathered, rank 0's first)

With the infonce bound this is the paper's loss, -log e^{pos} / (e^{pos} + sum_k e^{neg_k}) (its
eq. 2, symmetrised as its Algorithm 1 does: L(NN1, p2) / 2 + L(NN2, p1) / 2); with dcl the positive
leaves the denominator, with dclw it is weighted (2 - 2N softmax(cos / sigma) over the 2N anchors,
normalised over the global batch under DDP), with eqco the negatives' sum is scaled by alpha / K,
K = N - 1. The MI estimate is the bound's (infonce: log N - loss). The gradient reaches the
encoder through the predictions only: the neighbours come from the queue, and the projections
enter it detached (the paper's stop-gradient).

The support set: the neighbours of both views are looked up before the step's projections are
enqueued, so a query never meets its own current embedding. It starts empty: only the entries
written so far are searched, and at the very first step, with nothing written yet, each view's
own (detached) projection stands in for its neighbour (our choice; the public implementations
fill the queue with random unit vectors, whose "neighbours" carry no information until the queue
has turned over). Under DDP the projections of the whole global batch are gathered and written,
so every rank holds the same support set; a run on W ranks looks up the same neighbours as one
process holding the global batch. The support set, its write position and its fill count are
buffers of the module: the checkpoint holds them, and a resumed run continues exactly.

Sizes: the support set must hold at least the N embeddings written per step (the global batch)
and fewer embeddings than the training set has images: both refused otherwise. Past the first
epoch the support set holds the previous epoch's embedding of a query's own image for a share
S (S + N) / (2 M^2) ~ (S / M)^2 / 2 of the queries, M the training images (MoCo's queue share,
:func:`mitool.vision.common.own_image_share`): 0.31% for the paper's 98 304 of ImageNet's 1.28 M
at batch 4096, 0.24% for 4096 on Fashion-MNIST at batch 128; but 50% at S = M and all of them
from S = 2M, where a view's nearest neighbour would often be its own image.

Defaults (``METHODS["nnclr"].defaults``), from the paper (section 3.3, implementation details,
and its ablation of the support-set size, which grows from 8 192 to 98 304 and keeps the largest):
support set S = 98 304, tau 0.1, embeddings d = 256, projection MLP of 3 layers
[2048, 2048, d] and prediction MLP of 2 layers [4096, d] (ResNet-50), BatchNorm in both. Here the
hidden widths follow the backbone as in the other methods' heads: projection
Linear(w, w) -> BN -> ReLU -> Linear(w, w) -> BN -> ReLU -> Linear(w, d) -> BN and prediction
Linear(d, 2w) -> BN -> ReLU -> Linear(2w, d), w the backbone's feature width (2048 for ResNet-50:
the paper's sizes). The paper trains with LARS at batch 4096 for 1000 epochs (weight decay 1e-6,
10 warmup epochs): from a global batch of ``lars_from_batch`` the optimizer here is LARS too
(:mod:`mitool.vision.lars`, with SimCLR's base lr 0.3, weight decay 1e-6 and trust coefficient
0.001: ``config.LARS_DEFAULTS``); below it momentum SGD with SimCLR's SGD defaults (base lr 0.3,
10 warmup epochs, weight decay 1e-4), our choice. Per dataset (``dataset_defaults``): S = 4096 on
CIFAR-10, STL-10 and Fashion-MNIST (the MoCo CIFAR demo's queue, a similar share of the data), 128
with a batch of 64 on the synthetic images; Fashion-MNIST also takes the short-schedule settings
of the other methods (batch 128, base lr 0.8, warmup 0.1 epoch) and tau 0.2 (simclr's row; not
tuned for nnclr). Augmentation: the MoCo v2 two-view augmentation of every method here (the paper
uses SimCLR's/BYOL's).

The nearest neighbours are found in float32 with autocast off, in chunks of the support set
(never the whole (2B, S) similarity matrix at once), and the scores (2B, N) are formed in float32.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mitool import checks
from mitool.bounds import BoundResult
from mitool.vision import distributed
from mitool.vision.common import ContrastiveMethod, MakeBackbone, own_image_share, ring_buffer_write
from mitool.vision.method_specs import METHODS

if TYPE_CHECKING:
    from mitool.vision.config import PretrainConfig

__all__ = ["NNCLR", "nearest_neighbours", "prediction_head", "projection_head", "support_scores"]

SEARCH_CHUNK = 32768
"""Support-set rows scored at once by :func:`nearest_neighbours`."""


def projection_head(feature_width: int, embedding_dim: int) -> nn.Module:
    """NNCLR's projection: Linear(w, w) -> BN -> ReLU -> Linear(w, w) -> BN -> ReLU -> Linear(w, d) -> BN."""
    return nn.Sequential(
        nn.Linear(feature_width, feature_width),
        nn.BatchNorm1d(feature_width),
        nn.ReLU(),
        nn.Linear(feature_width, feature_width),
        nn.BatchNorm1d(feature_width),
        nn.ReLU(),
        nn.Linear(feature_width, embedding_dim),
        nn.BatchNorm1d(embedding_dim),
    )


def prediction_head(embedding_dim: int, hidden_width: int) -> nn.Module:
    """NNCLR's prediction: Linear(d, hidden) -> BN -> ReLU -> Linear(hidden, d)."""
    return nn.Sequential(
        nn.Linear(embedding_dim, hidden_width),
        nn.BatchNorm1d(hidden_width),
        nn.ReLU(),
        nn.Linear(hidden_width, embedding_dim),
    )


@torch.no_grad()
def nearest_neighbours(queries: Tensor, support: Tensor, chunk: int = SEARCH_CHUNK) -> Tensor:
    """The index in ``support`` (S, D) of the row with the largest inner product with each row of
    ``queries`` (n, D): the cosine nearest neighbour of unit vectors. (n,) int64; the first such
    row on ties. Float32 with autocast off, ``chunk`` support rows at a time."""
    if support.shape[0] == 0:
        raise ValueError("the support set is empty: there is no neighbour to find")
    with torch.autocast(queries.device.type, enabled=False):
        queries = queries.float()
        best_score = best_index = None
        for start in range(0, support.shape[0], chunk):
            score, index = (queries @ support[start : start + chunk].float().t()).max(dim=1)
            if best_score is None:
                best_score, best_index = score, index
            else:
                better = score > best_score  # strictly: an earlier row keeps a tie
                best_score = torch.where(better, score, best_score)
                best_index = torch.where(better, index + start, best_index)
    return best_index


@functools.lru_cache(maxsize=8)
def _score_columns(local: int, total: int, offset: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """(positive (2B,), negatives (2B, N - 1)): for each anchor row of :func:`support_scores`, the
    column of its positive (its own image, offset + row mod B) and the other N - 1 columns in
    order. Built once per shape on the host: selecting with indices needs no synchronisation."""
    rows = torch.arange(2 * local)
    positive = rows % local + offset
    negatives = torch.arange(total - 1).expand(2 * local, -1)
    negatives = negatives + (negatives >= positive[:, None]).long()
    return positive.to(device), negatives.to(device)


def support_scores(
    neighbours_1: Tensor, neighbours_2: Tensor, all_2: Tensor, all_1: Tensor, offset: int, temperature: float
) -> tuple[Tensor, Tensor]:
    """``(pos, neg)`` of the 2B local anchors: rows [neighbours of view 1 (B, D), neighbours of
    view 2 (B, D)], scored against the predictions of the other view of the global batch
    (``all_2`` for the first B rows, ``all_1`` for the last B: (N, D) each, rows offset .. offset +
    B - 1 this rank's). pos: (2B,) the own image's column; neg: (2B, N - 1) the other columns, in
    order. Float32 with autocast off."""
    local, total = neighbours_1.shape[0], all_1.shape[0]
    with torch.autocast(neighbours_1.device.type, enabled=False):
        scores_1 = neighbours_1.float() @ all_2.float().t()
        scores_2 = neighbours_2.float() @ all_1.float().t()
        scores = torch.cat([scores_1, scores_2]) / temperature  # (2B, N)
    positive, negatives = _score_columns(local, total, offset, scores.device)
    return scores.gather(1, positive[:, None]).squeeze(1), scores.gather(1, negatives)


class NNCLR(ContrastiveMethod):
    """NNCLR. ``forward(view_1, view_2)`` -> the bound's result over the 2B local anchors.

    make_backbone: returns (backbone, feature_width); loss: a bound of the InfoNCE family (infonce,
    the paper's; dcl, dclw, eqco) with loss_options its options; support_size: S, the support set's
    rows; embedding_dim: d. Settings left None take the method's defaults
    (:data:`mitool.vision.method_specs.METHODS`).
    """

    spec = METHODS["nnclr"]

    def __init__(
        self,
        make_backbone: MakeBackbone,
        loss: str | None = None,
        loss_options: dict[str, float] | None = None,
        temperature: float | None = None,
        support_size: int | None = None,
        embedding_dim: int | None = None,
    ) -> None:
        super().__init__(loss, loss_options, temperature)
        size = checks.whole_number("support_size", self.spec.setting("support_size", support_size), minimum=1)
        embedding_dim = checks.whole_number(
            "embedding_dim", self.spec.setting("embedding_dim", embedding_dim), minimum=1
        )
        self.backbone, feature_width = make_backbone()
        self.head = projection_head(feature_width, embedding_dim)
        self.predictor = prediction_head(embedding_dim, 2 * feature_width)
        self.bound = self.scores_bound()
        self.register_buffer("support", torch.zeros(size, embedding_dim))
        self.register_buffer("support_pointer", torch.zeros((), dtype=torch.long))
        self.register_buffer("support_filled", torch.zeros((), dtype=torch.long))
        self._host: tuple[int, int] | None = None  # (pointer, filled) on the host: reading the
        # buffers on a GPU would wait for the device at every step

    @classmethod
    def from_config(cls, config: PretrainConfig, make_backbone: MakeBackbone) -> NNCLR:
        return cls(
            make_backbone, config.loss, config.loss_options(), config.temperature, config.support_size,
            config.embedding_dim,
        )  # fmt: skip

    @classmethod
    def check_sizes(cls, config: PretrainConfig, world: int) -> None:
        if config.support_size < config.batch_size:
            raise checks.ParameterError(
                "support_size",
                f"(nnclr's support set) must hold at least the {config.batch_size} embeddings written per "
                f"step (the global batch), got {config.support_size}",
            )

    @classmethod
    def check_training_set(cls, config: PretrainConfig, images: int) -> None:
        if config.support_size >= images:
            share = own_image_share(images, config.support_size, config.batch_size)
            raise checks.ParameterError(
                "support_size",
                f"(nnclr's support set) must be less than the {images} training images: with this support "
                f"set {share:.0%} of the queries would find an older embedding of their own image in it "
                "(half of them at S = N, all at 2N), often as their nearest neighbour (the paper: 98 304 "
                f"of ImageNet's 1.28 M, 0.31%); got {config.support_size}",
            )

    @classmethod
    def describe_negatives(cls, config: PretrainConfig) -> str:
        return f"support set {config.support_size}, K = N - 1 = {config.batch_size - 1} in the batch"

    def _load_from_state_dict(self, *arguments, **keywords) -> None:
        super()._load_from_state_dict(*arguments, **keywords)
        self._host = None  # read the loaded buffers at the next use

    def _position(self) -> tuple[int, int]:
        """(write pointer, rows written so far, at most S), from the host's copy when it has one."""
        if self._host is None:
            self._host = (int(self.support_pointer), int(self.support_filled))
        return self._host

    @torch.compiler.disable  # eager under torch.compile: the host counters change every step
    @torch.no_grad()
    def neighbours(self, embeddings: Tensor) -> Tensor:
        """The nearest neighbour in the support set of each row of ``embeddings`` (n, D), unit
        vectors, among the rows written so far; the rows themselves while none is written."""
        filled = self._position()[1]
        if filled == 0:
            return embeddings.float()
        support = self.support[:filled]
        return support[nearest_neighbours(embeddings, support)]

    @torch.compiler.disable
    @torch.no_grad()
    def enqueue(self, embeddings: Tensor) -> None:
        """Write ``embeddings`` (n, D), n <= S, over the n oldest rows of the support set (a first-in,
        first-out ring buffer) and advance its pointer and fill count."""
        count, size = embeddings.shape[0], self.support.shape[0]
        if count > size:
            raise ValueError(
                f"support_size ({size}) must be >= the embeddings written per step (the global batch, "
                f"{count})"
            )
        pointer, filled = self._position()
        self.support, pointer = ring_buffer_write(self.support, pointer, embeddings)
        self._host = (pointer, min(size, filled + count))
        self.support_pointer.fill_(pointer)
        self.support_filled.fill_(self._host[1])

    def forward(self, view_1: Tensor, view_2: Tensor) -> BoundResult:
        projections = self.head(self.backbone(torch.cat([view_1, view_2])))  # (2B, d), one BN statistic
        predictions = F.normalize(self.predictor(projections).float(), dim=1)
        embeddings = F.normalize(projections.detach().float(), dim=1)
        local_1, local_2 = embeddings.chunk(2)
        prediction_1, prediction_2 = predictions.chunk(2)
        neighbours_1, neighbours_2 = self.neighbours(local_1), self.neighbours(local_2)
        all_1 = distributed.gather_with_grad(prediction_1)
        all_2 = distributed.gather_with_grad(prediction_2)
        offset = distributed.rank() * local_1.shape[0]
        pos, neg = support_scores(neighbours_1, neighbours_2, all_2, all_1, offset, self.temperature)
        result = self.with_global_weight(self.bound(pos, neg), pos)
        self.enqueue(distributed.gather_without_grad(local_1))
        return result
