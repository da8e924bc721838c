"""What the contrastive methods share: the rules a method gives the training loop and the command
line (:class:`ContrastiveMethod`), and the momentum encoder of MoCo and SiMo (:class:`MomentumMethod`).

A method is one class in one file (:mod:`~mitool.vision.moco`, :mod:`~mitool.vision.simo`,
:mod:`~mitool.vision.simclr`, :mod:`~mitool.vision.nnclr`), listed in
:data:`mitool.vision.method_specs.METHODS`. Its scores are cosine similarities divided by a
temperature tau: queries and keys are L2-normalised embeddings, so q . k = cos(q, k) and the
scores lie in [-1/tau, 1/tau]. The loss is a bound of the InfoNCE family of
:data:`mitool.bounds.BOUNDS`, named by ``loss`` with its options (eqco's alpha, dclw's sigma)
read from that table.

Precision: under bf16 (or fp16) autocast the encoders run in the low precision, but the scores
are formed from the embeddings cast to float32 with autocast switched off
(:meth:`ContrastiveMethod.embedding_bound`, :func:`mitool.vision.simclr.in_batch_scores`): a bf16
product would round logits near 1/tau = 5 to 10 to steps of 1/32 to 1/16. At d = 128 the float32
products cost little beside the encoders.

DCLW under DDP: the positive weight 2 - n softmax(cos / sigma) is normalised over the global batch
of anchors, not over each rank's (:meth:`ContrastiveMethod.with_global_weight`), so that W ranks
compute the loss of one process holding the global batch.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mitool import bounds, checks
from mitool.bounds import BoundResult
from mitool.fused import contrastive_bound
from mitool.vision import distributed

if TYPE_CHECKING:
    from mitool.vision.config import PretrainConfig
    from mitool.vision.method_specs import MethodSpec

__all__ = [
    "ContrastiveMethod",
    "MakeBackbone",
    "MomentumMethod",
    "momentum_update",
    "own_image_share",
    "ring_buffer_write",
]


MakeBackbone = Callable[[], tuple[nn.Module, int]]
"""Returns a new (backbone, feature_width); see :func:`mitool.vision.backbones.build_backbone`."""


class ContrastiveMethod(nn.Module):
    """A contrastive method: ``forward(view_1, view_2)`` -> the bound's result (loss, mi, npc).

    Subclasses set ``spec``, their entry of :data:`mitool.vision.method_specs.METHODS` (name, summary,
    defaults, what K means), and may override the class methods that state the method's rules.
    """

    spec: ClassVar[MethodSpec]

    def __init__(self, loss: str | None, loss_options: Mapping[str, float] | None, temperature: float | None):
        super().__init__()
        self.loss = checks.choice("loss", loss or self.spec.defaults["loss"], bounds.INFONCE_FAMILY)
        self.loss_options = self.spec.options_of_loss(self.loss, loss_options)
        self.temperature = checks.positive("temperature", self.spec.setting("temperature", temperature))

    # -- the method's rules ------------------------------------------------------------------

    @classmethod
    def from_config(cls, config: PretrainConfig, make_backbone: MakeBackbone) -> ContrastiveMethod:
        """The method built from a resolved config (see :func:`mitool.vision.methods.build_method`)."""
        raise NotImplementedError

    @classmethod
    def check_sizes(cls, config: PretrainConfig, world: int) -> None:
        """ParameterError when the batch, K or the BN groups do not fit together (``world`` processes)."""

    @classmethod
    def check_training_set(cls, config: PretrainConfig, images: int) -> None:
        """ParameterError when the settings do not suit a training set of ``images`` images."""

    @classmethod
    def usable_rows(cls, rows: int, config: PretrainConfig, world: int) -> int:
        """How many of ``rows`` images of a batch (fewer than the batch after unreadable images
        were left out) the method can train on; 0 to skip the batch."""
        return rows if rows >= 2 else 0

    @classmethod
    def batch_norm(cls, config: PretrainConfig, world: int) -> str:
        """The BatchNorm of the run: "sync" (global-batch statistics), "split" (split-BN groups on
        one process) or "local" (each process its own, shuffle-BN)."""
        return "sync"

    @classmethod
    def describe_negatives(cls, config: PretrainConfig) -> str:
        """The negatives of a run in a few words, for figure titles."""
        return f"K = {config.negatives}"

    # -- pieces of the forward pass ----------------------------------------------------------

    def embed(self, images: Tensor) -> Tensor:
        """The normalised embeddings normalize(g(f(images))) (N, D) in float32, f the (query)
        backbone and g its head, where alignment and uniformity are measured
        (:mod:`mitool.vision.alignment`): the space the loss scores for MoCo, SiMo and SimCLR; for
        NNCLR the projection g (its support set's space), not the predictions h(g) its loss scores
        against the neighbours."""
        return F.normalize(self.head(self.backbone(images)).float(), dim=1)

    def scores_bound(self) -> Callable[[Tensor, Tensor], BoundResult]:
        """The bound as a function ``(pos, neg) -> BoundResult`` of scores (similarities / tau)."""
        bound = bounds.BOUNDS[self.loss]
        temperature = {option.name: self.temperature for option in bound.options if option.score_temperature}
        return bounds.get(self.loss, **self.loss_options, **temperature)

    def embedding_bound(self, queries: Tensor, positive_keys: Tensor, negative_keys: Tensor) -> BoundResult:
        """The bound on the scores of embeddings (:func:`mitool.fused.contrastive_bound`: queries
        (B, d), their positive keys (B, d), negatives (K, d) shared or (B, K, d) per query), the
        scores formed in float32 with autocast off, and dclw's weight normalised over the global
        batch under DDP (:meth:`with_global_weight`)."""
        with torch.autocast(queries.device.type, enabled=False):
            queries, positive_keys = queries.float(), positive_keys.float()
            negative_keys = negative_keys.float()
            result = contrastive_bound(
                queries, positive_keys, negative_keys, self.temperature, self.loss, **self.loss_options
            )
            if self.loss == "dclw" and distributed.is_distributed():
                pos = (queries * positive_keys).sum(dim=1) / self.temperature
                result = self.with_global_weight(result, pos)
        return result

    def with_global_weight(self, result: BoundResult, pos: Tensor) -> BoundResult:
        """``result`` of the dclw bound on this rank's n anchors (scores ``pos`` (n,), with their
        gradient), with the positive weight normalised over the global batch of W n anchors:

            v_i = 2 - W n exp(pos_i tau / sigma - LSE),   LSE = log sum over all ranks' anchors
                                                             of exp(pos_j tau / sigma), detached

        (one all-gather of the W local log-sum-exps), in place of the bound's v_i = 2 - n
        softmax over this rank's anchors. The loss is linear in the (detached) weight, so the change
        is the term mean_i (v_i^local - v_i^global) pos_i. Other bounds, and one process: unchanged."""
        if self.loss != "dclw" or not distributed.is_distributed():
            return result
        logits = pos.detach().float() * (self.temperature / self.loss_options["sigma"])
        local_lse = torch.logsumexp(logits, dim=0)
        global_lse = distributed.logsumexp_over_ranks(local_lse)
        rows = pos.shape[0]
        local_weight = 2.0 - rows * torch.exp(logits - local_lse)
        global_weight = 2.0 - rows * distributed.world_size() * torch.exp(logits - global_lse)
        correction = ((local_weight - global_weight) * pos.float()).mean()
        return BoundResult(loss=result.loss + correction, mi=result.mi, npc=result.npc)


class MomentumMethod(ContrastiveMethod):
    """A query encoder (backbone f and head g, trained) and a key encoder (f', g'), a deep copy
    that follows it as an exponential moving average (He et al. 2020, eq. 2):

        q = normalize(g(f(x)))          k = normalize(g'(f'(x)))
        theta' <- m theta' + (1 - m) theta          before each step
    """

    def __init__(
        self,
        make_backbone: MakeBackbone,
        make_head: Callable[[int, int], nn.Module],
        embedding_dim: int,
        key_momentum: float | None,
        loss: str | None,
        loss_options: Mapping[str, float] | None,
        temperature: float | None,
    ) -> None:
        super().__init__(loss, loss_options, temperature)
        self.backbone, feature_width = make_backbone()
        self.head = make_head(feature_width, embedding_dim)
        self.key_backbone = copy.deepcopy(self.backbone).requires_grad_(False)
        self.key_head = copy.deepcopy(self.head).requires_grad_(False)
        self.key_momentum = checks.number(
            "key_momentum", self.spec.setting("key_momentum", key_momentum), minimum=0.0, below=1.0
        )

    @torch.no_grad()
    def update_key_encoder(self) -> None:
        """theta' <- m theta' + (1 - m) theta for the backbone and the head."""
        momentum_update(self.key_backbone, self.backbone, self.key_momentum)
        momentum_update(self.key_head, self.head, self.key_momentum)

    def query_embeddings(self, images: Tensor) -> Tensor:
        """q = normalize(g(f(images))), with gradient: (N, D)."""
        return F.normalize(self.head(self.backbone(images)), dim=1)

    @torch.no_grad()
    def key_embeddings(self, images: Tensor) -> Tensor:
        """k = normalize(g'(f'(images))), without gradient: (N, D)."""
        return F.normalize(self.key_head(self.key_backbone(images)), dim=1)


@torch.no_grad()
def momentum_update(key_encoder: nn.Module, query_encoder: nn.Module, momentum: float) -> None:
    """theta_key <- m * theta_key + (1 - m) * theta_query for every parameter (He et al. 2020, eq. 2).

    Buffers (BatchNorm running statistics) are not averaged: the key encoder keeps its own.
    One multi-tensor ``torch._foreach_lerp_`` for all parameters: a ResNet-50 and its head have
    about 160 parameter tensors, and one operator per tensor costs more host time on a GPU than
    the arithmetic itself.
    """
    key_parameters = list(key_encoder.parameters())
    query_parameters = [parameter.detach() for parameter in query_encoder.parameters()]
    if len(key_parameters) != len(query_parameters):
        raise ValueError(
            f"key and query encoders must have the same parameters, got {len(key_parameters)} "
            f"and {len(query_parameters)} tensors"
        )
    torch._foreach_lerp_(key_parameters, query_parameters, 1.0 - momentum)


def ring_buffer_write(buffer: Tensor, pointer: int, rows: Tensor) -> tuple[Tensor, int]:
    """A first-in, first-out ring buffer: ``rows`` (n, D), n <= len(buffer), written over the n
    oldest entries of ``buffer`` (K, D) from slot ``pointer`` on, wrapping around its end; returns
    (the new buffer, the next pointer (pointer + n) mod K). MoCo's queue and NNCLR's support set.

    A new tensor rather than an in-place write: the old buffer may still be needed by the backward
    pass of the scores it produced (and torch.compile may drop a defensive clone)."""
    count, size = rows.shape[0], buffer.shape[0]
    if count > size:
        raise ValueError(f"a ring buffer of {size} rows cannot take {count} rows in one write")
    slots = (pointer + torch.arange(count, device=buffer.device)) % size
    written = buffer.clone()
    written[slots] = rows.to(written.dtype)
    return written, (pointer + count) % size


def own_image_share(images: int, queue: int, batch: int) -> float:
    """The share of the queries whose own image has an older entry in a first-in, first-out queue
    of the ``queue`` latest keys (MoCo's queue, NNCLR's support set), once the run is past its
    first epoch: N = ``images`` training images in a fresh random order every epoch, the last
    partial batch dropped (M = B floor(N / B) images an epoch, T = M / B steps), B = ``batch``
    keys written after each step.

    The query of step b (0 <= b < T) of an epoch meets the queue of the K keys written before that
    step; its own image's previous key, from the previous epoch (with probability M / N), sits at
    a uniform position s of that epoch and is in the queue when M - s + b B <= K, i.e. for
    min(max(K - b B, 0), M) of the M positions. Averaged over the steps:

        share = sum_{b=0}^{T-1} min(max(K - b B, 0), M) / (T N)
              = K (K + B) / (2 N M)  ~  (K / N)^2 / 2     for K <= M a multiple of B
              ~ 1/2 + B / (2N)  at K = N,   1  at K >= 2N

    (keys of earlier epochs, which count only for an image left out of the previous epoch's M,
    are left out)."""
    steps = images // batch
    if steps == 0:
        raise ValueError(f"batch ({batch}) must be at most the images ({images})")
    seen = steps * batch
    return sum(min(max(queue - step * batch, 0), seen) for step in range(steps)) / (steps * images)
