"""Datasets and loaders for vision pretraining: ImageNet-layout folders, CIFAR-10, STL-10,
Fashion-MNIST (IDX files) and a generated synthetic set.

Every dataset yields ``(transform(image), label)`` where ``image`` is a PIL image (mode "RGB", or
"L" for the 1-channel datasets) and ``label`` an int in [0, num_classes). A two-view transform
returns a tuple ``(view_1, view_2)`` and the loader batches it as a tuple of two tensors.

Unreadable images (corrupt or truncated files in an image folder) never stop an epoch: the
dataset returns an :class:`UnreadableImage` marker instead of the image, the loader's collate
function drops it from the batch and reports its name in the batch's third element ``skipped``,
and :class:`SkippedImages` gathers those names and issues one warning at the end.

Errors in what was asked for (an unknown name or split, a missing or empty directory, missing IDX
files) are raised by :func:`load_dataset` before any batch is made, as one-line ``ValueError`` or
``FileNotFoundError`` messages naming the option and what is expected.
"""

from __future__ import annotations

import gzip
import math
import os
import signal
import struct
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler, default_collate

from mitool.runtime import free_cores

__all__ = [
    "DATASETS",
    "FASHION_MNIST_DIR",
    "IMAGE_EXTENSIONS",
    "SPLITS",
    "DatasetInfo",
    "EncodedImage",
    "FashionMNIST",
    "ImageFolderDataset",
    "SeededSampler",
    "SkippedImages",
    "SkippingDataLoader",
    "SyntheticImages",
    "UnreadableImage",
    "UnreadableImagesWarning",
    "augmentation_seed",
    "collate_skipping_unreadable",
    "dataset_info",
    "default_workers",
    "load_dataset",
    "make_loader",
    "read_idx",
]

DATASETS: tuple[str, ...] = ("imagefolder", "cifar10", "stl10", "fashion-mnist", "synthetic")
SPLITS: tuple[str, ...] = ("train", "test")
IMAGE_EXTENSIONS: tuple[str, ...] = (".jpg", ".jpeg", ".png")
#: Where the Debian package dataset-fashion-mnist installs the IDX files (``dpkg -L`` shows it).
FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"

_IMAGENET_MEAN = (0.485, 0.456, 0.406)
_IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class DatasetInfo:
    """What a model and a transform need to know about a dataset.

    channels: 3 for colour, 1 for grayscale (Fashion-MNIST); transforms keep this count.
    image_size: the side of the stored images (224 for ImageNet-layout folders: the crop size).
    num_classes: the number of labels.
    mean, std: per-channel statistics of the pixels in [0, 1], for ``Normalize``.
    """

    channels: int
    image_size: int
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]


_SYNTHETIC_DEFAULTS = {"size": 2048, "image_size": 32, "num_classes": 10, "channels": 3, "seed": 0}


def _check_name(name: str) -> None:
    if name not in DATASETS:
        raise ValueError(f"dataset must be one of {', '.join(DATASETS)}; got {name!r}")


def _synthetic_options(options: dict[str, Any]) -> dict[str, int]:
    unknown = sorted(set(options) - set(_SYNTHETIC_DEFAULTS))
    if unknown:
        raise ValueError(
            f"unknown synthetic option {unknown[0]!r}; allowed: {', '.join(_SYNTHETIC_DEFAULTS)}"
        )
    merged = {**_SYNTHETIC_DEFAULTS, **options}
    for key, value in merged.items():
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
            raise ValueError(f"synthetic option {key} must be a whole number, got {value!r}")
    if merged["channels"] not in (1, 3):
        raise ValueError(f"synthetic option channels must be 1 or 3, got {merged['channels']}")
    for key, low in (("size", 1), ("image_size", 8), ("num_classes", 2)):
        if merged[key] < low:
            raise ValueError(f"synthetic option {key} must be >= {low}, got {merged[key]}")
    if merged["seed"] < 0:
        raise ValueError(f"synthetic option seed must be >= 0, got {merged['seed']}")
    return {key: int(value) for key, value in merged.items()}


