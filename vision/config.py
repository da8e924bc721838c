"""The settings of a pretraining run, the per-method defaults from the papers, and the model builder.

Per-method defaults (what an option left unset becomes; see :data:`METHOD_DEFAULTS`):

======== ======== ============ ======= ===== ======= ======== ======== ===================
method   loss     negatives K  alpha   tau   base lr warmup   key m    batch / epochs
======== ======== ============ ======= ===== ======= ======== ======== ===================
moco     infonce  65536 queue  -       0.2   0.03    0        0.999    256 / 200
simo     eqco     16 sampled   256     0.2   0.03    5 ep.    0.999    256 / 200
simclr   infonce  2N - 2 batch -       0.1   0.3     10 ep.   -        256 / 200
======== ======== ============ ======= ===== ======= ======== ======== ===================

MoCo v2 (Chen et al. 2020) and SiMo (the EqCo paper's released configuration): SGD lr 0.03 at
batch 256, tau 0.2, m 0.999, 200 epochs; the SiMo paper uses a warmup without stating its length
(5 epochs here, our choice). SimCLR (Chen et al. 2020): lr 0.3 x batch / 256 with 10 warmup
epochs and tau 0.1 (SimCLR trains with LARS; here plain SGD); the DCL paper's ImageNet runs are
batch 256, 200 epochs. All methods: SGD momentum 0.9, weight decay 1e-4, cosine decay after the
warmup, lr = base_lr x global_batch / 256.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from mitool import bounds
from mitool.vision import distributed
from mitool.vision.backbones import ARCHITECTURES, build_backbone, split_batch_norm
from mitool.vision.moco import MoCo
from mitool.vision.simclr import SimCLR
from mitool.vision.simo import SiMo

__all__ = [
    "LOSSES",
    "METHODS",
    "METHOD_DEFAULTS",
    "GPU_AUGMENT_MODES",
    "PretrainConfig",
    "build_method",
    "resolve_defaults",
]

METHODS: tuple[str, ...] = ("moco", "simo", "simclr")
LOSSES: tuple[str, ...] = bounds.INFONCE_FAMILY
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16")
BN_MODES: tuple[str, ...] = ("shuffle", "sync")
GPU_AUGMENT_MODES: tuple[str, ...] = ("off", "decode", "jpeg")
"""Where the two views are made: "off" in the loader workers (torchvision on the CPU); "decode"
workers decode, the views are made on the run's device (:mod:`mitool.vision.gpu_augment`); "jpeg" workers
read the JPEG bytes, decoded and augmented on the device (imagefolder only)."""

METHOD_DEFAULTS: dict[str, dict[str, object]] = {
    "moco": dict(loss="infonce", negatives=65536, temperature=0.2, base_lr=0.03, warmup_epochs=0.0),
    "simo": dict(loss="eqco", negatives=16, temperature=0.2, base_lr=0.03, warmup_epochs=5.0),
    "simclr": dict(loss="infonce", negatives=None, temperature=0.1, base_lr=0.3, warmup_epochs=10.0),
}
"""Defaults that differ between the methods; every other default is a field default below."""

DEFAULT_ALPHA = 256.0
"""EqCo's alpha when the eqco bound is chosen and --alpha is not given (SiMo's batch-256 setting)."""


@dataclass
class PretrainConfig:
    """Everything that defines a pretraining run. ``None`` means: the method's default
    (:data:`METHOD_DEFAULTS`), or for image_size the dataset's own size, for small_stem "yes for
    images of 96 pixels or less", for precision "bf16 on CUDA, fp32 on CPU"."""

    method: str = "moco"
    loss: str | None = None
    negatives: int | None = None
    alpha: float | None = None
    sigma: float = 0.5
    temperature: float | None = None
    arch: str = "resnet50"
    dataset: str = "imagefolder"
    data_dir: str | None = None
    image_size: int | None = None
    epochs: int = 200
    batch_size: int = 256
    out: str = "runs/pretrain"
    max_steps: int | None = None
    max_minutes: float | None = None
    device: str = "cpu"
    workers: int = 4
    base_lr: float | None = None
    warmup_epochs: float | None = None
    weight_decay: float = 1e-4
    sgd_momentum: float = 0.9
    key_momentum: float = 0.999
    symmetric: bool = False
    bn_mode: str = "shuffle"
    bn_splits: int = 8
    small_stem: bool | None = None
    zero_init_residual: bool = False
    embedding_dim: int = 128
    precision: str | None = None
    compile: bool = False
    checkpoint_every: int = 1000
    log_every: int = 10
    knn_every: int = 10
    knn_k: int = 200
    knn_temperature: float = 0.1
    knn_max_samples: int | None = None
    seed: int = 0
    download: bool = False
    synthetic_size: int | None = None
    gpu_augment: str = "off"

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def _check_choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")


def _check_at_least(name: str, value: float | None, low: float, strict: bool = False) -> None:
    if value is None:
        return
    if value < low or (strict and value == low):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {low}, got {value}")


