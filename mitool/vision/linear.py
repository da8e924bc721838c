"""The linear evaluation protocol: a linear classifier trained on the frozen, pooled features.

MoCo's setting (He et al. 2020, section 4.1) is the default: the backbone in eval mode (BatchNorm
uses its running statistics, no gradient), a Linear(w, classes) layer (weights N(0, 0.01), bias
0) trained with cross-entropy by SGD at lr 30 (batch 256, momentum 0.9, weight decay 0) for 100
epochs, the lr divided by 10 at epochs 60 and 80; train images through MoCo's main_lincls
transform (RandomResizedCrop, horizontal flip, to tensor, normalise:
:func:`mitool.vision.augment.linear_train_transform`), test images through the evaluation
transform (ImageNet size: resize to 256 / 224 of the crop, centre crop). ``augment=False``
computes the features once (through the evaluation transform) and trains on them (much faster on
a CPU; the usual choice for small images). The loss shown by the progress bar is the mean since
the last note, read every :data:`NOTE_EVERY` steps (reading it every step would wait for the
device every step).

Results: top-1 and top-5 accuracy on the test split (fractions), in OUT/linear.json and in the
pretraining run's OUT/evaluations.json (with the checkpoint's step and epoch). The layer,
the optimizer, the epoch and the RNG states go to OUT/linear.pt after every epoch (atomically);
``resume`` continues from there.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import Dataset

from mitool import checks
from mitool._infra.files import atomic_write_json
from mitool._infra.progress import Progress
from mitool.vision import checkpoint as checkpoints
from mitool.vision import distributed
from mitool.vision.augment import eval_transform, linear_train_transform
from mitool.vision.config import LinearConfig
from mitool.vision.datasets import load_dataset
from mitool.vision.evaluate import evaluation_data, load_pretrained
from mitool.vision.knn import extract_features
from mitool.vision.loader import default_workers, make_loader
from mitool.vision.records import add_evaluation

__all__ = ["LinearConfig", "linear_evaluation"]

CHECKPOINT_NAME = "linear.pt"
RESULT_NAME = "linear.json"
NOTE_EVERY = 50
"""Steps between the progress bar's loss notes (each a read of the device)."""


def _check(config: LinearConfig) -> None:
    """ParameterError naming the first setting out of range."""
    for name in ("epochs", "batch_size"):
        checks.whole_number(name, getattr(config, name), minimum=1)
    if config.max_epochs is not None:
        checks.whole_number("max_epochs", config.max_epochs, minimum=1)
    checks.positive("lr", config.lr)
    checks.number("weight_decay", config.weight_decay, minimum=0.0)
    checks.number("momentum", config.momentum, minimum=0.0, below=1.0)
    if config.workers is not None:
        checks.whole_number("workers", config.workers, minimum=0)
    for milestone in config.milestones:
        checks.whole_number("milestones", milestone, minimum=1)
    checks.choice("device", config.device, ("cpu", "cuda"))
    if config.device == "cuda" and not torch.cuda.is_available():
        raise checks.ParameterError("device", "cuda was asked for but no CUDA GPU is available; use cpu")


def step_decay(epoch: int, base_lr: float, milestones: tuple[int, ...]) -> float:
    """base_lr * 0.1 ** (number of milestones <= epoch), epochs counted from 0."""
    return base_lr * 0.1 ** sum(epoch >= milestone for milestone in milestones)


def _top_k(logits: Tensor, labels: Tensor) -> tuple[float, float]:
    ranked = logits.topk(min(5, logits.shape[1]), dim=1).indices
    hits = ranked == labels[:, None]
    return float(hits[:, 0].float().mean()), float(hits.any(dim=1).float().mean())


def linear_evaluation(config: LinearConfig, resume: bool = False, progress: bool = True) -> dict[str, Any]:
    """Train and test the linear classifier; returns (and writes to OUT/linear.json) a dict with
    top1, top5 (test split), epochs and the settings. The result is also added to the
    pretraining run's OUT/evaluations.json (the checkpoint's folder), for ``mitool vision plot``."""
    _check(config)
    if config.workers is None:
        config = dataclasses.replace(config, workers=default_workers())
    device = torch.device(config.device)
    distributed.use_fast_kernels(device)
    pretrained = load_pretrained(config.checkpoint, device)
    dataset, data_dir, synthetic = evaluation_data(pretrained.config, config.dataset, config.data_dir)
    image_size = config.image_size or pretrained.config["image_size"]
    test_transform = eval_transform(pretrained.info, image_size)
    train_transform = test_transform
    if config.augment:
        train_transform = linear_train_transform(pretrained.info, image_size)
    train_set = load_dataset(dataset, "train", data_dir, train_transform, **synthetic)
    test_set = load_dataset(dataset, "test", data_dir, test_transform, **synthetic)
    torch.manual_seed(config.seed)
    classifier = nn.Linear(pretrained.feature_width, pretrained.info.num_classes).to(device)
    nn.init.normal_(classifier.weight, std=0.01)
    nn.init.zeros_(classifier.bias)
    optimizer = torch.optim.SGD(
        classifier.parameters(), lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
    )
    start_epoch = _start(config, classifier, optimizer, resume)
    last_epoch = min(config.epochs, config.max_epochs or config.epochs)
    epochs = range(start_epoch, last_epoch)
    _train(config, pretrained.backbone, train_set, classifier, optimizer, epochs, device, progress)
    test_loader = make_loader(test_set, 512, False, config.workers, config.seed, drop_last=False)
    features, labels = extract_features(
        pretrained.backbone, test_loader, device, len(test_loader), "test features", progress
    )
    with torch.no_grad():
        top1, top5 = _top_k(classifier(features), labels)
    result = {
        "top1": top1,
        "top5": top5,
        "epochs": max(last_epoch, start_epoch),
        "settings": _settings(config),
    }
    atomic_write_json(os.path.join(config.out, RESULT_NAME), result)
    entry = {"kind": "linear", "step": pretrained.step, "epoch": pretrained.epoch, "top1": top1,
             "top5": top5, "linear_epochs": result["epochs"], "dataset": dataset,
             "out": os.path.abspath(config.out)}  # fmt: skip
    add_evaluation(os.path.dirname(os.path.abspath(config.checkpoint)), entry)
    return result


