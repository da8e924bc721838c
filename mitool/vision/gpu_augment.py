"""The MoCo v2 two-view augmentation as batched tensor operations on the device.

With two views per image, decoding and augmenting on the CPU is usually what limits contrastive
pretraining. Here the DataLoader workers only decode (:class:`DecodeOnly`), or only read the
file's bytes (``load_dataset(..., encoded=True)``) for one batched ``torchvision.io.decode_jpeg``
on the device (:func:`decode_on_device`); :class:`GPUTwoViewAugment` then makes both views of
the whole batch at once, every sample with its own random parameters:

1. random resized crop: per sample and view a box (area fraction uniform in ``crop_scale``, aspect
   ratio log-uniform in ``crop_ratio``, position uniform; ten tries then a centre crop, exactly as
   torchvision's ``RandomResizedCrop.get_params``), all 2N boxes cut and resized by one
   ``torchvision.ops.roi_align`` call (bilinear samples averaged over each output pixel's
   footprint, which acts as the antialiasing filter when shrinking);
2. horizontal flip with probability ``flip_probability``;
3. with probability ``jitter_probability``, brightness, contrast, saturation and hue in a random
   order per sample (as torchvision's ``ColorJitter``), factors b, c, s uniform in [1 - x, 1 + x]
   and hue shift h uniform in [-hue, hue]:
   brightness x -> clamp(b x), contrast x -> clamp(c x + (1 - c) mean(gray(x))),
   saturation x -> clamp(s x + (1 - s) gray(x)), hue: rotate the HSV hue by h turns;
   gray(x) = 0.2989 R + 0.587 G + 0.114 B (ITU-R 601, torchvision's weights);
4. grayscale with probability ``grayscale_probability`` (gray(x) in every channel);
5. Gaussian blur with probability ``blur_probability``, sigma uniform in ``blur_sigma``, kernel
   ``blur_kernel`` wide, reflect padding, as two 1-D convolutions grouped per sample;
6. normalise with the dataset's mean and std.

The flip is done right after the crop: it commutes with the colour steps and with the symmetric
blur, so the result has the same distribution as torchvision's order (flip last). Parameters are
drawn on the CPU from a seeded ``torch.Generator``, so a seed gives the same views on any device;
they reach a CUDA device through pinned memory with non-blocking copies (:func:`to_device`: a copy
from ordinary memory would make the host wait for the device's queued work, a dozen times a
batch).
Input: a uint8 batch (N, C, H, W) on any device, or a list of uint8 (C, H_i, W_i) images of
different sizes (padded by edge replication, so crops near the border see the edge pixel as
torchvision does). Output: two float32 tensors (N, C, size, size).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from PIL import Image
from torch import Tensor
from torchvision.io import ImageReadMode, decode_jpeg
from torchvision.ops import roi_align

from mitool.vision.augment import AugmentSettings, moco_v2_settings
from mitool.vision.choices import DEVICE_AUGMENT_MODES
from mitool.vision.datasets import DatasetInfo, EncodedImage

__all__ = [
    "DEVICE_AUGMENT_MODES",
    "AugmentParameters",
    "DecodeOnly",
    "GPUTwoViewAugment",
    "adjust_brightness",
    "adjust_contrast",
    "adjust_hue",
    "adjust_saturation",
    "decode_on_device",
    "gaussian_blur",
    "grayscale",
    "loader_options",
    "pad_to_batch",
    "resized_crop",
    "sample_crop_boxes",
    "sample_parameters",
    "to_device",
]

GRAY_WEIGHTS = (0.2989, 0.587, 0.114)
#: How the loader workers hand images to the device: "decode" (workers decode to uint8 tensors)
#: or "jpeg" (workers read the bytes; JPEGs are decoded on the device, other formats in the worker).
BRIGHTNESS, CONTRAST, SATURATION, HUE = range(4)


# ----------------------------------------------------------------------------------------------
# loader side: decode only


class DecodeOnly:
    """Worker-side transform for the device path: PIL image -> uint8 tensor (C, H, W).

    shorter_side: when set, images whose shorter side is longer are first shrunk (aspect ratio
        kept) so that it equals ``shorter_side``; this bounds the memory and transfer of large
        photos. None keeps the decoded size.
    """

    def __init__(self, shorter_side: int | None = None) -> None:
        if shorter_side is not None and shorter_side < 8:
            raise ValueError(f"shorter_side must be >= 8 or None, got {shorter_side}")
        self.shorter_side = shorter_side

    def __call__(self, image: Image.Image) -> Tensor:
        if self.shorter_side is not None and min(image.size) > self.shorter_side:
            scale = self.shorter_side / min(image.size)
            size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
            image = image.resize(size, Image.BILINEAR, reducing_gap=3.0)
        array = torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8)
        channels = len(image.getbands())
        return array.view(image.height, image.width, channels).permute(2, 0, 1).contiguous()

    def __repr__(self) -> str:
        return f"DecodeOnly(shorter_side={self.shorter_side})"


def loader_options(mode: str, shorter_side: int | None = None) -> dict[str, Any]:
    """The keyword arguments of :func:`mitool.vision.datasets.load_dataset` for the device path ``mode``
    (one of :data:`DEVICE_AUGMENT_MODES`): ``{"transform": DecodeOnly(shorter_side)}`` for
    "decode", ``{"encoded": True}`` for "jpeg" (image folders only)."""
    if mode == "decode":
        return {"transform": DecodeOnly(shorter_side)}
    if mode == "jpeg":
        if shorter_side is not None:
            raise ValueError(
                "shorter_side applies to gpu-augment mode decode only (jpeg keeps the full image)"
            )
        return {"encoded": True}
    raise ValueError(f"gpu-augment mode must be one of {', '.join(DEVICE_AUGMENT_MODES)}; got {mode!r}")


def _decode_jpeg(data: Tensor | list[Tensor], device: torch.device) -> Tensor | list[Tensor]:
    """torchvision's JPEG decoder to RGB on ``device``; its notice that torchvision's decoders are
    deprecated in favour of torchcodec (not a dependency of mitool) is silenced."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="The image decoding and encoding", category=DeprecationWarning
        )
        return decode_jpeg(data, mode=ImageReadMode.RGB, device=device)


