"""Encoders that map an image batch (N, C, H, W) to pooled features (N, feature_width).

* ``resnet18``, ``resnet34``, ``resnet50``: torchvision's ResNets (He et al. 2016), always built
  with ``weights=None`` (nothing is downloaded); the classifier is removed, so the output is the
  global-average-pooled feature of width 512 (resnet18/34) or 2048 (resnet50).
* ``small-cnn``: four 3x3 conv-BN-ReLU blocks of widths 32-64-128-256, each of the first three
  followed by a 2x2 max-pool, then global average pooling (feature width 256): a CPU-sized
  encoder for 28 to 96 pixel images.

Options:

* ``small_stem``: for 28 to 96 pixel images, the ResNet's 7x7 stride-2 first conv and its
  max-pool are replaced by a 3x3 stride-1 conv and no pool (as in the MoCo CIFAR demo and
  SimCLR's CIFAR setting), keeping 4x more resolution in the first stage.
* ``zero_init_residual``: the last BN of each residual block starts with weight 0, so each block
  starts as the identity (Goyal et al. 2017).
* ``in_channels``: 1 for grayscale datasets; the first conv takes one channel directly (no
  repetition of the gray plane to three channels).
* ``norm_layer``: the BatchNorm2d class to use (e.g. :class:`SplitBatchNorm2d`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
import torchvision
from torch import Tensor, nn

__all__ = ["ARCHITECTURES", "SmallCNN", "SplitBatchNorm2d", "build_backbone", "split_batch_norm"]

ARCHITECTURES: tuple[str, ...] = ("small-cnn", "resnet18", "resnet34", "resnet50")
"""The names accepted by :func:`build_backbone`."""

SMALL_CNN_WIDTHS: tuple[int, ...] = (32, 64, 128, 256)


class SmallCNN(nn.Module):
    """Four 3x3 conv-BN-ReLU blocks (widths 32-64-128-256), max-pool 2 after the first three,
    global average pool. Input (N, in_channels, H, W) with H, W >= 8; output (N, 256)."""

    def __init__(self, in_channels: int = 3, norm_layer: Callable[[int], nn.Module] = nn.BatchNorm2d) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        previous = in_channels
        for index, width in enumerate(SMALL_CNN_WIDTHS):
            layers += [nn.Conv2d(previous, width, 3, padding=1, bias=False), norm_layer(width), nn.ReLU()]
            if index < len(SMALL_CNN_WIDTHS) - 1:
                layers.append(nn.MaxPool2d(2))
            previous = width
        self.features = nn.Sequential(*layers)
        self.feature_width = previous

    def forward(self, images: Tensor) -> Tensor:
        return self.features(images).mean(dim=(2, 3))


class SplitBatchNorm2d(nn.BatchNorm2d):
    """BatchNorm over ``num_splits`` separate slices of the batch (Wu et al.'s MoCo CIFAR demo).

    In training, a batch of N = S * n images is normalised as S independent groups of n
    consecutive images (each with its own mean and variance), which on one device reproduces the
    per-GPU statistics of S GPUs: the key encoder then cannot use the batch statistics to cheat
    once the keys are shuffled across groups. Running statistics are the mean over the groups of
    what a BatchNorm2d of each group would keep; evaluation is a plain BatchNorm2d. N must be
    divisible by S.

    Computation: the batch (N, C, H, W) is rearranged to (n, S * C, H, W), group s becoming
    channels s*C .. s*C + C - 1, and one ``F.batch_norm`` in training mode normalises all groups
    at once (one copy in, one out). For a channels_last input the rearrangement is done in its
    NHWC memory order and the output is channels_last too, so the next convolution does not
    convert the layout back. A moco step of small-cnn at 32 pixels, batch 32, 8 splits, one CPU
    thread: 0.055 s against 0.10 s when the output lost the channels_last layout (README, Vision pretraining).
    """

    def __init__(self, num_features: int, num_splits: int, **options) -> None:
        super().__init__(num_features, **options)
        self.num_splits = num_splits

    def _grouped(self, inputs: Tensor, channels_last: bool) -> Tensor:
        """(S * n, C, H, W) -> (n, S * C, H, W): image i of group s -> image i, channels of s."""
        batch, channels, height, width = inputs.shape
        splits, per_group = self.num_splits, batch // self.num_splits
        if channels_last:  # memory order (N, H, W, C) -> (n, H, W, S, C)
            return (
                inputs.permute(0, 2, 3, 1)
                .reshape(splits, per_group, height, width, channels)
                .permute(1, 2, 3, 0, 4)
                .reshape(per_group, height, width, splits * channels)
                .permute(0, 3, 1, 2)
            )
        return (
            inputs.reshape(splits, per_group, channels, height, width)
            .transpose(0, 1)
            .reshape(per_group, splits * channels, height, width)
        )

    def _ungrouped(self, outputs: Tensor, channels: int, channels_last: bool) -> Tensor:
        """The inverse of :meth:`_grouped`."""
        per_group, _, height, width = outputs.shape
        splits = self.num_splits
        if channels_last:
            return (
                outputs.permute(0, 2, 3, 1)
                .reshape(per_group, height, width, splits, channels)
                .permute(3, 0, 1, 2, 4)
                .reshape(splits * per_group, height, width, channels)
                .permute(0, 3, 1, 2)
            )
        return (
            outputs.reshape(per_group, splits, channels, height, width)
            .transpose(0, 1)
            .reshape(splits * per_group, channels, height, width)
        )

    def forward(self, inputs: Tensor) -> Tensor:
        if not self.training or self.num_splits == 1:
            return super().forward(inputs)
        batch, channels = inputs.shape[:2]
        if batch % self.num_splits:
            raise ValueError(
                f"bn_splits must divide the batch on this device: {batch} images, {self.num_splits} splits"
            )
        channels_last = inputs.dim() == 4 and inputs.is_contiguous(memory_format=torch.channels_last)
        running_mean = self.running_mean.repeat(self.num_splits)
        running_var = self.running_var.repeat(self.num_splits)
        outputs = F.batch_norm(
            self._grouped(inputs, channels_last),
            running_mean,
            running_var,
            self.weight.repeat(self.num_splits),
            self.bias.repeat(self.num_splits),
            True,
            self.momentum,
            self.eps,
        )
        with torch.no_grad():  # the mean over the groups, written straight into the buffers
            torch.mean(running_mean.view(self.num_splits, channels), dim=0, out=self.running_mean)
            torch.mean(running_var.view(self.num_splits, channels), dim=0, out=self.running_var)
            self.num_batches_tracked += 1
        return self._ungrouped(outputs, channels, channels_last)


def split_batch_norm(num_splits: int) -> Callable[[int], nn.Module]:
    """A ``norm_layer`` factory for :func:`build_backbone` making :class:`SplitBatchNorm2d`."""

    def make(num_features: int) -> nn.Module:
        return SplitBatchNorm2d(num_features, num_splits)

    return make


def build_backbone(
    arch: str,
    in_channels: int = 3,
    small_stem: bool = False,
    zero_init_residual: bool = False,
    norm_layer: Callable[[int], nn.Module] | None = None,
) -> tuple[nn.Module, int]:
    """The encoder called ``arch`` (one of :data:`ARCHITECTURES`) and its feature width.

    Returns ``(module, feature_width)``; ``module(images)`` maps (N, in_channels, H, W) to
    (N, feature_width). ``small_stem`` and ``zero_init_residual`` apply to the ResNets only (the
    small CNN has no stride-2 stem and no residual blocks). Never downloads weights.
    """
    if arch not in ARCHITECTURES:
        raise ValueError(f"arch must be one of {', '.join(ARCHITECTURES)}, got {arch!r}")
    if in_channels not in (1, 3):
        raise ValueError(f"in_channels must be 1 (grayscale) or 3 (RGB), got {in_channels}")
    norm_layer = norm_layer or nn.BatchNorm2d
    if arch == "small-cnn":
        model = SmallCNN(in_channels, norm_layer)
        return model, model.feature_width
    constructor = getattr(torchvision.models, arch)
    model = constructor(weights=None, zero_init_residual=zero_init_residual, norm_layer=norm_layer)
    if small_stem:
        model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
        model.maxpool = nn.Identity()
    elif in_channels != 3:
        model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
    if small_stem or in_channels != 3:
        nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    feature_width = model.fc.in_features
    model.fc = nn.Identity()
    return model, feature_width
