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

from mitool.vision.choices import ARCHITECTURES

__all__ = ["ARCHITECTURES", "SmallCNN", "SplitBatchNorm2d", "build_backbone", "split_batch_norm"]

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


class _SplitBatchNormFunction(torch.autograd.Function):
    """Training-mode BatchNorm of S consecutive groups of the batch, each normalised by aten's own
    batch-norm kernel in place in its slice of one output tensor (no copy of the activations).

    Group s is images s*n .. s*n + n - 1 of the batch (N = S * n). In either memory layout (NCHW or
    channels_last) such a slice is itself a contiguous tensor of that layout, so the kernels read
    the input and write the output and the input gradient where they lie: the same memory traffic
    as one plain BatchNorm, in S kernel launches instead of one. ``running_means`` and
    ``running_vars`` are (S, C): row s is updated in place as group s's BatchNorm would update it.
    """

    @staticmethod
    def forward(ctx, inputs, weight, bias, running_means, running_vars, num_splits, momentum, eps):
        layout = _memory_format(inputs)
        inputs = inputs.contiguous(memory_format=layout)
        outputs = torch.empty_like(inputs, memory_format=layout)
        statistics_type = torch.float32 if inputs.dtype in (torch.float16, torch.bfloat16) else inputs.dtype
        means, inverse_stds = (
            inputs.new_empty((num_splits, inputs.shape[1]), dtype=statistics_type) for _ in range(2)
        )
        for split, rows in enumerate(_groups(inputs.shape[0], num_splits)):
            torch.ops.aten.native_batch_norm.out(
                inputs[rows], weight, bias, running_means[split], running_vars[split], True, momentum, eps,
                out=outputs[rows], save_mean=means[split], save_invstd=inverse_stds[split],
            )  # fmt: skip
        ctx.save_for_backward(inputs, weight, means, inverse_stds)
        ctx.layout, ctx.eps, ctx.num_splits = layout, eps, num_splits
        return outputs

    @staticmethod
    def backward(ctx, grad_outputs):
        inputs, weight, means, inverse_stds = ctx.saved_tensors
        grad_outputs = grad_outputs.contiguous(memory_format=ctx.layout)
        grad_inputs = torch.empty_like(inputs, memory_format=ctx.layout)
        shape = (ctx.num_splits, inputs.shape[1])
        statistics_type = means.dtype if weight is None else weight.dtype
        grad_weights, grad_biases = (inputs.new_empty(shape, dtype=statistics_type) for _ in range(2))
        for split, rows in enumerate(_groups(inputs.shape[0], ctx.num_splits)):
            torch.ops.aten.native_batch_norm_backward.out(
                grad_outputs[rows], inputs[rows], weight, None, None, means[split], inverse_stds[split],
                True, ctx.eps, [True, True, True],
                out0=grad_inputs[rows], out1=grad_weights[split], out2=grad_biases[split],
            )  # fmt: skip
        if weight is None:
            return grad_inputs, None, None, None, None, None, None, None
        return grad_inputs, grad_weights.sum(0), grad_biases.sum(0), None, None, None, None, None


def _groups(batch: int, num_splits: int) -> list[slice]:
    size = batch // num_splits
    return [slice(split * size, (split + 1) * size) for split in range(num_splits)]


def _memory_format(inputs: Tensor) -> torch.memory_format:
    """channels_last for a 4-d tensor stored that way (and not also plainly contiguous), else NCHW."""
    if (
        inputs.dim() == 4
        and not inputs.is_contiguous()
        and inputs.is_contiguous(memory_format=torch.channels_last)
    ):
        return torch.channels_last
    return torch.contiguous_format


def _compiling() -> bool:
    compiler = getattr(torch, "compiler", None)
    return bool(compiler is not None and getattr(compiler, "is_compiling", lambda: False)())


class SplitBatchNorm2d(nn.BatchNorm2d):
    """BatchNorm over ``num_splits`` separate slices of the batch (Wu et al.'s MoCo CIFAR demo).

    In training, a batch of N = S * n images is normalised as S independent groups of n
    consecutive images (each with its own mean and variance), which on one device reproduces the
    per-GPU statistics of S GPUs: the key encoder then cannot use the batch statistics to cheat
    once the keys are shuffled across groups. For group s, channel c:

        y = (x - mean_sc) / sqrt(var_sc + eps) * weight_c + bias_c     (var biased, over n*H*W)

    exactly S separate ``nn.BatchNorm2d`` sharing weight and bias (tested: outputs, gradients,
    running statistics). Running statistics are the mean over the groups of what a BatchNorm2d of
    each group would keep (each group's update starts from the shared value); evaluation is a plain
    BatchNorm2d. N must be divisible by S.

    Computation: each group is a contiguous slice of the batch in either memory layout, so each is
    normalised by torch's own batch-norm kernel straight into its slice of the output, and likewise
    in the backward pass (:class:`_SplitBatchNormFunction`): no copy of the activations, S kernel
    launches per layer. (An earlier version rearranged the batch to (n, S*C, H, W) for one kernel
    and back: on an H200 that made a moco step 142% slower than the bare backbone, against 6.7% with
    plain BatchNorm.) Under torch.compile the same groups are normalised by ``F.batch_norm`` on the
    slices and concatenated, which the compiler fuses.
    """

    def __init__(self, num_features: int, num_splits: int, **options) -> None:
        super().__init__(num_features, **options)
        self.num_splits = num_splits

    def _average_factor(self) -> float:
        """The running statistics' update weight, as nn.BatchNorm2d computes it (momentum None:
        the cumulative average over the batches seen)."""
        if self.momentum is not None:
            return self.momentum
        return 1.0 / float(self.num_batches_tracked)

    def forward(self, inputs: Tensor) -> Tensor:
        if not self.training or self.num_splits == 1:
            return super().forward(inputs)
        batch, channels = inputs.shape[:2]
        if batch % self.num_splits:
            raise ValueError(
                f"bn_splits must divide the batch on this device: {batch} images, {self.num_splits} splits"
            )
        tracking = self.track_running_stats and self.running_mean is not None
        if tracking:
            self.num_batches_tracked.add_(1)
            running_means = self.running_mean.repeat(self.num_splits).view(self.num_splits, channels)
            running_vars = self.running_var.repeat(self.num_splits).view(self.num_splits, channels)
        else:
            running_means = running_vars = [None] * self.num_splits
        factor = self._average_factor() if tracking else 0.0
        if _compiling():
            groups = inputs.chunk(self.num_splits)
            outputs = torch.cat(
                [
                    F.batch_norm(group, mean, var, self.weight, self.bias, True, factor, self.eps)
                    for group, mean, var in zip(groups, running_means, running_vars, strict=True)
                ]
            )
        else:
            outputs = _SplitBatchNormFunction.apply(
                inputs, self.weight, self.bias, running_means, running_vars, self.num_splits, factor, self.eps
            )
        if tracking:
            with torch.no_grad():  # the mean over the groups, written straight into the buffers
                torch.mean(running_means, dim=0, out=self.running_mean)
                torch.mean(running_vars, dim=0, out=self.running_var)
        return outputs


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