def dataset_info(
    name: str, data_dir: str | os.PathLike | None = None, **synthetic_options: int
) -> DatasetInfo:
    """The :class:`DatasetInfo` of dataset ``name`` (one of :data:`DATASETS`).

    For ``imagefolder`` the classes are counted from ``data_dir``/train when ``data_dir`` is given
    (1000, ImageNet's count, otherwise); ``synthetic`` takes the same options as
    :func:`load_dataset`. The means and standard deviations are the commonly used per-channel
    statistics of each training set (ImageNet's for image folders); Fashion-MNIST's were measured
    on its 60000 training images, the synthetic set's on its generator (see :class:`SyntheticImages`).
    """
    _check_name(name)
    if name == "imagefolder":
        num_classes = 1000
        if data_dir is not None:
            num_classes = len(_class_folders(os.path.join(os.fspath(data_dir), "train"), "train"))
        return DatasetInfo(3, 224, num_classes, _IMAGENET_MEAN, _IMAGENET_STD)
    if name == "cifar10":
        return DatasetInfo(3, 32, 10, (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))
    if name == "stl10":
        return DatasetInfo(3, 96, 10, (0.4467, 0.4398, 0.4066), (0.2603, 0.2566, 0.2713))
    if name == "fashion-mnist":
        return DatasetInfo(1, 28, 10, (0.2860,), (0.3530,))
    options = _synthetic_options(synthetic_options)
    channels = options["channels"]
    return DatasetInfo(
        channels,
        options["image_size"],
        options["num_classes"],
        (SyntheticImages.MEAN,) * channels,
        (SyntheticImages.STD,) * channels,
    )


# ----------------------------------------------------------------------------------------------
# unreadable images


class UnreadableImage(NamedTuple):
    """Marker a dataset returns in place of an image it could not decode.

    name: the file's path relative to the split directory (e.g. ``"n01440764/x.JPEG"``).
    reason: the decoder's one-line complaint.
    """

    name: str
    reason: str


class EncodedImage(NamedTuple):
    """An image handed over undecoded, for batched decoding on the device
    (:func:`mitool.vision.gpu_augment.decode_on_device`).

    data: 1-D uint8 tensor, the file's bytes (JPEG), or a decoded (C, H, W) uint8 tensor for
        formats the device decoder does not read (PNG is decoded in the worker).
    name: the file's path relative to the split directory, to name it if decoding fails.
    """

    data: torch.Tensor
    name: str


class UnreadableImagesWarning(UserWarning):
    """Some images could not be read and were left out of their batches."""


class SkippedImages:
    """Counts the images dropped from batches in the main process and warns once about them.

    Use: ``skipped_images.add(skipped)`` for every batch ``(inputs, labels, skipped)``, then
    ``skipped_images.report()`` at the end of an epoch or a run. ``earlier``: images skipped
    before (by the run being resumed), included in :attr:`count`.
    """

    def __init__(self, show: int = 5, earlier: int = 0) -> None:
        self.show = show
        self.earlier = earlier
        self.names: list[str] = []
        self._reported = 0

    @property
    def count(self) -> int:
        """How many images were skipped so far (earlier ones included)."""
        return self.earlier + len(self.names)

    def add(self, skipped: Sequence[str]) -> None:
        """Record the names of the images skipped from one batch."""
        self.names.extend(skipped)

    def report(self) -> str | None:
        """Issue one :class:`UnreadableImagesWarning` counting the images skipped since the last
        report and naming the first few; nothing when none. Returns the message (or None)."""
        new = self.names[self._reported :]
        if not new:
            return None
        self._reported = len(self.names)
        shown = ", ".join(new[: self.show])
        more = f" and {len(new) - self.show} more" if len(new) > self.show else ""
        message = f"skipped {len(new)} unreadable image{'s' if len(new) != 1 else ''}: {shown}{more}"
        warnings.warn(message, UnreadableImagesWarning, stacklevel=2)
        return message


# ----------------------------------------------------------------------------------------------
# image folders (ImageNet layout)