def _settings(config: LinearConfig) -> dict[str, Any]:
    return {key: list(v) if isinstance(v, tuple) else v for key, v in dataclasses.asdict(config).items()}


def _start(
    config: LinearConfig, classifier: nn.Module, optimizer: torch.optim.Optimizer, resume: bool
) -> int:
    """The first epoch to train: 0, or with ``resume`` the one after OUT/linear.pt's (whose
    classifier, optimizer and RNG states are put back); a finished run is not overwritten."""
    os.makedirs(config.out, exist_ok=True)
    path = os.path.join(config.out, CHECKPOINT_NAME)
    if not resume:
        if os.path.exists(path):
            raise checks.ParameterError(
                "out",
                f"{config.out} already holds a linear run ({CHECKPOINT_NAME}); resume it or choose another",
            )
        return 0
    state = checkpoints.load(path, kind="linear", parameter="resume")
    settings = _settings(config)
    changed = [key for key in ("checkpoint", "dataset", "epochs", "batch_size", "lr", "augment", "seed")
               if state["settings"][key] != settings[key]]  # fmt: skip
    if changed:
        key = changed[0]
        raise checks.ParameterError(
            "resume",
            f"continues the linear run in {config.out}, but option {key} differs (was "
            f"{state['settings'][key]!r}, now {settings[key]!r})",
        )
    classifier.load_state_dict(state["classifier"])
    optimizer.load_state_dict(state["optimizer"])
    checkpoints.restore_rng_states(state["rng"])
    return state["epoch"]


def _train(
    config: LinearConfig,
    backbone: nn.Module,
    train_set: Dataset,
    classifier: nn.Module,
    optimizer: torch.optim.Optimizer,
    epochs: range,
    device: torch.device,
    progress: bool,
) -> None:
    """The epochs of the protocol, OUT/linear.pt written after each. Without augmentation the
    features are computed once and the batches drawn from them in a (seed, epoch) order."""
    cached = None
    if not config.augment:
        loader = make_loader(train_set, 512, False, config.workers, config.seed, drop_last=False)
        cached = extract_features(backbone, loader, device, len(loader), "train features", progress)
    train_loader = make_loader(
        train_set, config.batch_size, True, config.workers, config.seed, drop_last=False
    )
    for epoch in epochs:
        for group in optimizer.param_groups:
            group["lr"] = step_decay(epoch, config.lr, config.milestones)
        if cached is not None:
            generator = torch.Generator().manual_seed(config.seed * 1_000_003 + epoch)
            order = torch.randperm(cached[0].shape[0], generator=generator).to(device)
            batches = [(cached[0][i], cached[1][i]) for i in order.split(config.batch_size)]
        else:
            train_loader.set_epoch(epoch)
            batches = _features_of(backbone, train_loader, device)
        with Progress(
            len(train_loader), f"linear epoch {epoch + 1}/{config.epochs}", enabled=progress
        ) as bar:
            losses, note = torch.zeros((), device=device), ""  # summed on the device, read now and then
            for index, (features, labels) in enumerate(batches, start=1):
                loss = F.cross_entropy(classifier(features), labels)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                losses += loss.detach()
                if progress and index % NOTE_EVERY == 0:
                    note = f"loss {float(losses) / NOTE_EVERY:.3f}"
                    losses.zero_()
                bar.update(note=note)
        state = {"kind": "linear", "settings": _settings(config), "classifier": classifier.state_dict(),
                 "optimizer": optimizer.state_dict(), "epoch": epoch + 1,
                 "rng": checkpoints.rng_states()}  # fmt: skip
        checkpoints.save(os.path.join(config.out, CHECKPOINT_NAME), state)


@torch.no_grad()
def _features_of(backbone: nn.Module, loader, device: torch.device):
    for inputs, labels, _skipped in loader:
        if inputs is None:
            continue
        images = inputs.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
        yield backbone(images).float(), labels.to(device)
