"""MoCo v2: momentum contrast with a queue of negative keys.

He, Fan, Wu, Xie, Girshick, "Momentum Contrast for Unsupervised Visual Representation Learning"
(CVPR 2020, arXiv 1911.05722) and Chen, Fan, Girshick, He, "Improved Baselines with Momentum
Contrastive Learning" (arXiv 2003.04297, the MLP head and the stronger augmentation of v2).

For a batch of images x with two augmented views x^(1), x^(2):

    q = normalize(g(f(x^(1))))             query: encoder f and MLP head g, with gradient
    k = normalize(g'(f'(x^(2))))           key: momentum encoder, no gradient
    theta' <- m theta' + (1 - m) theta     before each step, m = 0.999
    pos_i  = q_i . k_i / tau,  neg_ij = q_i . queue_j / tau     (B,), (B, K)
    loss   = bound(pos, neg)               InfoNCE by default: -log e^{pos} / (e^{pos} + sum_j e^{neg_j})

The loss is computed by :func:`mitool.fused.contrastive_bound` from the embeddings (queries,
keys, the queue as negatives shared by every query): the (B, K) scores are taken in chunks and
never stored whole, and the bound's formula is :mod:`mitool.bounds`' (reached through
``from_negative_logsumexp``); equal to ``bounds.get(name, **options)(pos, neg)`` on the scores above.

after which the keys of the whole global batch (gathered from every rank, rank 0's first)
replace the oldest N entries of the queue of K keys (a first-in, first-out ring buffer).
The queue starts as random unit vectors; once it holds real keys (of a still untrained, nearly
constant encoder) the loss sits near log(K + 1), and it falls slowly afterwards.

Defaults (MoCo v2): InfoNCE, K = 65536 (ImageNet's; 4096, the MoCo CIFAR demo's, on CIFAR-10,
STL-10 and Fashion-MNIST: ``METHODS["moco"].dataset_defaults``), tau 0.2, m 0.999, SGD lr 0.03 x
batch / 256 without warmup (``METHODS["moco"].defaults``). Sizes: the queue must hold at least the
keys of one step (the global batch, twice that with the symmetric loss) and fewer keys than the
training set has images, and with split-BN the local batch must split into the BN groups. Past
the first epoch (a fresh shuffle of the N images each epoch, B keys enqueued per step) the
previous epoch's key of a query's own image is in the queue, as a negative, for a share

    K (K + B) / (2 N^2)  ~  (K / N)^2 / 2             of the queries, for K <= N

(:func:`mitool.vision.common.own_image_share`, checked against a simulation of the order:
bench/queue_share.py): 0.13% for K = 65 536 on ImageNet's 1.28 M images, 0.36% for the CIFAR demo's
4096 on CIFAR-10 at batch 256; but 50% at K = N and all of them from K = 2N, hence the refusal.

Head: Linear(w, w) -> ReLU -> Linear(w, 128), w the backbone's feature width (2048 for
ResNet-50: the paper's 2048-2048-128), no BatchNorm. BatchNorm in the encoders: shuffle-BN (the
key encoder sees the global batch in a random order split across ranks, so BN statistics cannot
leak which key is the positive), on one device split-BN (the backbone's BN normalises S >= 2
groups separately and the batch is shuffled before the key encoder); or global SyncBN across
processes (``bn_mode sync``, solo-learn's choice: no shuffle, the BN leak is left to the global
batch's size). On one process plain BN with unshuffled keys is refused (``bn_mode sync`` there, or
one split-BN group): it is the BN leak shuffle-BN exists to prevent.

Symmetric option: both views serve as queries and both key sets are enqueued; the loss is the
sum of the two directions (each the bound's mean over its B queries, as the MoCo CIFAR demo's
``loss_12 + loss_21``, so the gradient against weight decay is the demo's at the same lr); mi
and npc are the means over the 2B anchors (the one-direction estimate, log(K + 1) - loss / 2 for
InfoNCE).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from mitool import checks
from mitool.bounds import BoundResult
from mitool.vision import distributed
from mitool.vision.choices import EMBEDDING_DIM
from mitool.vision.common import MakeBackbone, MomentumMethod, own_image_share, ring_buffer_write
from mitool.vision.method_specs import METHODS

if TYPE_CHECKING:
    from mitool.vision.config import PretrainConfig

__all__ = ["MoCo", "mlp_head"]


def mlp_head(feature_width: int, embedding_dim: int = EMBEDDING_DIM) -> nn.Module:
    """MoCo v2's head: Linear(w, w) -> ReLU -> Linear(w, embedding_dim), no BatchNorm."""
    return nn.Sequential(
        nn.Linear(feature_width, feature_width), nn.ReLU(), nn.Linear(feature_width, embedding_dim)
    )


