"""The MoCo v2 two-view augmentation on the CPU (torchvision transforms on PIL images) and the
evaluation transform.

MoCo v2 (Chen, Fan, Girshick, He 2020, "Improved Baselines with Momentum Contrastive Learning"),
applied independently to each of the two views of an image:

1. RandomResizedCrop(image_size, scale 0.2-1, aspect ratio 3/4-4/3);
2. ColorJitter(brightness 0.4, contrast 0.4, saturation 0.4, hue 0.1) with probability 0.8, the
   four adjustments in a random order;
3. RandomGrayscale with probability 0.2;
4. GaussianBlur with sigma uniform in [0.1, 2] with probability 0.5; the kernel is sized to the
   image, about 10% of its side and odd (23 at 224 pixels, 3 at 28-32 pixels);
5. horizontal flip with probability 0.5;
6. ToTensor (pixels to [0, 1]) and Normalize with the dataset's mean and std.

Grayscale datasets (1 channel, e.g. Fashion-MNIST): saturation and hue have no meaning for one
channel and grayscale conversion is the identity, so the jitter keeps only brightness and
contrast and the grayscale step is left out; the views keep 1 channel (a model wanting 3 repeats
it). The same :class:`AugmentSettings` drive the batched device version in
:mod:`mitool.vision.gpu_augment`.

Every method (MoCo, SiMo, SimCLR/DCL) and every image size uses this augmentation: our choice,
so that the methods differ only in their loss and encoders. SimCLR's own is stronger in colour
(jitter strength 1.0: 0.8/0.8/0.8/0.2) and leaves the blur out on CIFAR-10; here the blur stays at
32 px and below (a 3-pixel kernel, sigma 0.1-2: a strong blur of a small image), as in the
MoCo-style CIFAR recipes that keep MoCo v2's augmentation whole.

The linear probe's training images (:func:`linear_train_transform`) are MoCo's main_lincls ones:
random resized crop, flip, to tensor, normalise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torchvision.transforms import v2

from mitool.vision.datasets import DatasetInfo

__all__ = [
    "AugmentSettings",
    "TwoViews",
    "blur_kernel_size",
    "eval_transform",
    "linear_train_transform",
    "moco_v2_settings",
    "two_view_transform",
]


def blur_kernel_size(image_size: int) -> int:
    """The Gaussian blur kernel for ``image_size``: about 10% of the side, odd, at least 3
    (23 at 224, 9 at 96, 3 at 32 and 28)."""
    return max(3, int(0.1 * image_size) // 2 * 2 + 1)


@dataclass(frozen=True)
class AugmentSettings:
    """The parameters of the two-view augmentation (MoCo v2's by default).

    image_size: side of the square output views.
    crop_scale: range of the crop's area as a fraction of the image's.
    crop_ratio: range of the crop's width / height (sampled log-uniformly).
    brightness, contrast, saturation: jitter factors uniform in [1 - s, 1 + s] (0: off).
    hue: hue shift uniform in [-hue, hue] (fraction of the colour circle; 0: off).
    jitter_probability, grayscale_probability, blur_probability, flip_probability: how often each
        step is applied.
    blur_sigma: range of the blur's standard deviation in pixels; blur_kernel: its odd kernel size.
    channels: 1 or 3; mean, std: for Normalize.
    """

    image_size: int
    channels: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    crop_scale: tuple[float, float] = (0.2, 1.0)
    crop_ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0)
    brightness: float = 0.4
    contrast: float = 0.4
    saturation: float = 0.4
    hue: float = 0.1
    jitter_probability: float = 0.8
    grayscale_probability: float = 0.2
    blur_sigma: tuple[float, float] = (0.1, 2.0)
    blur_probability: float = 0.5
    blur_kernel: int = 3
    flip_probability: float = 0.5


def moco_v2_settings(info: DatasetInfo, image_size: int) -> AugmentSettings:
    """MoCo v2's augmentation for a dataset described by ``info`` at ``image_size`` pixels; for
    1-channel datasets saturation, hue and grayscale conversion are switched off (no-ops there)."""
    if image_size < 8:
        raise ValueError(f"image_size must be >= 8, got {image_size}")
    if info.channels not in (1, 3):
        raise ValueError(f"channels must be 1 or 3, got {info.channels}")
    colour = info.channels == 3
    return AugmentSettings(
        image_size=image_size,
        channels=info.channels,
        mean=tuple(info.mean),
        std=tuple(info.std),
        saturation=0.4 if colour else 0.0,
        hue=0.1 if colour else 0.0,
        grayscale_probability=0.2 if colour else 0.0,
        blur_kernel=blur_kernel_size(image_size),
    )


class TwoViews:
    """Apply ``transform`` twice, independently: ``image -> (view_1, view_2)``."""

    def __init__(self, transform: Callable) -> None:
        self.transform = transform

    def __call__(self, image):
        return self.transform(image), self.transform(image)

    def __repr__(self) -> str:
        return f"TwoViews({self.transform!r})"


def one_view_transform(settings: AugmentSettings) -> v2.Compose:
    """One view of the augmentation described by ``settings``, as torchvision transforms
    (PIL image in, normalised float tensor (C, size, size) out)."""
    steps: list = [
        v2.RandomResizedCrop(
            settings.image_size, scale=settings.crop_scale, ratio=settings.crop_ratio, antialias=True
        )
    ]
    jitter = v2.ColorJitter(settings.brightness, settings.contrast, settings.saturation, settings.hue)
    steps.append(v2.RandomApply([jitter], p=settings.jitter_probability))
    if settings.grayscale_probability > 0:
        steps.append(v2.RandomGrayscale(p=settings.grayscale_probability))
    blur = v2.GaussianBlur(settings.blur_kernel, sigma=settings.blur_sigma)
    steps.append(v2.RandomApply([blur], p=settings.blur_probability))
    steps.append(v2.RandomHorizontalFlip(p=settings.flip_probability))
    steps += [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(settings.mean, settings.std)]
    return v2.Compose(steps)


def two_view_transform(info: DatasetInfo, image_size: int) -> TwoViews:
    """MoCo v2's two-view augmentation for the dataset ``info`` at ``image_size`` pixels:
    ``callable(PIL image) -> (view_1, view_2)``, each a float tensor (info.channels, size, size),
    normalised with the dataset's mean and std. See the module docstring for the steps."""
    return TwoViews(one_view_transform(moco_v2_settings(info, image_size)))


def eval_transform(info: DatasetInfo, image_size: int) -> v2.Compose:
    """The evaluation transform (kNN monitor, linear protocol test split).

    ImageNet-sized images (image_size >= 128): resize the shorter side to image_size * 256 / 224
    and take the centre image_size crop (MoCo's linear protocol: 256 then 224). Small images:
    resized to image_size only when that differs from the stored size. Then ToTensor and
    Normalize with the dataset's mean and std; output (info.channels, size, size).
    """
    if image_size < 8:
        raise ValueError(f"image_size must be >= 8, got {image_size}")
    steps: list = []
    if image_size >= 128:
        steps += [v2.Resize(round(image_size * 256 / 224), antialias=True), v2.CenterCrop(image_size)]
    elif image_size != info.image_size:
        steps += [v2.Resize(image_size, antialias=True), v2.CenterCrop(image_size)]
    steps += [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(info.mean, info.std)]
    return v2.Compose(steps)


def linear_train_transform(info: DatasetInfo, image_size: int) -> v2.Compose:
    """The linear probe's training transform, MoCo's main_lincls: RandomResizedCrop(image_size)
    (torchvision's default scale 0.08-1 and ratio 3/4-4/3), horizontal flip with probability 0.5,
    ToTensor, Normalize with the dataset's mean and std; output (info.channels, size, size). No
    resize or centre crop after the crop (those belong to the evaluation transform)."""
    if image_size < 8:
        raise ValueError(f"image_size must be >= 8, got {image_size}")
    return v2.Compose(
        [
            v2.RandomResizedCrop(image_size, antialias=True),
            v2.RandomHorizontalFlip(),
            v2.ToImage(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(info.mean, info.std),
        ]
    )