def decode_on_device(
    inputs: Tensor | Sequence[Tensor | EncodedImage], device: torch.device | str
) -> tuple[Tensor | list[Tensor], Tensor, list[str]]:
    """Move a loader batch to ``device``, decoding JPEG bytes there in one batched call.

    inputs: a uint8 batch (N, C, H, W); or a list of uint8 images (C, H_i, W_i); or a list of
        :class:`mitool.vision.datasets.EncodedImage` (from ``load_dataset(..., encoded=True)``) whose data
        are JPEG bytes (1-D) or already decoded images (3-D).
    Returns ``(images, kept, failed)``: the images on the device (a batch or a list), the int64
    indices of the inputs they come from (to select the labels), and the names of the JPEGs the
    decoder rejected (to count with :class:`mitool.vision.loader.SkippedImages`).
    """
    device = torch.device(device)
    if isinstance(inputs, Tensor):
        return inputs.to(device, non_blocking=True), torch.arange(inputs.shape[0]), []
    names = [item.name if isinstance(item, EncodedImage) else str(index) for index, item in enumerate(inputs)]
    tensors = [item.data if isinstance(item, EncodedImage) else item for item in inputs]
    images: list[Tensor | None] = [None] * len(tensors)
    jpeg_positions = [index for index, tensor in enumerate(tensors) if tensor.dim() == 1]
    for index, tensor in enumerate(tensors):
        if tensor.dim() != 1:
            images[index] = tensor.to(device, non_blocking=True)
    failed: list[str] = []
    if jpeg_positions:
        encoded = [tensors[index] for index in jpeg_positions]
        try:
            decoded = _decode_jpeg(encoded, device)
        except RuntimeError:  # one bad file fails the batch: decode one by one to find it
            decoded = []
            for index, data in zip(jpeg_positions, encoded, strict=True):
                try:
                    decoded.append(_decode_jpeg(data, device))
                except RuntimeError:
                    decoded.append(None)
                    failed.append(names[index])
        for index, image in zip(jpeg_positions, decoded, strict=True):
            images[index] = image
    kept = torch.tensor([index for index, image in enumerate(images) if image is not None], dtype=torch.int64)
    return [image for image in images if image is not None], kept, failed