def _class_folders(split_dir: str, split: str) -> list[str]:
    if not os.path.isdir(split_dir):
        raise FileNotFoundError(
            f"data directory for split {split!r} not found: {split_dir} (expected class folders of "
            f"JPEG/PNG images under DIR/train and DIR/val)"
        )
    classes = sorted(entry.name for entry in os.scandir(split_dir) if entry.is_dir())
    if not classes:
        raise ValueError(f"data directory {split_dir} has no class folders (expected DIR/<class>/<image>)")
    return classes


class ImageFolderDataset(Dataset):
    """Class folders of JPEG/PNG images: ``root/<class>/<image>``, classes in sorted order.

    Items are ``(transform(image), class index)`` with ``image`` an RGB PIL image; an unreadable
    file gives ``(UnreadableImage(name, reason), class index)``. With ``encoded=True`` the items
    are ``(EncodedImage(bytes or decoded tensor, name), class index)`` and ``transform`` must be
    None (for decoding on the device).
    """

    def __init__(
        self, root: str, split: str, transform: Callable | None = None, encoded: bool = False
    ) -> None:
        if encoded and transform is not None:
            raise ValueError("transform must be None when encoded=True (images are decoded on the device)")
        self.root = root
        self.transform = transform
        self.encoded = encoded
        self.classes = _class_folders(root, split)
        self.samples: list[tuple[str, int]] = []
        for index, class_name in enumerate(self.classes):
            class_dir = os.path.join(root, class_name)
            for dirpath, _dirnames, filenames in sorted(os.walk(class_dir, followlinks=True)):
                for filename in sorted(filenames):
                    if filename.lower().endswith(IMAGE_EXTENSIONS):
                        relative = os.path.relpath(os.path.join(dirpath, filename), root)
                        self.samples.append((relative, index))
        if not self.samples:
            raise ValueError(
                f"data directory {root} has no images (expected {', '.join(IMAGE_EXTENSIONS)} files "
                f"inside its class folders)"
            )

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        name, label = self.samples[index]
        path = os.path.join(self.root, name)
        if self.encoded:
            return self._encoded(path, name), label
        try:
            with Image.open(path) as opened:
                image = opened.convert("RGB")  # decodes the whole file: truncation raises here
        except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as error:
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            return UnreadableImage(name, reason), label
        return (self.transform(image) if self.transform is not None else image), label

    @staticmethod
    def _encoded(path: str, name: str) -> EncodedImage | UnreadableImage:
        try:
            with open(path, "rb") as file:
                data = file.read()
            if data[:3] == b"\xff\xd8\xff":
                # a JPEG ends with the end-of-image marker FF D9 (some writers pad it with zeros)
                if b"\xff\xd9" not in data.rstrip(b"\x00")[-64:]:
                    return UnreadableImage(name, "truncated JPEG (no end-of-image marker)")
                return EncodedImage(torch.frombuffer(bytearray(data), dtype=torch.uint8), name)
            with Image.open(path) as opened:
                array = np.asarray(opened.convert("RGB"), dtype=np.uint8)
        except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as error:
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            return UnreadableImage(name, reason)
        return EncodedImage(torch.from_numpy(array.copy()).permute(2, 0, 1).contiguous(), name)


# ----------------------------------------------------------------------------------------------
# Fashion-MNIST from IDX files


def read_idx(path: str) -> np.ndarray:
    """Read an IDX file (the MNIST format, gzipped when the name ends in .gz) as a uint8 array.

    Header: two zero bytes, the type code 0x08 (unsigned byte), the number of dimensions n, then n
    big-endian int32 sizes; the data follow in C order. Raises ValueError for anything else.
    """
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as file:
        content = file.read()
    if len(content) < 4 or content[0] != 0 or content[1] != 0 or content[2] != 0x08:
        raise ValueError(f"{path} is not an IDX file of unsigned bytes")
    dims = content[3]
    header = 4 + 4 * dims
    shape = struct.unpack(f">{dims}i", content[4:header])
    expected = header + math.prod(shape)
    if len(content) != expected:
        raise ValueError(f"{path} is truncated or padded: {len(content)} bytes, its header says {expected}")
    return np.frombuffer(content, dtype=np.uint8, offset=header).reshape(shape)


