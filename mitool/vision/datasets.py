"""The datasets of vision pretraining: ImageNet-layout folders, CIFAR-10, STL-10, Fashion-MNIST
(IDX files, :mod:`mitool.vision.idx`) and a generated synthetic set.

Every dataset yields ``(transform(image), label)`` where ``image`` is a PIL image (mode "RGB", or
"L" for the 1-channel datasets) and ``label`` an int in [0, num_classes). A two-view transform
returns a tuple ``(view_1, view_2)``. An image folder's file that cannot be decoded gives an
:class:`UnreadableImage` marker instead of the image (the loader, :mod:`mitool.vision.loader`,
leaves it out of its batch and counts it); ``encoded=True`` gives :class:`EncodedImage` items
for decoding on the device.

Errors in what was asked for (an unknown name or split, a missing or empty directory, missing IDX
files) are raised by :func:`load_dataset` and :func:`dataset_info` before any item is read, as
:class:`mitool.checks.ParameterError` naming the parameter (``dataset``, ``data_dir``, ...), the
value and what is expected.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

from mitool import checks
from mitool.checks import ParameterError
from mitool.vision.choices import DATASETS
from mitool.vision.idx import find_idx, read_idx

__all__ = [
    "DATASETS",
    "FASHION_MNIST_DIR",
    "IMAGE_EXTENSIONS",
    "IMAGE_FOLDER_SPLITS",
    "PRETRAINING_SPLITS",
    "SPLITS",
    "STL10_UNLABELED_SPLITS",
    "DatasetInfo",
    "EncodedImage",
    "FashionMNIST",
    "ImageFolderDataset",
    "SyntheticImages",
    "UnreadableImage",
    "dataset_info",
    "load_dataset",
    "pretraining_split",
]

SPLITS: tuple[str, ...] = ("train", "test")
STL10_UNLABELED_SPLITS: tuple[str, ...] = ("unlabeled", "train+unlabeled")
"""STL-10's splits without labels (torchvision's names; the label of an unlabeled image is -1),
for pretraining only."""
PRETRAINING_SPLITS: dict[str, str] = {"stl10": "train+unlabeled"}
"""The split a pretraining run trains on, where it is not ``train``: STL-10's 5 000 labelled and
100 000 unlabeled images (the unlabeled split is what STL-10 is for); the kNN monitor and the
linear probe still use the labelled ``train`` split as their memory and training set."""
IMAGE_FOLDER_SPLITS: dict[str, str] = {"train": "train", "test": "val"}
"""The folder of each split in an ImageNet-layout directory."""
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


def _synthetic_options(options: dict[str, Any]) -> dict[str, int]:
    """The synthetic set's options, the defaults filled in, checked (ParameterError: the size is
    the ``synthetic_size`` of a run, the others are named "synthetic <option>")."""
    unknown = sorted(set(options) - set(_SYNTHETIC_DEFAULTS))
    if unknown:
        raise ParameterError(
            f"synthetic option {unknown[0]}", f"is not one of {', '.join(_SYNTHETIC_DEFAULTS)}"
        )
    merged = {**_SYNTHETIC_DEFAULTS, **options}
    least = {"size": 1, "image_size": 8, "num_classes": 2, "channels": 1, "seed": 0}
    checked = {
        key: checks.whole_number("synthetic_size" if key == "size" else f"synthetic {key}", value, least[key])
        for key, value in merged.items()
    }
    if checked["channels"] not in (1, 3):
        raise ParameterError("synthetic channels", f"must be 1 or 3, got {checked['channels']}")
    return checked


def dataset_info(
    dataset: str, data_dir: str | os.PathLike | None = None, **synthetic_options: int
) -> DatasetInfo:
    """The :class:`DatasetInfo` of ``dataset`` (one of :data:`DATASETS`).

    For ``imagefolder`` the classes are counted from ``data_dir``/train when ``data_dir`` is given
    (1000, ImageNet's count, otherwise); ``synthetic`` takes the same options as
    :func:`load_dataset`. The means and standard deviations are the commonly used per-channel
    statistics of each training set (ImageNet's for image folders); Fashion-MNIST's were measured
    on its 60000 training images, the synthetic set's on its generator (see :class:`SyntheticImages`).
    """
    name = checks.choice("dataset", dataset, DATASETS)
    if name == "imagefolder":
        num_classes = 1000
        if data_dir is not None:
            num_classes = len(_class_folders(os.fspath(data_dir), "train"))
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


# ----------------------------------------------------------------------------------------------
# image folders (ImageNet layout)


_LAYOUT = "expected class folders of JPEG/PNG images under DIR/train and DIR/val"


def _split_directory(root: str, split: str) -> str:
    """DIR/train or DIR/val of an image folder (ParameterError naming ``data_dir`` when missing)."""
    if not os.path.isdir(root):
        raise ParameterError("data_dir", f"{root}: no such directory ({_LAYOUT})")
    split_dir = os.path.join(root, IMAGE_FOLDER_SPLITS[split])
    if not os.path.isdir(split_dir):
        raise ParameterError(
            "data_dir", f"{root} has no {IMAGE_FOLDER_SPLITS[split]}/ folder for split {split!r} ({_LAYOUT})"
        )
    return split_dir


def _class_folders(root: str, split: str) -> list[str]:
    split_dir = _split_directory(root, split)
    classes = sorted(entry.name for entry in os.scandir(split_dir) if entry.is_dir())
    if not classes:
        raise ParameterError("data_dir", f"{split_dir} has no class folders (expected DIR/<class>/<image>)")
    return classes


class ImageFolderDataset(Dataset):
    """Class folders of JPEG/PNG images: ``root/<split folder>/<class>/<image>`` (the split's
    folder: train, or val for "test"), classes in sorted order.

    Items are ``(transform(image), class index)`` with ``image`` an RGB PIL image; an unreadable
    file gives ``(UnreadableImage(name, reason), class index)``. With ``encoded=True`` the items
    are ``(EncodedImage(bytes or decoded tensor, name), class index)`` and ``transform`` must be
    None (for decoding on the device).
    """

    def __init__(
        self, root: str, split: str, transform: Callable | None = None, encoded: bool = False
    ) -> None:
        if encoded and transform is not None:
            raise ParameterError(
                "transform", "must be None when encoded=True (images are decoded on the device)"
            )
        self.classes = _class_folders(root, split)
        root = self.root = _split_directory(root, split)
        self.transform = transform
        self.encoded = encoded
        self.samples: list[tuple[str, int]] = []
        for index, class_name in enumerate(self.classes):
            class_dir = os.path.join(root, class_name)
            for dirpath, _dirnames, filenames in sorted(os.walk(class_dir, followlinks=True)):
                for filename in sorted(filenames):
                    if filename.lower().endswith(IMAGE_EXTENSIONS):
                        relative = os.path.relpath(os.path.join(dirpath, filename), root)
                        self.samples.append((relative, index))
        if not self.samples:
            raise ParameterError(
                "data_dir",
                f"{root} has no images (expected {', '.join(IMAGE_EXTENSIONS)} files in its class folders)",
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


class FashionMNIST(Dataset):
    """Fashion-MNIST (Xiao et al. 2017) from its four IDX files, gzipped or not.

    train: 60000 images, test: 10000; 28x28 grayscale, 10 classes. Items are
    ``(transform(image), label)`` with ``image`` a PIL image of mode "L".
    """

    def __init__(self, directory: str, split: str, transform: Callable | None = None) -> None:
        prefix = "train" if split == "train" else "t10k"
        images_path = find_idx(directory, f"{prefix}-images-idx3-ubyte")
        labels_path = find_idx(directory, f"{prefix}-labels-idx1-ubyte")
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
        raise ParameterError(
            "data_dir", f"{root}: no such directory (the root of {name}, or with download: where to put it)"
        )
    try:
        if name == "cifar10":
            return torchvision.datasets.CIFAR10(
                root, train=split == "train", transform=transform, download=download
            )
        return torchvision.datasets.STL10(root, split=split, transform=transform, download=download)
    except RuntimeError as error:  # torchvision: "Dataset not found or corrupted. ..."
        raise ParameterError(
            "data_dir",
            f"{root} does not hold {name} in torchvision's layout, or holds it damaged (download fetches it)",
        ) from error


# ----------------------------------------------------------------------------------------------
# the entry point


def pretraining_split(dataset: str) -> str:
    """The split a pretraining run on ``dataset`` trains on (:data:`PRETRAINING_SPLITS`, else train)."""
    return PRETRAINING_SPLITS.get(dataset, "train")


def load_dataset(
    dataset: str,
    split: str,
    data_dir: str | os.PathLike | None = None,
    transform: Callable | None = None,
    download: bool = False,
    *,
    encoded: bool = False,
    **synthetic_options: int,
) -> Dataset:
    """Open ``dataset`` (one of :data:`DATASETS`), ``split`` "train" or "test" (for stl10 also
    "unlabeled" and "train+unlabeled", whose unlabeled images have the label -1).

    imagefolder: ``data_dir``/train for "train", ``data_dir``/val for "test" (ImageNet layout).
        ``encoded=True`` hands JPEG bytes over undecoded (see :class:`ImageFolderDataset`).
    cifar10, stl10: torchvision's classes reading from the local root ``data_dir``; nothing is
        downloaded unless ``download`` is True.
    fashion-mnist: the IDX files (gzipped or not) in ``data_dir``, by default
        :data:`FASHION_MNIST_DIR` where the Debian package dataset-fashion-mnist puts them.
    synthetic: :class:`SyntheticImages` with options size, image_size, num_classes, channels,
        seed (``data_dir`` is ignored).

    Items are ``(transform(image), label)``. Every check (name, split, directories, files) is
    made here, before any item is read; a ParameterError names the parameter at fault
    (``dataset``, ``split``, ``data_dir``, ...), the value and what is expected.
    """
    name = checks.choice("dataset", dataset, DATASETS)
    checks.choice("split", split, SPLITS + STL10_UNLABELED_SPLITS if name == "stl10" else SPLITS)
    if encoded and name != "imagefolder":
        raise ParameterError("encoded", f"is for dataset imagefolder only, not {name!r}")
    if name == "synthetic":
        return SyntheticImages(split, transform, **_synthetic_options(synthetic_options))
    if synthetic_options:
        raise ParameterError(
            f"synthetic option {sorted(synthetic_options)[0]}", f"is for dataset synthetic only, not {name!r}"
        )
    if name == "fashion-mnist":
        directory = os.fspath(data_dir) if data_dir is not None else FASHION_MNIST_DIR
        if not os.path.isdir(directory):
            default = (
                " (the default: install the Debian package dataset-fashion-mnist)" if data_dir is None else ""
            )
            raise ParameterError(
                "data_dir", f"{directory}: no such directory{default}; expected the Fashion-MNIST IDX files"
            )
        return FashionMNIST(directory, split, transform)
    if data_dir is None:
        raise ParameterError("data_dir", f"must be given for dataset {name} (the directory that holds it)")
    if name == "imagefolder":
        return ImageFolderDataset(os.fspath(data_dir), split, transform, encoded=encoded)
    return _torchvision_dataset(name, split, os.fspath(data_dir), transform, download)
