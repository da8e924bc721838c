"""Evaluation of a pretrained encoder: the kNN classifier on frozen features, used both by the
online monitor during pretraining and by ``mitool vision knn``.

The encoder evaluated is the query backbone (its pooled features, before the projection head),
in eval mode. Memory: the train split; scored: the test split (ImageNet layout: DIR/val); both
through the dataset's evaluation transform (no augmentation).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset, Subset

from mitool.vision import checkpoint as checkpoints
from mitool.vision.augment import eval_transform
from mitool.vision.backbones import build_backbone
from mitool.vision.data import DatasetInfo, SkippedImages, dataset_info, load_dataset, make_loader
from mitool.vision.knn import extract_features, knn_accuracy

__all__ = ["evaluate_knn", "load_backbone", "spread_subset"]


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
    k: int = 200,
    temperature: float = 0.1,
    batch_size: int = 256,
    workers: int = 0,
    max_samples: int | None = None,
    progress: bool = False,
    synthetic_options: dict[str, int] | None = None,
) -> dict[str, Any]:
    """kNN top-1 and top-5 (fractions) of ``backbone``'s features: train split as memory, test
    split scored, each capped at ``max_samples`` evenly spaced items. Returns a dict with
    knn_top1, knn_top5, memory_size, query_size, skipped (unreadable images left out)."""
    options = synthetic_options or {}
    info = dataset_info(dataset, data_dir, **options)
    transform = eval_transform(info, image_size)
    skipped = SkippedImages()
    features = {}
    for split in ("train", "test"):
        data = spread_subset(load_dataset(dataset, split, data_dir, transform, **options), max_samples)
        loader = make_loader(data, batch_size, shuffle=False, num_workers=workers, seed=0, drop_last=False)
        batches = _recording(loader, skipped)
        label = f"kNN {'memory' if split == 'train' else 'queries'}"
        features[split] = extract_features(backbone, batches, device, len(loader), label, progress)
    (memory, memory_labels), (queries, query_labels) = features["train"], features["test"]
    top1, top5 = knn_accuracy(queries, query_labels, memory, memory_labels, info.num_classes, k, temperature)
    return {
        "knn_top1": top1,
        "knn_top5": top5,
        "k": k,
        "temperature": temperature,
        "memory_size": int(memory.shape[0]),
        "query_size": int(queries.shape[0]),
        "skipped": skipped.count,
    }


def _recording(loader, skipped: SkippedImages):
    for inputs, labels, names in loader:
        skipped.add(names)
        yield inputs, labels, names


def load_backbone(path: str, device: torch.device) -> tuple[nn.Module, int, dict[str, Any], DatasetInfo]:
    """The query backbone of a pretraining checkpoint, in eval mode on ``device``, its feature
    width, the run's config (a dict) and the DatasetInfo it was trained on. ValueError for a
    damaged or foreign file."""
    state = checkpoints.load(path, map_location="cpu", kind="pretrain")
    config = state["config"]
    info = DatasetInfo(**state["dataset_info"])
    backbone, feature_width = build_backbone(
        config["arch"], info.channels, config["small_stem"], config["zero_init_residual"]
    )
    prefix = "backbone."
    weights = {key[len(prefix) :]: value for key, value in state["model"].items() if key.startswith(prefix)}
    backbone.load_state_dict(weights)
    return backbone.to(device, memory_format=torch.channels_last).eval(), feature_width, config, info