def _find_idx(directory: str, stem: str) -> str:
    for candidate in (stem, stem + ".gz"):
        path = os.path.join(directory, candidate)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(
        f"Fashion-MNIST file {stem}[.gz] not found in {directory} (set data_dir / --data to the "
        f"directory of the IDX files, or install the Debian package dataset-fashion-mnist)"
    )


class FashionMNIST(Dataset):
    """Fashion-MNIST (Xiao et al. 2017) from its four IDX files, gzipped or not.

    train: 60000 images, test: 10000; 28x28 grayscale, 10 classes. Items are
    ``(transform(image), label)`` with ``image`` a PIL image of mode "L".
    """

    def __init__(self, directory: str, split: str, transform: Callable | None = None) -> None:
        prefix = "train" if split == "train" else "t10k"
        images_path = _find_idx(directory, f"{prefix}-images-idx3-ubyte")
        labels_path = _find_idx(directory, f"{prefix}-labels-idx1-ubyte")
        self.images = read_idx(images_path)
        self.labels = read_idx(labels_path)
        if self.images.ndim != 3 or self.labels.ndim != 1 or len(self.images) != len(self.labels):
            raise ValueError(
                f"Fashion-MNIST files in {directory} disagree: images {self.images.shape}, "
                f"labels {self.labels.shape}"
            )
        self.transform = transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        image = Image.fromarray(self.images[index], mode="L")
        return (self.transform(image) if self.transform is not None else image), int(self.labels[index])


# ----------------------------------------------------------------------------------------------
# synthetic images


class SyntheticImages(Dataset):
    """Generated images with a class structure that survives the two-view augmentation.

    Image of class c: a sinusoidal grating with c // 2 + 2 cycles per image side, vertical stripes
    for even c and horizontal for odd c (a horizontal flip keeps both), with a random phase and
    contrast, on a class-specific tint (for 3 channels), plus a bright disc at a random position
    and Gaussian pixel noise (sd 0.1). Labels cycle: item i has class i mod num_classes.
    Every item is generated from its own seed (seed, split, index), so it is the same in every
    process and every epoch, and costs a few array operations (about 2 ms at 224x224). Pixel mean
    and standard deviation, measured over the 2048 default images: 0.499 and 0.224
    (:attr:`MEAN`, :attr:`STD`).
    """

    MEAN = 0.5
    STD = 0.224

    def __init__(
        self,
        split: str,
        transform: Callable | None = None,
        size: int = 2048,
        image_size: int = 32,
        num_classes: int = 10,
        channels: int = 3,
        seed: int = 0,
    ) -> None:
        self.split_id = SPLITS.index(split)
        self.transform = transform
        self.size = size
        self.image_size = image_size
        self.num_classes = num_classes
        self.channels = channels
        self.seed = seed
        tint_generator = np.random.default_rng([seed, 7919])
        self.tints = tint_generator.uniform(-0.15, 0.15, size=(num_classes, 3))

    def __len__(self) -> int:
        return self.size

    def label(self, index: int) -> int:
        """The class of item ``index``."""
        return index % self.num_classes

    def image_array(self, index: int) -> np.ndarray:
        """Item ``index`` as a uint8 array (H, W, channels)."""
        if not 0 <= index < self.size:
            raise IndexError(f"index {index} out of range for {self.size} synthetic images")
        label = self.label(index)
        generator = np.random.default_rng([self.seed, self.split_id, index])
        side = self.image_size
        coordinates = (np.arange(side, dtype=np.float32) + 0.5) / side
        cycles = label // 2 + 2
        phase = generator.uniform(0, 2 * np.pi)
        contrast = generator.uniform(0.15, 0.3)
        wave = np.sin(2 * np.pi * cycles * coordinates + phase).astype(np.float32)
        grating = np.broadcast_to(wave[None, :] if label % 2 == 0 else wave[:, None], (side, side))
        image = 0.5 + contrast * grating
        centre = generator.uniform(0.2, 0.8, size=2)
        radius = generator.uniform(0.08, 0.2)
        rows, columns = np.meshgrid(coordinates, coordinates, indexing="ij")
        inside = (rows - centre[0]) ** 2 + (columns - centre[1]) ** 2 < radius**2
        image = np.where(inside, 0.85, image)
        image = image[:, :, None] + self.tints[label][None, None, : self.channels]
        image = image + generator.normal(0.0, 0.1, size=(side, side, self.channels))
        return np.clip(np.round(image * 255.0), 0, 255).astype(np.uint8)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        array = self.image_array(index)
        image = Image.fromarray(array[:, :, 0], mode="L") if self.channels == 1 else Image.fromarray(array)
        return (self.transform(image) if self.transform is not None else image), self.label(index)