class MoCo(MomentumMethod):
    """MoCo v2. ``forward(view_1, view_2)`` -> the bound's result (loss, mi, npc) for the batch.

    make_backbone: returns (backbone, feature_width); loss: a bound of the InfoNCE family (infonce,
    eqco, dcl, dclw) and loss_options its options (dclw's temperature is ``temperature``);
    queue_size: K; shuffle_bn: shuffle the key batch (across ranks under DDP, within the device
    otherwise, to pair with a split-BN backbone); False when the BN is synchronised instead.
    Settings left None take the method's defaults (:data:`mitool.vision.method_specs.METHODS`).
    """

    spec = METHODS["moco"]

    def __init__(
        self,
        make_backbone: MakeBackbone,
        loss: str | None = None,
        loss_options: dict[str, float] | None = None,
        temperature: float | None = None,
        queue_size: int | None = None,
        key_momentum: float | None = None,
        embedding_dim: int = EMBEDDING_DIM,
        symmetric: bool = False,
        shuffle_bn: bool = True,
    ) -> None:
        super().__init__(
            make_backbone, mlp_head, embedding_dim, key_momentum, loss, loss_options, temperature
        )
        queue_size = checks.whole_number("queue_size", self.spec.setting("negatives", queue_size), minimum=1)
        self.symmetric = symmetric
        self.shuffle_bn = shuffle_bn
        self.register_buffer("queue", F.normalize(torch.randn(queue_size, embedding_dim), dim=1))
        self.register_buffer("queue_pointer", torch.zeros((), dtype=torch.long))
        self._host_pointer: int | None = None  # the pointer's value on the host: reading the
        # buffer on a GPU would wait for the device at every step

    @classmethod
    def from_config(cls, config: PretrainConfig, make_backbone: MakeBackbone) -> MoCo:
        return cls(
            make_backbone, config.loss, config.loss_options(), config.temperature, config.negatives,
            config.key_momentum, config.embedding_dim, config.symmetric, config.bn_mode == "shuffle",
        )  # fmt: skip

    @classmethod
    def batch_norm(cls, config: PretrainConfig, world: int) -> str:
        if config.bn_mode == "sync":
            return "sync"
        return "split" if world == 1 and config.bn_splits > 1 else "local"

    @classmethod
    def check_sizes(cls, config: PretrainConfig, world: int) -> None:
        if world == 1 and cls.batch_norm(config, world) != "split":
            parameter, value = ("bn_mode", "sync") if config.bn_mode == "sync" else ("bn_splits", 1)
            raise checks.ParameterError(
                parameter,
                f"{value} gives moco on one process plain BatchNorm with unshuffled keys, whose batch "
                "statistics leak which key is the positive (what shuffle-BN prevents): use bn_mode "
                "shuffle with bn_splits >= 2 (split-BN; 8 is the MoCo CIFAR demo's), or several "
                f"processes; got {value}",
            )
        per_step = config.batch_size * (2 if config.symmetric else 1)
        if config.negatives < per_step:
            raise checks.ParameterError(
                "negatives",
                f"(moco's queue size K) must be at least the {per_step} keys enqueued per step "
                f"(the global batch{', twice for the symmetric loss' if config.symmetric else ''}), "
                f"got {config.negatives}",
            )
        local_batch = config.batch_size // world
        if cls.batch_norm(config, world) == "split" and local_batch % config.bn_splits:
            raise checks.ParameterError(
                "batch_size",
                f"must be a multiple of moco's {config.bn_splits} split-BN groups on one process "
                f"(or use another number of groups, or bn_mode sync), got {config.batch_size}",
            )

    @classmethod
    def check_training_set(cls, config: PretrainConfig, images: int) -> None:
        if config.negatives >= images:
            keys_per_image = 2 if config.symmetric else 1  # the symmetric loss enqueues both views' keys
            share = own_image_share(images, config.negatives // keys_per_image, config.batch_size)
            raise checks.ParameterError(
                "negatives",
                f"(moco's queue size K) must be less than the {images} training images: with this queue "
                f"{share:.0%} of the queries would meet an older key of their own image as a negative (half "
                "of them at K = N, all at 2N; the MoCo CIFAR demo's 4096 on CIFAR-10's 50 000 images: "
                f"0.36%); got {config.negatives}",
            )

    @classmethod
    def usable_rows(cls, rows: int, config: PretrainConfig, world: int) -> int:
        if cls.batch_norm(config, world) == "split":
            rows -= rows % config.bn_splits  # every split-BN group the same size
        return super().usable_rows(rows, config, world)

    @classmethod
    def describe_negatives(cls, config: PretrainConfig) -> str:
        return f"queue K = {config.negatives}"

    def _load_from_state_dict(self, *arguments, **keywords) -> None:
        super()._load_from_state_dict(*arguments, **keywords)
        self._host_pointer = None  # read the loaded buffer at the next enqueue

    @torch.no_grad()
    def keys(self, images: Tensor) -> Tensor:
        """Keys of the local images (B, D), with shuffle-BN when enabled."""
        if not self.shuffle_bn:
            return self.key_embeddings(images)
        if not distributed.is_distributed():
            order = torch.randperm(images.shape[0], device=images.device)
            return self.key_embeddings(images[order])[torch.argsort(order)]
        # across ranks: every rank encodes a random slice of the global batch, then the keys go
        # back to the rank (and position) their image came from
        all_images = distributed.gather_without_grad(images)
        order = torch.randperm(all_images.shape[0], device=images.device)
        dist.broadcast(order, src=0)
        rows, rank = images.shape[0], distributed.rank()
        shuffled_keys = self.key_embeddings(all_images[order[rank * rows : (rank + 1) * rows]])
        all_keys = distributed.gather_without_grad(shuffled_keys)[torch.argsort(order)]
        return all_keys[rank * rows : (rank + 1) * rows]

    @torch.compiler.disable  # eager under torch.compile: the host pointer changes every step
    @torch.no_grad()
    def enqueue(self, keys: Tensor) -> None:
        """Write ``keys`` (n, D), n <= K, over the n oldest entries of the queue (wrapping around
        its end) and advance the pointer by n: a first-in, first-out ring buffer."""
        count, size = keys.shape[0], self.queue.shape[0]
        if count > size:
            raise ValueError(
                f"negatives (the MoCo queue size, {size}) must be >= the keys enqueued per step ({count})"
            )
        pointer = int(self.queue_pointer) if self._host_pointer is None else self._host_pointer
        self.queue, self._host_pointer = ring_buffer_write(self.queue, pointer, keys)
        self.queue_pointer.fill_(self._host_pointer)

    def forward(self, view_1: Tensor, view_2: Tensor) -> BoundResult:
        self.update_key_encoder()
        queries, keys = self.query_embeddings(view_1), self.keys(view_2)
        if self.symmetric:
            queries = torch.cat([queries, self.query_embeddings(view_2)])
            keys = torch.cat([keys, self.keys(view_1)])
        result = self.embedding_bound(queries, keys, self.queue)
        self.enqueue(distributed.gather_without_grad(keys))
        if self.symmetric:  # the sum of the two directions' means, as the demo's loss_12 + loss_21
            result = BoundResult(loss=2.0 * result.loss, mi=result.mi, npc=result.npc)
        return result
