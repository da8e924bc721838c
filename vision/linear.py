"""The linear evaluation protocol: a linear classifier trained on the frozen, pooled features.

MoCo's setting (He et al. 2020, section 4.1) is the default: the backbone in eval mode (BatchNorm
uses its running statistics, no gradient), a Linear(w, classes) layer (weights N(0, 0.01), bias
0) trained with cross-entropy by SGD at lr 30 (batch 256, momentum 0.9, weight decay 0) for 100
epochs, the lr divided by 10 at epochs 60 and 80; train images augmented with RandomResizedCrop
and a horizontal flip, test images through the evaluation transform (ImageNet size: resize to
256 / 224 of the crop, centre crop). ``augment=False`` computes the features once and trains on
them (much faster on a CPU; the usual choice for small images).

Results: top-1 and top-5 accuracy on the test split (fractions), in OUT/linear.json. The layer,
the optimizer, the epoch and the RNG states go to OUT/linear.pt after every epoch (atomically);
``resume`` continues from there.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchvision.transforms import v2

from mitool.files import atomic_write_json
from mitool.progress import Progress
from mitool.vision import checkpoint as checkpoints
from mitool.vision.augment import eval_transform
from mitool.vision.data import load_dataset, make_loader
from mitool.vision.evaluate import load_backbone
from mitool.vision.knn import extract_features

__all__ = ["LinearConfig", "linear_evaluation"]

CHECKPOINT_NAME = "linear.pt"
RESULT_NAME = "linear.json"


@dataclass
class LinearConfig:
    """Settings of the linear protocol; dataset/data_dir/image_size ``None``: the pretraining run's.
    ``max_epochs`` stops early (the schedule still spans ``epochs``); resume continues."""

    checkpoint: str
    out: str
    dataset: str | None = None
    data_dir: str | None = None
    image_size: int | None = None
    epochs: int = 100
    max_epochs: int | None = None
    batch_size: int = 256
    lr: float = 30.0
    momentum: float = 0.9
    weight_decay: float = 0.0
    milestones: tuple[int, ...] = (60, 80)
    augment: bool = True
    workers: int = 4
    device: str = "cpu"
    seed: int = 0


def _check(config: LinearConfig) -> None:
    for name in ("epochs", "batch_size"):
        if getattr(config, name) < 1:
            raise ValueError(f"{name} must be >= 1, got {getattr(config, name)}")
    if config.max_epochs is not None and config.max_epochs < 1:
        raise ValueError(f"max_epochs must be >= 1, got {config.max_epochs}")
    if config.lr <= 0:
        raise ValueError(f"lr must be > 0, got {config.lr}")
    if config.weight_decay < 0 or not 0 <= config.momentum < 1:
        raise ValueError("weight_decay must be >= 0 and momentum in [0, 1)")
    if config.workers < 0:
        raise ValueError(f"workers must be >= 0, got {config.workers}")
    if any(m < 1 for m in config.milestones):
        raise ValueError(f"milestones must be epochs >= 1, got {config.milestones}")
    if config.device not in ("cpu", "cuda"):
        raise ValueError(f"device must be cpu or cuda, got {config.device!r}")
    if config.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device cuda was asked for but no CUDA GPU is available; use --device cpu")


def step_decay(epoch: int, base_lr: float, milestones: tuple[int, ...]) -> float:
    """base_lr * 0.1 ** (number of milestones <= epoch), epochs counted from 0."""
    return base_lr * 0.1 ** sum(epoch >= milestone for milestone in milestones)


def _top_k(logits: Tensor, labels: Tensor) -> tuple[float, float]:
    ranked = logits.topk(min(5, logits.shape[1]), dim=1).indices
    hits = ranked == labels[:, None]
    return float(hits[:, 0].float().mean()), float(hits.any(dim=1).float().mean())


def linear_evaluation(config: LinearConfig, resume: bool = False, progress: bool = True) -> dict[str, Any]:
    """Train and test the linear classifier; returns (and writes to OUT/linear.json) a dict with
    top1, top5 (test split), epochs and the settings."""
    _check(config)
    device = torch.device(config.device)
    backbone, feature_width, pretrain_config, info = load_backbone(config.checkpoint, device)
    dataset = config.dataset or pretrain_config["dataset"]
    data_dir = config.data_dir or (
        pretrain_config["data_dir"] if dataset == pretrain_config["dataset"] else None
    )
    image_size = config.image_size or pretrain_config["image_size"]
    synthetic = {}
    if dataset == "synthetic" and pretrain_config.get("synthetic_size"):
        synthetic = {"size": pretrain_config["synthetic_size"]}
    test_transform = eval_transform(info, image_size)
    train_transform = test_transform
    if config.augment:
        train_transform = v2.Compose(
            [v2.RandomResizedCrop(image_size, antialias=True), v2.RandomHorizontalFlip(), test_transform]
        )
    train_set = load_dataset(dataset, "train", data_dir, train_transform, **synthetic)
    test_set = load_dataset(dataset, "test", data_dir, test_transform, **synthetic)

    torch.manual_seed(config.seed)
    classifier = nn.Linear(feature_width, info.num_classes).to(device)
    nn.init.normal_(classifier.weight, std=0.01)
    nn.init.zeros_(classifier.bias)
    optimizer = torch.optim.SGD(
        classifier.parameters(), lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
    )
    os.makedirs(config.out, exist_ok=True)
    path = os.path.join(config.out, CHECKPOINT_NAME)
    settings = {key: list(v) if isinstance(v, tuple) else v for key, v in dataclasses.asdict(config).items()}
    start_epoch = 0
    if resume:
        state = checkpoints.load(path, kind="linear")
        changed = [k for k in ("checkpoint", "dataset", "epochs", "batch_size", "lr", "augment", "seed")
                   if state["settings"][k] != settings[k]]  # fmt: skip
        if changed:
            raise ValueError(f"--resume: option {changed[0]} differs from the run in {path}")
        classifier.load_state_dict(state["classifier"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = state["epoch"]
        checkpoints.restore_rng_states(state["rng"])
    elif os.path.exists(path):
        raise ValueError(f"out {config.out} already holds a linear run ({CHECKPOINT_NAME}); pass --resume")

    cached = None
    if not config.augment:
        loader = make_loader(train_set, 512, False, config.workers, config.seed, drop_last=False)
        cached = extract_features(backbone, loader, device, len(loader), "train features", progress)
    train_loader = make_loader(
        train_set, config.batch_size, True, config.workers, config.seed, drop_last=False
    )
    last_epoch = min(config.epochs, config.max_epochs or config.epochs)
    for epoch in range(start_epoch, last_epoch):
        for group in optimizer.param_groups:
            group["lr"] = step_decay(epoch, config.lr, config.milestones)
        if cached is not None:
            generator = torch.Generator().manual_seed(config.seed * 1_000_003 + epoch)
            order = torch.randperm(cached[0].shape[0], generator=generator).to(device)
            batches = [(cached[0][i], cached[1][i]) for i in order.split(config.batch_size)]
        else:
            train_loader.set_epoch(epoch)
            batches = _features_of(backbone, train_loader, device)
        bar = Progress(len(train_loader), f"linear epoch {epoch + 1}/{config.epochs}", enabled=progress)
        for features, labels in batches:
            loss = F.cross_entropy(classifier(features), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            bar.update(note=f"loss {loss.item():.3f}")
        bar.close()
        state = {
            "kind": "linear",
            "settings": settings,
            "classifier": classifier.state_dict(),
            "optimizer": optimizer.state_dict(),
            "epoch": epoch + 1,
            "rng": checkpoints.rng_states(),
        }
        checkpoints.save(path, state)

    test_loader = make_loader(test_set, 512, False, config.workers, config.seed, drop_last=False)
    features, labels = extract_features(
        backbone, test_loader, device, len(test_loader), "test features", progress
    )
    with torch.no_grad():
        top1, top5 = _top_k(classifier(features), labels)
    result = {"top1": top1, "top5": top5, "epochs": max(last_epoch, start_epoch), "settings": settings}
    atomic_write_json(os.path.join(config.out, RESULT_NAME), result)
    return result


@torch.no_grad()
def _features_of(backbone: nn.Module, loader, device: torch.device):
    for inputs, labels, _skipped in loader:
        if inputs is None:
            continue
        images = inputs.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
        yield backbone(images).float(), labels.to(device)