# ----------------------------------------------------------------------------------------------
# torchvision datasets from a local root


def _torchvision_dataset(name: str, split: str, root: str, transform: Callable | None, download: bool):
    import torchvision

    if not download and not os.path.isdir(root):
        raise FileNotFoundError(
            f"{name} root directory not found: {root} (pass data_dir / --data pointing to it, or "
            f"download=True / --download to fetch it)"
        )
    try:
        if name == "cifar10":
            return torchvision.datasets.CIFAR10(
                root, train=split == "train", transform=transform, download=download
            )
        return torchvision.datasets.STL10(root, split=split, transform=transform, download=download)
    except RuntimeError as error:  # torchvision: "Dataset not found or corrupted. ..."
        raise FileNotFoundError(
            f"{name} not found or corrupted under {root} (expected torchvision's layout; "
            f"download=True / --download fetches it)"
        ) from error


# ----------------------------------------------------------------------------------------------
# the entry point


def load_dataset(
    name: str,
    split: str,
    data_dir: str | os.PathLike | None = None,
    transform: Callable | None = None,
    download: bool = False,
    *,
    encoded: bool = False,
    **synthetic_options: int,
) -> Dataset:
    """Open dataset ``name`` (one of :data:`DATASETS`), ``split`` "train" or "test".

    imagefolder: ``data_dir``/train for "train", ``data_dir``/val for "test" (ImageNet layout).
        ``encoded=True`` hands JPEG bytes over undecoded (see :class:`ImageFolderDataset`).
    cifar10, stl10: torchvision's classes reading from the local root ``data_dir``; nothing is
        downloaded unless ``download`` is True.
    fashion-mnist: the IDX files (gzipped or not) in ``data_dir``, by default
        :data:`FASHION_MNIST_DIR` where the Debian package dataset-fashion-mnist puts them.
    synthetic: :class:`SyntheticImages` with options size, image_size, num_classes, channels,
        seed (``data_dir`` is ignored).

    Items are ``(transform(image), label)``. Every check (name, split, directories, files) is
    made here, before any item is read.
    """
    _check_name(name)
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}; got {split!r}")
    if encoded and name != "imagefolder":
        raise ValueError(f"encoded=True is only for dataset imagefolder, not {name!r}")
    if name == "synthetic":
        options = _synthetic_options(synthetic_options)
        return SyntheticImages(split, transform, **options)
    if synthetic_options:
        raise ValueError(f"options {', '.join(sorted(synthetic_options))} are only for dataset synthetic")
    if name == "fashion-mnist":
        directory = os.fspath(data_dir) if data_dir is not None else FASHION_MNIST_DIR
        if not os.path.isdir(directory):
            raise FileNotFoundError(
                f"Fashion-MNIST directory not found: {directory} (set data_dir / --data to the directory "
                f"of the IDX files, or install the Debian package dataset-fashion-mnist)"
            )
        return FashionMNIST(directory, split, transform)
    if data_dir is None:
        raise ValueError(f"dataset {name} needs data_dir / --data (the directory that holds it)")
    root = os.fspath(data_dir)
    if name == "imagefolder":
        if not os.path.isdir(root):
            raise FileNotFoundError(
                f"data directory not found: {root} (expected class folders under DIR/train and DIR/val)"
            )
        split_dir = os.path.join(root, "train" if split == "train" else "val")
        return ImageFolderDataset(split_dir, split, transform, encoded=encoded)
    return _torchvision_dataset(name, split, root, transform, download)


# ----------------------------------------------------------------------------------------------
# loaders


