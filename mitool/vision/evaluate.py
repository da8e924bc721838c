"""Evaluation of a pretrained encoder: the kNN classifier on frozen features, used both by the
online monitor during pretraining and by ``mitool vision knn``, and the loading of a pretraining
checkpoint's backbone (also for :mod:`mitool.vision.linear`).

The encoder evaluated is the query backbone (its pooled features, before the projection head),
in eval mode. Memory: the train split; scored: the test split (ImageNet layout: DIR/val); both
through the dataset's evaluation transform (no augmentation). The encoder runs under autocast
(bf16 on CUDA by default; the similarities are float32). Under DDP every rank extracts the
features of a contiguous share of each split; the queries are gathered, each rank finds their k
nearest in its share of the memory, and the W k candidates are merged into the k nearest of the
whole memory (:func:`mitool.vision.knn.merge_neighbours`): the result of one process, with the
work split W ways and the memory never gathered. :func:`knn_of_checkpoint` records
its result in the run's folder (OUT/evaluations.json, :mod:`mitool.vision.records`), where
``mitool vision plot`` finds it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset, Subset

from mitool import checks
from mitool.vision import checkpoint as checkpoints
from mitool.vision import distributed
from mitool.vision.augment import eval_transform
from mitool.vision.backbones import build_backbone
from mitool.vision.choices import KNN_K, KNN_TEMPERATURE
from mitool.vision.datasets import DatasetInfo, dataset_info, load_dataset
from mitool.vision.knn import extract_features, knn_neighbours, knn_votes, merge_neighbours, top_k_accuracy
from mitool.vision.loader import SkippedImages, make_loader
from mitool.vision.records import add_evaluation

__all__ = [
    "Pretrained",
    "evaluate_knn",
    "evaluation_data",
    "knn_of_checkpoint",
    "load_backbone",
    "load_pretrained",
    "spread_subset",
]


def spread_subset(dataset: Dataset, limit: int | None) -> Dataset:
    """At most ``limit`` items of ``dataset``, evenly spaced over it (every class of a dataset
    whose labels cycle or are sorted stays represented); the dataset itself when it is smaller."""
    size = len(dataset)  # type: ignore[arg-type]
    if limit is None or limit >= size:
        return dataset
    return Subset(dataset, torch.linspace(0, size - 1, limit).round().long().tolist())


def evaluate_knn(
    backbone: nn.Module,
    dataset: str,
    data_dir: str | None,
    image_size: int,
    device: torch.device,
    k: int = KNN_K,
    temperature: float = KNN_TEMPERATURE,
    batch_size: int = 256,
    workers: int | None = None,
    max_samples: int | None = None,
    progress: bool = False,
    synthetic_options: dict[str, int] | None = None,
    precision: str | None = None,
) -> dict[str, Any]:
    """kNN top-1 and top-5 (fractions) of ``backbone``'s features: train split as memory, test
    split scored, each capped at ``max_samples`` evenly spaced items. ``precision``: the autocast
    of the feature extraction ("fp32", "bf16", "fp16"; None: bf16 on CUDA, fp32 elsewhere). Under
    DDP every rank must call it (see the module docstring; ``backbone`` the same on every rank).
    Returns a dict with knn_top1, knn_top5, memory_size, query_size, skipped (unreadable images
    left out, on all ranks)."""
    options = synthetic_options or {}
    info = dataset_info(dataset, data_dir, **options)
    transform = eval_transform(info, image_size)
    precision = precision or ("bf16" if device.type == "cuda" else "fp32")
    skipped = SkippedImages()
    features = {}
    for split in ("train", "test"):
        data = spread_subset(load_dataset(dataset, split, data_dir, transform, **options), max_samples)
        data = _share(data)
        loader = make_loader(data, batch_size, shuffle=False, workers=workers, seed=0, drop_last=False)
        batches = _recording(loader, skipped)
        label = f"kNN {'memory' if split == 'train' else 'queries'}"
        features[split] = extract_features(
            backbone, batches, device, len(loader), label, progress, precision, allow_empty=True
        )
    (memory, memory_labels), (queries, query_labels) = features["train"], features["test"]
    width = distributed.max_over_ranks(max(memory.shape[1], queries.shape[1]))  # a share may be empty
    memory_size = distributed.sum_over_ranks(memory.shape[0])
    if memory_size == 0 or distributed.sum_over_ranks(queries.shape[0]) == 0:
        raise ValueError("no readable images to compute features from")
    memory = memory if memory.shape[0] else memory.new_zeros(0, width)
    queries = queries if queries.shape[0] else queries.new_zeros(0, width)
    queries, query_labels = distributed.gather_rows(queries), distributed.gather_rows(query_labels)
    similarity, labels = knn_neighbours(queries, memory, memory_labels, k)
    if distributed.is_distributed():  # the k nearest of each rank's share, side by side, then the k best
        pad = k - similarity.shape[1]
        similarity = F.pad(similarity, (0, pad), value=float("-inf"))
        labels = F.pad(labels, (0, pad))
        similarity = torch.cat(distributed.gather_parts(similarity), dim=1)
        labels = torch.cat(distributed.gather_parts(labels), dim=1)
        similarity, labels = merge_neighbours(similarity, labels, k)
    top1, top5 = top_k_accuracy(knn_votes(similarity, labels, info.num_classes, temperature), query_labels)
    return {
        "knn_top1": top1,
        "knn_top5": top5,
        "k": k,
        "temperature": temperature,
        "memory_size": memory_size,
        "query_size": int(queries.shape[0]),
        "skipped": distributed.sum_over_ranks(skipped.count),
    }


def _share(dataset: Dataset) -> Dataset:
    """This rank's contiguous share of ``dataset`` (the whole of it on one process); rank r of W
    gets items [r n / W, (r + 1) n / W), so the shares in rank order are the dataset in order."""
    world, rank = distributed.world_size(), distributed.rank()
    if world == 1:
        return dataset
    size = len(dataset)  # type: ignore[arg-type]
    return Subset(dataset, range(rank * size // world, (rank + 1) * size // world))


def _recording(loader, skipped: SkippedImages):
    for inputs, labels, names in loader:
        skipped.add(names)
        yield inputs, labels, names


@dataclass(frozen=True)
class Pretrained:
    """The query backbone of a pretraining checkpoint (eval mode, on the device), its feature
    width, the run's settings (a dict), the DatasetInfo it was trained on, and where the run was:
    ``step`` and ``epoch`` (epochs done, as in the run's records)."""

    backbone: nn.Module
    feature_width: int
    config: dict[str, Any]
    info: DatasetInfo
    step: int
    epoch: float


def load_pretrained(checkpoint: str, device: torch.device) -> Pretrained:
    """The :class:`Pretrained` of the checkpoint file ``checkpoint`` (ParameterError naming
    ``checkpoint`` for a missing, damaged or foreign file)."""
    state = checkpoints.load(checkpoint, map_location="cpu", kind="pretrain")
    config = state["config"]
    info = DatasetInfo(**state["dataset_info"])
    backbone, feature_width = build_backbone(
        config["arch"], info.channels, config["small_stem"], config["zero_init_residual"]
    )
    prefix = "backbone."
    weights = {key[len(prefix) :]: value for key, value in state["model"].items() if key.startswith(prefix)}
    backbone.load_state_dict(weights)
    steps_per_epoch = state["schedule"]["total_steps"] / config["epochs"]
    epoch = round(state["epoch"] + state["data_order"]["batches_done"] / steps_per_epoch, 4)
    backbone = backbone.to(device, memory_format=torch.channels_last).eval()
    return Pretrained(backbone, feature_width, config, info, state["step"], epoch)


def load_backbone(path: str, device: torch.device) -> tuple[nn.Module, int, dict[str, Any], DatasetInfo]:
    """(backbone, feature width, the run's config, DatasetInfo) of :func:`load_pretrained`."""
    pretrained = load_pretrained(path, device)
    return pretrained.backbone, pretrained.feature_width, pretrained.config, pretrained.info


def evaluation_data(
    config: dict[str, Any], dataset: str | None, data_dir: str | None
) -> tuple[str, str | None, dict[str, int]]:
    """The dataset an evaluation of the run ``config`` reads: its name, its directory and its
    synthetic options, the run's own unless ``dataset`` or ``data_dir`` are given."""
    name = dataset or config["dataset"]
    directory = data_dir or (config["data_dir"] if name == config["dataset"] else None)
    synthetic = (
        {"size": config["synthetic_size"]} if name == "synthetic" and config.get("synthetic_size") else {}
    )
    return name, directory, synthetic


def knn_of_checkpoint(
    checkpoint: str,
    dataset: str | None = None,
    data_dir: str | None = None,
    image_size: int | None = None,
    device: str = "cpu",
    k: int = KNN_K,
    temperature: float = KNN_TEMPERATURE,
    batch_size: int = 256,
    workers: int | None = None,
    max_samples: int | None = None,
    progress: bool = False,
    record: bool = True,
) -> dict[str, Any]:
    """:func:`evaluate_knn` of the query backbone in ``checkpoint`` on the run's dataset (or the
    one given); with ``record`` the result, with the checkpoint's step and epoch, is added to the
    run's OUT/evaluations.json (the checkpoint's folder); ``workers`` None: sized to the free
    cores (:func:`mitool.vision.loader.default_workers`). Returns the result, plus ``step``,
    ``epoch`` and ``recorded_in`` (the file, or None)."""
    checks.whole_number("k", k, minimum=1)
    checks.positive("temperature", temperature)
    checks.whole_number("batch_size", batch_size, minimum=1)
    if workers is not None:
        checks.whole_number("workers", workers, minimum=0)
    if max_samples is not None:
        checks.whole_number("max_samples", max_samples, minimum=1)
    distributed.use_fast_kernels(torch.device(device))
    pretrained = load_pretrained(checkpoint, torch.device(device))
    name, directory, synthetic = evaluation_data(pretrained.config, dataset, data_dir)
    size = image_size or pretrained.config["image_size"]
    result = evaluate_knn(
        pretrained.backbone, name, directory, size, torch.device(device), k, temperature, batch_size, workers,
        max_samples, progress=progress, synthetic_options=synthetic,
    )  # fmt: skip
    result = {**result, "step": pretrained.step, "epoch": pretrained.epoch, "dataset": name}
    recorded = None
    if record:
        entry = {"kind": "knn", **result, "checkpoint": os.path.abspath(checkpoint)}
        recorded = add_evaluation(os.path.dirname(os.path.abspath(checkpoint)), entry)
    return {**result, "recorded_in": recorded}