def pad_to_batch(images: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
    """Stack images (C, H_i, W_i) of different sizes into (N, C, max H, max W), each padded on the
    right and bottom by repeating its last column and row; returns the batch and the sizes
    (N, 2) as (H_i, W_i)."""
    if not images:
        raise ValueError("images must hold at least one image")
    channels = images[0].shape[0]
    height = max(image.shape[1] for image in images)
    width = max(image.shape[2] for image in images)
    batch = images[0].new_empty((len(images), channels, height, width))
    for index, image in enumerate(images):
        if image.shape[0] != channels:
            raise ValueError(f"images must all have {channels} channels, image {index} has {image.shape[0]}")
        h, w = image.shape[1], image.shape[2]
        batch[index, :, :h, :w] = image
        batch[index, :, :h, w:] = image[:, :, w - 1 : w]
        batch[index, :, h:, :] = batch[index, :, h - 1 : h, :]
    sizes = torch.tensor([[image.shape[1], image.shape[2]] for image in images], dtype=torch.int64)
    return batch, sizes


# ----------------------------------------------------------------------------------------------
# parameters


def to_device(tensor: Tensor, device: torch.device | str) -> Tensor:
    """``tensor`` on ``device`` without making the host wait: from the CPU to a CUDA device through
    pinned memory with a non-blocking copy (a copy from ordinary memory waits for the work queued
    on the device, then copies); otherwise a plain ``to``."""
    device = torch.device(device)
    if device.type == "cuda" and tensor.device.type == "cpu":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def sample_crop_boxes(
    sizes: Tensor,
    scale: tuple[float, float],
    ratio: tuple[float, float],
    generator: torch.Generator | None = None,
    tries: int = 10,
) -> Tensor:
    """Random resized crop boxes, torchvision's ``RandomResizedCrop.get_params`` for a batch.

    sizes: (N, 2) int, the (height, width) of each image. For each image, up to ``tries`` draws
    of area = uniform(scale) * H * W and aspect r = exp(uniform(log ratio)) give a crop of
    w = round(sqrt(area r)), h = round(sqrt(area / r)); the first that fits is placed at a uniform
    integer position (top in [0, H - h], left in [0, W - w]). If none fits: the largest centred
    crop with the aspect ratio clamped to ``ratio``. Returns float boxes (N, 4) as
    (left, top, right, bottom) in pixel-edge coordinates (the crop covers columns left..right-1).
    """
    sizes = sizes.to(torch.float64)
    count = sizes.shape[0]
    height, width = sizes[:, :1], sizes[:, 1:]
    area = height * width
    uniform = torch.rand((count, tries), generator=generator, dtype=torch.float64)
    target_area = area * (scale[0] + (scale[1] - scale[0]) * uniform)
    log_low, log_high = math.log(ratio[0]), math.log(ratio[1])
    aspect = torch.exp(
        log_low + (log_high - log_low) * torch.rand((count, tries), generator=generator, dtype=torch.float64)
    )
    crop_width = torch.round(torch.sqrt(target_area * aspect))
    crop_height = torch.round(torch.sqrt(target_area / aspect))
    fits = (crop_width > 0) & (crop_width <= width) & (crop_height > 0) & (crop_height <= height)
    any_fit = fits.any(dim=1)
    first = torch.argmax(fits.to(torch.int8), dim=1, keepdim=True)
    crop_width = crop_width.gather(1, first).squeeze(1)
    crop_height = crop_height.gather(1, first).squeeze(1)
    height, width = height.squeeze(1), width.squeeze(1)
    # fallback: centre crop of the whole image with its aspect ratio clamped into ``ratio``
    in_ratio = width / height
    fallback_width = torch.where(
        in_ratio < ratio[0], width, torch.where(in_ratio > ratio[1], torch.round(height * ratio[1]), width)
    )
    fallback_height = torch.where(
        in_ratio < ratio[0], torch.round(width / ratio[0]), torch.where(in_ratio > ratio[1], height, height)
    )
    crop_width = torch.where(any_fit, crop_width, fallback_width)
    crop_height = torch.where(any_fit, crop_height, fallback_height)
    position = torch.rand((count, 2), generator=generator, dtype=torch.float64)
    top = torch.where(
        any_fit,
        torch.floor(position[:, 0] * (height - crop_height + 1)),
        torch.floor((height - crop_height) / 2),
    )
    left = torch.where(
        any_fit, torch.floor(position[:, 1] * (width - crop_width + 1)), torch.floor((width - crop_width) / 2)
    )
    return torch.stack([left, top, left + crop_width, top + crop_height], dim=1).to(torch.float32)


@dataclass(frozen=True)
class AugmentParameters:
    """The random draws for M = 2N views (view 1 of every image, then view 2).

    boxes: (M, 4) crop boxes (left, top, right, bottom); flip: (M,) bool.
    jitter: (M,) bool, whether colour jitter applies; jitter_factors: (M, 4) brightness,
        contrast, saturation factors and the hue shift; jitter_order: (M, 4) a permutation of
        (0 brightness, 1 contrast, 2 saturation, 3 hue) per view.
    grayscale: (M,) bool. blur: (M,) bool; blur_sigma: (M,) float.
    """

    boxes: Tensor
    flip: Tensor
    jitter: Tensor
    jitter_factors: Tensor
    jitter_order: Tensor
    grayscale: Tensor
    blur: Tensor
    blur_sigma: Tensor


def sample_parameters(
    settings: AugmentSettings, sizes: Tensor, generator: torch.Generator | None = None
) -> AugmentParameters:
    """Draw the parameters of ``len(sizes)`` views (on the CPU) for the augmentation ``settings``."""
    count = sizes.shape[0]

    def uniform(low: float, high: float, shape: tuple[int, ...]) -> Tensor:
        return low + (high - low) * torch.rand(shape, generator=generator)

    def coin(probability: float) -> Tensor:
        return torch.rand(count, generator=generator) < probability

    boxes = sample_crop_boxes(sizes, settings.crop_scale, settings.crop_ratio, generator)
    flip = coin(settings.flip_probability)
    jitter = coin(settings.jitter_probability)
    factors = torch.stack(
        [
            uniform(1 - settings.brightness, 1 + settings.brightness, (count,)),
            uniform(1 - settings.contrast, 1 + settings.contrast, (count,)),
            uniform(1 - settings.saturation, 1 + settings.saturation, (count,)),
            uniform(-settings.hue, settings.hue, (count,)),
        ],
        dim=1,
    )
    order = torch.argsort(torch.rand((count, 4), generator=generator), dim=1)
    grayscale_flags = coin(settings.grayscale_probability)
    blur = coin(settings.blur_probability)
    sigma = uniform(settings.blur_sigma[0], settings.blur_sigma[1], (count,))
    return AugmentParameters(boxes, flip, jitter, factors, order, grayscale_flags, blur, sigma)


# ----------------------------------------------------------------------------------------------
# batched operations on float images in [0, 1], shape (M, C, H, W)


def resized_crop(images: Tensor, boxes: Tensor, batch_index: Tensor, size: int) -> Tensor:
    """Cut box ``boxes[m]`` out of image ``batch_index[m]`` and resize it to (size, size), all in
    one ``roi_align`` call. images: float (N, C, H, W); boxes (M, 4) (left, top, right, bottom) in
    pixel-edge coordinates; returns (M, C, size, size). Each output pixel averages
    ceil(box side / size)^2 bilinear samples (aligned pixel centres): plain bilinear resizing
    when enlarging, an area-like antialiasing filter when shrinking."""
    rois = to_device(
        torch.cat([batch_index.to(boxes.dtype)[:, None], boxes], dim=1).to(images.dtype), images.device
    )
    return roi_align(
        images, rois, output_size=(size, size), spatial_scale=1.0, sampling_ratio=-1, aligned=True
    )


def grayscale(images: Tensor) -> Tensor:
    """Luma 0.2989 R + 0.587 G + 0.114 B, shape (M, 1, H, W); a 1-channel image is returned as is."""
    if images.shape[1] == 1:
        return images
    red, green, blue = images.split(1, dim=1)
    return GRAY_WEIGHTS[0] * red + GRAY_WEIGHTS[1] * green + GRAY_WEIGHTS[2] * blue


def _per_sample(factor: Tensor, images: Tensor) -> Tensor:
    return to_device(factor.to(images.dtype), images.device).view(-1, 1, 1, 1)


def adjust_brightness(images: Tensor, factor: Tensor) -> Tensor:
    """clamp(b x, 0, 1) with one factor b per image (factor: (M,))."""
    return (images * _per_sample(factor, images)).clamp_(0.0, 1.0)


def adjust_contrast(images: Tensor, factor: Tensor) -> Tensor:
    """clamp(c x + (1 - c) m, 0, 1) with m the mean of the image's gray levels, c per image."""
    factor = _per_sample(factor, images)
    mean = grayscale(images).mean(dim=(1, 2, 3), keepdim=True)
    return (factor * images + (1 - factor) * mean).clamp_(0.0, 1.0)


def adjust_saturation(images: Tensor, factor: Tensor) -> Tensor:
    """clamp(s x + (1 - s) gray(x), 0, 1), s per image; identity for 1-channel images."""
    if images.shape[1] == 1:
        return images
    factor = _per_sample(factor, images)
    return (factor * images + (1 - factor) * grayscale(images)).clamp_(0.0, 1.0)


def adjust_hue(images: Tensor, shift: Tensor) -> Tensor:
    """Rotate the hue by ``shift`` turns (in [-0.5, 0.5]) per image, keeping HSV saturation and
    value; identity for 1-channel images.

    RGB -> HSV: V = max, S = (max - min) / max, H from which channel is the max; then back with
    channel_n = V - V S clamp(min(k_n, 4 - k_n), 0, 1), k_n = (n + 6 H) mod 6 for n = 5, 3, 1.
    """
    if images.shape[1] == 1:
        return images
    red, green, blue = images.unbind(dim=1)
    value, _ = images.max(dim=1)
    minimum, _ = images.min(dim=1)
    chroma = value - minimum
    saturation = torch.where(value > 0, chroma / value.clamp_min(1e-12), torch.zeros_like(value))
    safe_chroma = torch.where(chroma > 0, chroma, torch.ones_like(chroma))
    hue_red = ((green - blue) / safe_chroma) % 6
    hue_green = (blue - red) / safe_chroma + 2
    hue_blue = (red - green) / safe_chroma + 4
    hue = torch.where(value == red, hue_red, torch.where(value == green, hue_green, hue_blue))
    hue = torch.where(chroma > 0, hue / 6, torch.zeros_like(hue))
    hue = (hue + _per_sample(shift, images)[:, 0]) % 1.0
    channels = []
    for n in (5.0, 3.0, 1.0):
        k = (n + hue * 6) % 6
        channels.append(value - value * saturation * torch.minimum(k, 4 - k).clamp(0.0, 1.0))
    return torch.stack(channels, dim=1)


def gaussian_blur(images: Tensor, sigma: Tensor, kernel_size: int) -> Tensor:
    """Blur each image with its own Gaussian (sigma: (M,)), kernel ``kernel_size`` (odd) wide,
    reflect padding: weights exp(-t^2 / (2 sigma^2)) for t = -(k-1)/2 .. (k-1)/2, normalised,
    applied along rows then columns as a convolution grouped per image and channel."""
    count, channels, height, width = images.shape
    half = kernel_size // 2
    offsets = torch.arange(-half, half + 1, device=images.device, dtype=images.dtype)
    weights = torch.exp(-0.5 * (offsets[None, :] / _per_sample(sigma, images).view(-1, 1)) ** 2)
    weights = (weights / weights.sum(dim=1, keepdim=True)).repeat_interleave(channels, dim=0)
    flat = images.reshape(1, count * channels, height, width)
    flat = F.pad(flat, (half, half, half, half), mode="reflect")
    flat = F.conv2d(flat, weights.view(-1, 1, 1, kernel_size), groups=count * channels)
    flat = F.conv2d(flat, weights.view(-1, 1, kernel_size, 1), groups=count * channels)
    return flat.view(count, channels, height, width)


_JITTER_OPERATIONS = {
    BRIGHTNESS: adjust_brightness,
    CONTRAST: adjust_contrast,
    SATURATION: adjust_saturation,
    HUE: adjust_hue,
}


def _apply_where(images: Tensor, mask: Tensor, operation, *arguments: Tensor) -> Tensor:
    """images[mask] = operation(images[mask], *arguments[mask]), in place; the others are untouched."""
    index = torch.nonzero(mask, as_tuple=False).squeeze(1)
    if index.numel() == 0:
        return images
    device_index = to_device(index, images.device)
    selected = operation(images.index_select(0, device_index), *(argument[index] for argument in arguments))
    return images.index_copy_(0, device_index, selected)


def apply_augment(views: Tensor, parameters: AugmentParameters, settings: AugmentSettings) -> Tensor:
    """Steps 2-6 of the module docstring on cropped views (M, C, S, S) in [0, 1]."""
    flip = to_device(parameters.flip, views.device).view(-1, 1, 1, 1)
    views = torch.where(flip, views.flip(-1), views)
    jitter_operations = [BRIGHTNESS, CONTRAST]
    if settings.channels == 3:
        jitter_operations += [SATURATION, HUE]
    for position in range(4):
        for operation in jitter_operations:
            mask = parameters.jitter & (parameters.jitter_order[:, position] == operation)
            views = _apply_where(
                views, mask, _JITTER_OPERATIONS[operation], parameters.jitter_factors[:, operation]
            )
    if settings.channels == 3:
        views = _apply_where(views, parameters.grayscale, lambda x: grayscale(x).expand(-1, 3, -1, -1))
    views = _apply_where(
        views, parameters.blur, lambda x, s: gaussian_blur(x, s, settings.blur_kernel), parameters.blur_sigma
    )
    mean = to_device(torch.tensor(settings.mean, dtype=views.dtype), views.device).view(1, -1, 1, 1)
    std = to_device(torch.tensor(settings.std, dtype=views.dtype), views.device).view(1, -1, 1, 1)
    return (views - mean) / std


class GPUTwoViewAugment:
    """Two augmented, normalised views of every image of a uint8 batch, computed with batched
    tensor operations on the batch's device (see the module docstring for the steps).

    settings: an :class:`mitool.vision.augment.AugmentSettings` (MoCo v2's: :meth:`for_dataset`).
    generator: a CPU ``torch.Generator`` for the parameters; seed it for reproducible views.
    """

    def __init__(self, settings: AugmentSettings, generator: torch.Generator | None = None) -> None:
        self.settings = settings
        self.generator = generator if generator is not None else torch.Generator().manual_seed(0)

    @classmethod
    def for_dataset(cls, info: DatasetInfo, image_size: int, seed: int = 0) -> GPUTwoViewAugment:
        """MoCo v2's augmentation for dataset ``info`` at ``image_size`` pixels, seeded by ``seed``."""
        return cls(moco_v2_settings(info, image_size), torch.Generator().manual_seed(seed))

    def state_dict(self) -> dict[str, Tensor]:
        """The generator's state, for an exact resume (save it with the checkpoint)."""
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        """Continue from a state returned by :meth:`state_dict`."""
        self.generator.set_state(state["generator"])

    def views_of_batch(
        self, inputs: Tensor | Sequence[Tensor | EncodedImage], device: torch.device | str
    ) -> tuple[Tensor, Tensor, Tensor, list[str]]:
        """A loader batch's ``inputs`` (from a dataset opened with :func:`loader_options`) to
        ``(view_1, view_2, kept, failed)`` on ``device``: ``labels[kept]`` are the labels of the
        views, ``failed`` the names of JPEGs the device decoder rejected (for SkippedImages).
        With every image rejected, the views are empty (0, C, size, size)."""
        images, kept, failed = decode_on_device(inputs, device)
        if len(images) == 0:
            size = self.settings.image_size
            empty = torch.empty((0, self.settings.channels, size, size), device=device)
            return empty, empty, kept, failed
        view_1, view_2 = self(images)
        return view_1, view_2, kept, failed

    def __call__(self, images: Tensor | Sequence[Tensor]) -> tuple[Tensor, Tensor]:
        """images: uint8 (N, C, H, W) or a list of uint8 (C, H_i, W_i) on one device.
        Returns (view_1, view_2), float32 (N, C, size, size) on that device."""
        if isinstance(images, Tensor):
            if images.dim() != 4:
                raise ValueError(f"images must have shape (N, C, H, W), got {tuple(images.shape)}")
            batch = images
            sizes = torch.tensor([[images.shape[2], images.shape[3]]], dtype=torch.int64).expand(
                images.shape[0], 2
            )
        else:
            batch, sizes = pad_to_batch(list(images))
        if batch.shape[1] != self.settings.channels:
            raise ValueError(
                f"images must have {self.settings.channels} channels (the dataset's), got {batch.shape[1]}"
            )
        count = batch.shape[0]
        both_sizes = torch.cat([sizes, sizes], dim=0)
        parameters = sample_parameters(self.settings, both_sizes, self.generator)
        source = batch.to(torch.float32) if batch.dtype != torch.float32 else batch
        batch_index = torch.arange(count).repeat(2)
        views = resized_crop(source, parameters.boxes, batch_index, self.settings.image_size) / 255.0
        views = apply_augment(views, parameters, self.settings)
        return views[:count], views[count:]