def collate_skipping_unreadable(items: Sequence[tuple[Any, int]]) -> tuple[Any, torch.Tensor, list[str]]:
    """Batch ``(input, label)`` items into ``(inputs, labels, skipped)``, leaving out unreadable ones.

    inputs: a stacked tensor (N, ...), a tuple of stacked tensors for two-view items, a list of
        tensors when they differ in shape (decoded images for the device path), or the list
        of :class:`EncodedImage` items (sizes may differ; decode them with
        :func:`mitool.vision.gpu_augment.decode_on_device`); ``None`` when every item was unreadable.
    labels: int64 tensor (N,). skipped: the names of the unreadable items.
    """
    skipped = [item[0].name for item in items if isinstance(item[0], UnreadableImage)]
    kept = [item for item in items if not isinstance(item[0], UnreadableImage)]
    labels = torch.tensor([label for _, label in kept], dtype=torch.int64)
    if not kept:
        return None, labels, skipped
    first = kept[0][0]
    if isinstance(first, EncodedImage):
        return [item[0] for item in kept], labels, skipped
    if isinstance(first, torch.Tensor) and any(item[0].shape != first.shape for item in kept):
        return [item[0] for item in kept], labels, skipped  # decoded images of different sizes
    inputs = default_collate([item[0] for item in kept])
    if isinstance(first, tuple):
        inputs = tuple(inputs)
    return inputs, labels, skipped


class SeededSampler(Sampler[int]):
    """Indices in an order fixed by (seed, epoch): shuffled with a generator seeded from both, or
    0..n-1 when ``shuffle`` is False. A resumed run that sets the same epoch sees the same order."""

    def __init__(self, length: int, shuffle: bool, seed: int) -> None:
        self.length = length
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        if not self.shuffle:
            return iter(range(self.length))
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        return iter(torch.randperm(self.length, generator=generator).tolist())

    def __len__(self) -> int:
        return self.length


