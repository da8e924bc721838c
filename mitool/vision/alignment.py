"""Alignment and uniformity of the normalised embeddings, on a fixed held-out batch.

Wang & Isola, "Understanding Contrastive Representation Learning through Alignment and Uniformity
on the Hypersphere" (ICML 2020, arXiv 2005.10242). For an encoder f onto the unit sphere (here a
method's normalised embedding, :meth:`~mitool.vision.common.ContrastiveMethod.embed`:
normalize(g(f(x))), g the head; for MoCo, SiMo and SimCLR the space their loss scores, for NNCLR
its projection, the space of its support set, where the loss scores the neighbours found there
against the predictions normalize(h(g(f(x))))), their two losses with alpha = 2 and t = 2:

    L_align = E_{(x, x+) positive pairs} ||f(x) - f(x+)||^2
            = mean_i ||z_i^(1) - z_i^(2)||^2                        the two views of image i
    L_unif  = log E_{x, y i.i.d.} exp(-2 ||f(x) - f(y)||^2)
            = log( mean_{i < j} exp(-2 ||z_i - z_j||^2) )            all pairs of distinct images

Lower is better for both: aligned views (0 when the two views embed to the same point; at most 4)
and embeddings spread over the sphere (log E exp(-2 d^2) is 0 when every embedding is the same
point and about -4 for d = 128 when they are uniform; it falls with the spread). The uniformity
reported is the mean of the two views' (the paper's training loss takes the same mean,
``(uniform_loss(x) + uniform_loss(y)) / 2``). Both are computed in float64
(:func:`alignment_uniformity`).

The held-out batch: :data:`HELD_OUT_IMAGES` images of the test split, evenly spaced over it (so
every class is there), decoded once per run; their two views are made by the run's two-view
augmentation (:class:`~mitool.vision.gpu_augment.GPUTwoViewAugment`, the MoCo v2 settings of
:mod:`mitool.vision.augment`) from a generator seeded with :data:`HELD_OUT_SEED` at every
evaluation, so every evaluation of every run on that data sees the same pairs, and no random state
of the run is touched (a resumed run stays exact). The encoder runs in eval mode under the run's
autocast; the embeddings are cast to float32 before they are normalised.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from mitool.vision.datasets import DatasetInfo, dataset_info, load_dataset
from mitool.vision.evaluate import spread_subset
from mitool.vision.gpu_augment import GPUTwoViewAugment, loader_options

__all__ = [
    "HELD_OUT_IMAGES",
    "HELD_OUT_SEED",
    "HeldOutBatch",
    "alignment",
    "alignment_uniformity",
    "uniformity",
]

HELD_OUT_IMAGES = 512
"""Images of the fixed held-out batch (130 816 pairs for the uniformity)."""
HELD_OUT_SEED = 0
"""Seed of the held-out batch's two views."""
_CHUNK = 128
"""Images augmented and embedded at a time."""


def alignment(view_1: Tensor, view_2: Tensor) -> float:
    """L_align = mean_i ||view_1[i] - view_2[i]||^2 of unit vectors (n, D), in float64."""
    return float((view_1.double() - view_2.double()).pow(2).sum(dim=1).mean())


def uniformity(embeddings: Tensor) -> float:
    """L_unif = log mean_{i < j} exp(-2 ||z_i - z_j||^2) over the n (n - 1) / 2 pairs of the rows
    of ``embeddings`` (n >= 2, D), in float64 (a log-sum-exp: no underflow)."""
    squared = torch.pdist(embeddings.double(), p=2).pow(2)
    return float(torch.logsumexp(-2.0 * squared, dim=0) - math.log(squared.numel()))


def alignment_uniformity(view_1: Tensor, view_2: Tensor) -> dict[str, float]:
    """{"alignment": L_align of the pairs (view_1[i], view_2[i]), "uniformity": the mean of the two
    views' L_unif} for normalised embeddings (n, D) of n images."""
    return {
        "alignment": alignment(view_1, view_2),
        "uniformity": (uniformity(view_1) + uniformity(view_2)) / 2,
    }


@dataclass
class HeldOutBatch:
    """The fixed held-out images (uint8 (C, H, W) tensors on the CPU) of a dataset and how their
    two views are made; :meth:`measure` gives alignment and uniformity of a method on them."""

    images: list[Tensor]
    info: DatasetInfo
    image_size: int

    @classmethod
    def of_dataset(
        cls,
        dataset: str,
        data_dir: str | None,
        image_size: int,
        synthetic_options: dict[str, int] | None = None,
        count: int = HELD_OUT_IMAGES,
    ) -> HeldOutBatch:
        """``count`` images of the test split, evenly spaced, decoded (large photos shrunk to a
        shorter side of 8/7 of ``image_size``, as 256 for 224); unreadable ones left out."""
        options = synthetic_options or {}
        info = dataset_info(dataset, data_dir, **options)
        decode = loader_options("decode", shorter_side=max(8, round(image_size * 8 / 7)))
        data = spread_subset(load_dataset(dataset, "test", data_dir, **decode, **options), count)
        items = (data[index][0] for index in range(len(data)))  # type: ignore[arg-type]
        images = [item for item in items if isinstance(item, Tensor)]
        if len(images) < 2:
            raise ValueError(f"the held-out batch of {dataset} needs at least 2 readable test images")
        return cls(images, info, image_size)

    @torch.no_grad()
    def measure(self, model: nn.Module, device: torch.device, precision: str = "fp32") -> dict[str, float]:
        """Alignment and uniformity of ``model.embed`` (eval mode, autocast ``precision``) on the two
        views of the held-out images; the model's mode is put back."""
        augment = GPUTwoViewAugment.for_dataset(self.info, self.image_size, seed=HELD_OUT_SEED)
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        was_training = model.training
        model.eval()
        parts_1, parts_2 = [], []
        try:
            for start in range(0, len(self.images), _CHUNK):
                view_1, view_2 = augment([image.to(device) for image in self.images[start : start + _CHUNK]])
                with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
                    both = model.embed(
                        torch.cat([view_1, view_2]).contiguous(memory_format=torch.channels_last)
                    )
                embedded_1, embedded_2 = both.float().chunk(2)
                parts_1.append(embedded_1)
                parts_2.append(embedded_2)
        finally:
            model.train(was_training)
        return alignment_uniformity(torch.cat(parts_1), torch.cat(parts_2))