def resolve_defaults(config: PretrainConfig, native_image_size: int | None = None) -> PretrainConfig:
    """A copy of ``config`` with every ``None`` replaced by its default, checked; ValueError
    naming the option and the allowed values on bad input."""
    _check_choice("method", config.method, METHODS)
    defaults = METHOD_DEFAULTS[config.method]
    values = {key: getattr(config, key) if getattr(config, key) is not None else default
              for key, default in defaults.items()}  # fmt: skip
    _check_choice("loss", values["loss"], LOSSES)
    if config.method == "simclr" and config.negatives is not None:
        raise ValueError(
            "negatives does not apply to simclr (it uses all 2N - 2 in-batch negatives); leave it out"
        )
    alpha = config.alpha
    if values["loss"] == "eqco" and alpha is None:
        alpha = DEFAULT_ALPHA
    if values["loss"] != "eqco" and alpha is not None:
        raise ValueError(f"alpha applies to the eqco loss only, not {values['loss']!r}")
    _check_choice("arch", config.arch, ARCHITECTURES)
    _check_choice("device", config.device, ("cpu", "cuda"))
    _check_choice("bn_mode", config.bn_mode, BN_MODES)
    _check_choice("gpu_augment", config.gpu_augment, GPU_AUGMENT_MODES)
    if config.gpu_augment == "jpeg" and config.dataset != "imagefolder":
        raise ValueError(
            f"gpu_augment jpeg is for dataset imagefolder only (use decode for {config.dataset})"
        )
    precision = config.precision or ("bf16" if config.device == "cuda" else "fp32")
    _check_choice("precision", precision, PRECISIONS)
    if precision == "fp16" and config.device != "cuda":
        raise ValueError("precision fp16 needs device cuda (use fp32 or bf16 on cpu)")
    image_size = config.image_size or native_image_size
    for name in (
        "epochs",
        "batch_size",
        "bn_splits",
        "embedding_dim",
        "checkpoint_every",
        "log_every",
        "knn_k",
    ):
        _check_at_least(name, getattr(config, name), 1)
    _check_at_least("batch_size", config.batch_size, 2)
    _check_at_least("image_size", image_size, 8)
    _check_at_least("max_steps", config.max_steps, 1)
    _check_at_least("max_minutes", config.max_minutes, 0, strict=True)
    _check_at_least("workers", config.workers, 0)
    _check_at_least("knn_every", config.knn_every, 0)
    _check_at_least("knn_max_samples", config.knn_max_samples, 1)
    _check_at_least("negatives", values["negatives"], 1)
    _check_at_least("warmup_epochs", values["warmup_epochs"], 0)
    _check_at_least("weight_decay", config.weight_decay, 0)
    positive = {
        "temperature": values["temperature"],
        "base_lr": values["base_lr"],
        "alpha": alpha,
        "sigma": config.sigma,
        "knn_temperature": config.knn_temperature,
    }
    for name, value in positive.items():
        _check_at_least(name, value, 0, strict=True)
    for name, value in (("key_momentum", config.key_momentum), ("sgd_momentum", config.sgd_momentum)):
        if not 0 <= value < 1:
            raise ValueError(f"{name} must be in [0, 1), got {value}")
    small_stem = config.small_stem if config.small_stem is not None else (image_size or 224) <= 96
    return dataclasses.replace(
        config, alpha=alpha, precision=precision, image_size=image_size, small_stem=small_stem, **values
    )


def bound_for(config: PretrainConfig) -> Callable:
    """``mitool.bounds.get`` for the config's loss with its options (alpha; sigma and tau for dclw):
    the bound SimCLR applies to its in-batch scores."""
    if config.loss == "eqco":
        return bounds.get("eqco", alpha=config.alpha)
    if config.loss == "dclw":
        return bounds.get("dclw", sigma=config.sigma, temperature=config.temperature)
    return bounds.get(config.loss)


def bound_options_for(config: PretrainConfig) -> dict[str, float]:
    """The options MoCo and SiMo pass with the loss's name to ``mitool.fused.contrastive_bound``:
    alpha for eqco, sigma for dclw (whose temperature is the method's), none otherwise."""
    if config.loss == "eqco":
        return {"alpha": config.alpha}
    if config.loss == "dclw":
        return {"sigma": config.sigma}
    return {}


def build_method(config: PretrainConfig, in_channels: int, device: torch.device) -> nn.Module:
    """The method's module (query encoder, head, and the momentum encoder and queue where the
    method has them) on ``device`` in channels_last layout, with BatchNorm set up for the run:
    split-BN (moco, shuffle mode, one process), synchronised BN (simo and simclr always, moco in
    sync mode) when several processes run. ``config`` must have gone through resolve_defaults."""
    several = distributed.world_size() > 1
    norm_layer = None
    if config.method == "moco" and config.bn_mode == "shuffle" and not several and config.bn_splits > 1:
        norm_layer = split_batch_norm(config.bn_splits)

    def make_backbone() -> tuple[nn.Module, int]:
        return build_backbone(
            config.arch, in_channels, config.small_stem, config.zero_init_residual, norm_layer
        )

    if config.method == "moco":
        model: nn.Module = MoCo(
            make_backbone, config.loss, bound_options_for(config), config.temperature, config.negatives,
            config.key_momentum, config.embedding_dim, config.symmetric,
            shuffle_bn=config.bn_mode == "shuffle",
        )  # fmt: skip
    elif config.method == "simo":
        model = SiMo(
            make_backbone, config.loss, bound_options_for(config), config.temperature, config.negatives,
            config.key_momentum, config.embedding_dim,
        )  # fmt: skip
    else:
        model = SimCLR(make_backbone, bound_for(config), config.temperature, config.embedding_dim)
    if config.method != "moco" or config.bn_mode == "sync":
        model = distributed.synchronise_batch_norm(model, device)
    return model.to(device, memory_format=torch.channels_last)