def augmentation_seed(seed: int, epoch: int, rank: int = 0) -> int:
    """The seed of the augmentation stream of one rank in one epoch.

    Rank 0 (and a single process): seed * 1_000_003 + epoch. Rank r > 0: a 63-bit number mixed
    from (seed, epoch, r) by numpy's ``SeedSequence``, so that under DDP every rank augments its
    share of the images with its own random draws (one shared stream would give every rank the
    same crops and colours for different images). A function of (seed, epoch, rank) only: a
    resumed run replays the same draws.
    """
    if rank == 0:
        return seed * 1_000_003 + epoch
    state = np.random.SeedSequence([seed, epoch, rank]).generate_state(2, dtype=np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


class SkippingDataLoader(DataLoader):
    """A DataLoader of ``(inputs, labels, skipped)`` batches. In one process it never yields an
    empty batch: the names skipped from a batch whose items were all unreadable are carried into
    the next batch (or yielded with ``inputs`` None at the very end). Under DDP (``own_stream``)
    such a batch is yielded in place with ``inputs`` None, so that every rank yields the same
    number of batches and the ranks' collective calls stay paired. ``set_epoch(e)`` fixes the
    order and the augmentation seeds for epoch e.

    Augmentations are drawn from :func:`augmentation_seed` (seed, epoch, rank): in worker
    processes through the DataLoader's generator (worker w gets that seed's base + w, as
    torch's DataLoader does); with ``num_workers=0`` and ``own_stream`` (used under DDP), the
    main process fetches each batch with torch's global generator switched to the loader's own
    stream and back, so that the training's random draws (which must agree across ranks, e.g.
    SiMo's negatives) are not consumed by the augmentation. Without ``own_stream`` and workers,
    the transforms draw from the global generator as usual (single-process behaviour).
    """

    def __init__(
        self, *args: Any, seed: int = 0, rank: int = 0, own_stream: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.seed = seed
        self.rank = rank
        self.own_stream = own_stream
        self._stream_state = torch.Generator().manual_seed(augmentation_seed(seed, 0, rank)).get_state()

    def set_epoch(self, epoch: int) -> None:
        """Order and augmentation seeds of epoch ``epoch``."""
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)
        seed = augmentation_seed(self.seed, epoch, self.rank)
        if self.generator is not None:
            self.generator.manual_seed(seed)
        self._stream_state = torch.Generator().manual_seed(seed).get_state()

    def _batches(self) -> Iterator[tuple[Any, torch.Tensor, list[str]]]:
        if not (self.own_stream and self.num_workers == 0):
            yield from super().__iter__()
            return
        # the stream restarts at each iteration (as workers' seeds do), so a replay is exact
        stream_state = self._stream_state
        batches = super().__iter__()
        while True:
            outside_state = torch.get_rng_state()
            torch.set_rng_state(stream_state)
            try:
                batch = next(batches, None)
            finally:
                stream_state = torch.get_rng_state()
                torch.set_rng_state(outside_state)
            if batch is None:
                return
            yield batch

    def __iter__(self) -> Iterator[tuple[Any, torch.Tensor, list[str]]]:  # type: ignore[override]
        carried: list[str] = []
        for inputs, labels, skipped in self._batches():
            if inputs is None and self.own_stream:  # under DDP: one batch out for one batch in
                yield None, labels, skipped
                continue
            if inputs is None:
                carried.extend(skipped)
                continue
            yield inputs, labels, carried + skipped
            carried = []
        if carried:
            yield None, torch.zeros(0, dtype=torch.int64), carried


MAX_DEFAULT_WORKERS = 8


def default_workers() -> int:
    """Loader worker processes per training process when the number is not given: the free cores
    (:func:`mitool.runtime.free_cores`) shared among the $LOCAL_WORLD_SIZE processes a launcher
    such as torchrun starts on this machine, one core left to each training process itself, at
    most :data:`MAX_DEFAULT_WORKERS` (0: batches are made in the training process)."""
    processes_here = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1))
    return max(0, min(MAX_DEFAULT_WORKERS, free_cores() // processes_here - 1))


def _leave_interrupts_to_the_main_process(worker_id: int) -> None:
    """In a loader worker: ignore SIGINT. A Ctrl-C on a terminal reaches every process of the
    foreground group; the training process stops cleanly (with a checkpoint) and ends its workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def make_loader(
    dataset: Dataset,
    batch_size: int,
    shuffle: bool,
    num_workers: int,
    seed: int,
    drop_last: bool,
    distributed: bool = False,
    epoch: int = 0,
    rank: int | None = None,
    world_size: int | None = None,
) -> SkippingDataLoader:
    """A loader of ``(inputs, labels, skipped)`` batches over ``dataset``.

    The order is fixed by (seed, epoch): a :class:`SeededSampler`, or a ``DistributedSampler``
    (this rank's share, shuffled by the same seed on every rank) when ``distributed``; call
    ``loader.set_epoch(e)`` to move on to epoch e. Augmentations are drawn from seeds fixed by
    (seed, epoch, rank) (:func:`augmentation_seed`): every rank has its own stream, a single
    process draws as rank 0. ``rank`` and ``world_size`` default to the process group's when
    ``distributed`` (give them to build one rank's loader without a process group). Batches
    hold fewer than ``batch_size`` items when images were unreadable; ``skipped`` names them
    (feed it to :class:`SkippedImages`).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if num_workers < 0:
        raise ValueError(f"num_workers must be >= 0, got {num_workers}")
    if distributed:
        sampler: Sampler[int] = DistributedSampler(
            dataset, num_replicas=world_size, rank=rank, shuffle=shuffle, seed=seed, drop_last=drop_last
        )
        rank = sampler.rank
    else:
        if rank not in (None, 0) or world_size not in (None, 1):
            raise ValueError(
                f"rank and world_size are for distributed=True only, got rank={rank}, world_size={world_size}"
            )
        sampler = SeededSampler(len(dataset), shuffle, seed)
        rank = 0
    generator = torch.Generator()
    loader = SkippingDataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=num_workers,
        collate_fn=collate_skipping_unreadable,
        drop_last=drop_last,
        pin_memory=torch.cuda.is_available(),
        persistent_workers=False,
        generator=generator,
        worker_init_fn=_leave_interrupts_to_the_main_process,
        seed=seed,
        rank=rank,
        own_stream=distributed,
    )
    loader.set_epoch(epoch)
    return loader
