"""The settings of a pretraining run, and how the unset ones get their values.

A setting left ``None`` in :class:`PretrainConfig` takes, in this order, the value its method
gives for the run's dataset (``dataset_defaults`` of the method's class), the method's own
default (``defaults``: the paper's values, see :mod:`mitool.vision.moco`,
:mod:`~mitool.vision.simo`, :mod:`~mitool.vision.simclr` and :mod:`~mitool.vision.nnclr`), then
:data:`DEFAULTS` below. The optimizer, left unset, is the method's for the run's global batch
(:meth:`mitool.vision.method_specs.MethodSpec.default_optimizer`: LARS for simclr and nnclr from
their ``lars_from_batch`` on, else SGD; a resumed run keeps its own); with LARS, :data:`LARS_DEFAULTS`
come before the dataset's and the method's rows. The loss's options (eqco's alpha, dclw's sigma) are those of
:data:`mitool.bounds.BOUNDS`, defaulted the same way. The methods themselves are looked up in
:data:`mitool.vision.method_specs.METHODS`.

All methods: momentum 0.9, cosine decay after the warmup, lr = base_lr x global_batch / 256, 200
epochs, global batch 256, embeddings of 128 (nnclr: 256); with SGD weight decay 1e-4, with LARS
SimCLR's base lr 0.3, weight decay 1e-6 and trust coefficient 0.001.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from mitool import bounds, checks
from mitool.settings import setting
from mitool.vision.choices import (
    ARCHITECTURES,
    DATASETS,
    DEVICE_AUGMENT_MODES,
    EMBEDDING_DIM,
    KNN_K,
    KNN_TEMPERATURE,
    LARS_TRUST_COEFFICIENT,
    OPTIMIZERS,
)
from mitool.vision.method_specs import METHODS, MethodSpec, method_spec

__all__ = [
    "BN_MODES",
    "DEFAULTS",
    "DEVICES",
    "GPU_AUGMENT_MODES",
    "LARS_DEFAULTS",
    "LOSSES",
    "LOSS_OPTION_SETTINGS",
    "METHODS",
    "PRECISIONS",
    "RESUMABLE_CHANGES",
    "LinearConfig",
    "PretrainConfig",
    "default_gpu_augment",
    "resolve_defaults",
]

LOSSES: tuple[str, ...] = bounds.INFONCE_FAMILY
LOSS_OPTION_SETTINGS: tuple[str, ...] = tuple(
    dict.fromkeys(
        option.name
        for name in LOSSES
        for option in bounds.BOUNDS[name].options
        if not option.score_temperature
    )
)
"""The settings that are options of a loss (from the table of bounds: eqco's alpha, dclw's sigma)."""
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16")
DEVICES: tuple[str, ...] = ("cpu", "cuda")
BN_MODES: tuple[str, ...] = ("shuffle", "sync")
GPU_AUGMENT_MODES: tuple[str, ...] = ("off", *DEVICE_AUGMENT_MODES)
"""Where the two views are made: "off" in the loader workers (torchvision on the CPU); "decode"
workers decode, the views are made on the run's device (:mod:`mitool.vision.gpu_augment`); "jpeg" workers
read the JPEG bytes, decoded and augmented on the device (imagefolder only). Unset: "decode" on
CUDA (on one H200 with 8-15 workers the CPU pipeline made 100-150 two-view images/s at 224 px,
the device path about 1000-1500, and a ResNet-50 step about 3000: docs/data.md), "off" on the
CPU (:func:`default_gpu_augment`)."""

DEFAULTS: dict[str, Any] = dict(
    epochs=200, batch_size=256, weight_decay=1e-4, sgd_momentum=0.9, embedding_dim=EMBEDDING_DIM
)
"""What a setting left None becomes when neither its method nor the dataset says otherwise."""

LARS_DEFAULTS: dict[str, Any] = dict(base_lr=0.3, weight_decay=1e-6, trust_coefficient=LARS_TRUST_COEFFICIENT)
"""What a setting left None becomes when the optimizer is LARS, before the dataset's and the
method's rows (which hold SGD's values): SimCLR's LARS (Chen et al. 2020: lr 0.3 x N / 256, weight
decay 1e-6, trust coefficient 0.001 of You et al. 2017), which NNCLR's paper also trains with
(its weight decay 1e-6)."""

RESUMABLE_CHANGES: tuple[str, ...] = (
    "max_steps", "max_minutes", "device", "workers", "checkpoint_every", "log_every", "knn_every", "compile",
    "data_dir",
)  # fmt: skip
"""The settings that may differ when a run is resumed (``--resume``, or a vision sweep run again):
how long it goes on, where and how fast it runs, and where the data are; any other difference is
an error naming the setting."""


def _loss_option_help(name: str) -> str:
    """The help of a loss's option, from the table of bounds: the losses that take it, its meaning."""
    users = [loss for loss in LOSSES if name in bounds.BOUNDS[loss].option_names]
    meaning = next(o.meaning for o in bounds.BOUNDS[users[0]].options if o.name == name)
    return f"{' and '.join(users)} loss only: {meaning}."


@dataclass
class PretrainConfig:
    """Everything that defines a pretraining run. ``None`` means: the default of the method for
    the dataset (see the module's docstring), or for image_size the dataset's own size, for
    small_stem "yes for images of 96 pixels or less", for precision "bf16 on CUDA, fp32 on CPU",
    for gpu_augment "decode on CUDA, off on CPU" (a resumed run: its own),
    for workers a number sized to the free cores (chosen when the run starts), for negatives
    and key_momentum of a method that has none: not used (support_size: refused), for
    schedule_steps "epochs x batches per epoch".

    Time-boxed runs: with ``max_minutes`` and ``fit_schedule`` (the default), the run measures its
    speed over its first steps and shortens its cosine schedule to the steps that fit in the time
    (never lengthens it), so that it ends its schedule instead of being cut at a high learning
    rate; the length decided is recorded as ``schedule_steps`` (in the checkpoint's config, so a
    resumed run keeps it). Without ``fit_schedule``, ``max_minutes`` only stops the run."""

    method: str = setting("moco", f"The method, one of {', '.join(METHODS)} (listed above).")
    loss: str | None = setting(
        None, "The bound: " + "; ".join(f"{n}: {bounds.BOUNDS[n].summary}" for n in LOSSES)
    )
    negatives: int | None = setting(None, "K: " + "; ".join(
        f"{m.name}: {m.negatives_meaning}" for m in METHODS.values() if m.negatives_meaning
    ))  # fmt: skip
    support_size: int | None = setting(
        None, "nnclr: the support set, a first-in first-out queue of past embeddings in which each view's "
        "nearest neighbour is its positive (at least the global batch, fewer than the training images).",
    )  # fmt: skip
    alpha: float | None = setting(None, _loss_option_help("alpha"))
    sigma: float | None = setting(None, _loss_option_help("sigma"))
    temperature: float | None = setting(None, "tau of the cosine scores.")
    arch: str = setting("resnet50", f"The encoder, one of {', '.join(ARCHITECTURES)}.")
    dataset: str = setting("imagefolder", f"The dataset, one of {', '.join(DATASETS)}.")
    data_dir: str | None = setting(
        None, "Dataset directory (imagefolder: DIR/train, DIR/val; fashion-mnist: the Debian package's by "
        "default).", flag="--data",
    )  # fmt: skip
    image_size: int | None = setting(None, "Side of the views [the dataset's: 224 for imagefolder].")
    epochs: int | None = setting(None, "Epochs.")
    batch_size: int | None = setting(None, "Global batch (all processes).")
    out: str = setting("runs/pretrain", "Run directory: checkpoint.pt, metrics.jsonl.")
    max_steps: int | None = setting(None, "Stop after this many steps (smoke tests).")
    max_minutes: float | None = setting(None, "Stop (with a checkpoint) after this wall time.")
    fit_schedule: bool = setting(
        True, "With --max-minutes: size the cosine schedule to the steps that fit in the time (measured over "
        "the first steps, kept on --resume), or keep the epochs' schedule and cut it at the time.",
        flag="--fit-schedule/--cut-schedule",
    )  # fmt: skip
    schedule_steps: int | None = setting(None, "The schedule's length in steps (set by --fit-schedule).")
    device: str = setting("cpu", f"Where to train, one of {', '.join(DEVICES)}.")
    workers: int | None = setting(None, "Data loader processes per process [sized to the free cores].")
    optimizer: str | None = setting(
        None, f"The optimizer, one of {', '.join(OPTIMIZERS)}: momentum SGD, or LARS (You et al. 2017; "
        "SimCLR's and NNCLR's: each weight tensor's step scaled by trust coefficient x ||w|| / (||g|| + "
        "weight decay x ||w||), biases and BatchNorm parameters excluded from that and from the weight "
        "decay) [" + "; ".join(
            f"{m.name}: lars from a global batch of {m.lars_from_batch}, else sgd"
            for m in METHODS.values() if m.lars_from_batch is not None
        ) + "; the others: sgd; a resumed run keeps its own].",
    )  # fmt: skip
    base_lr: float | None = setting(None, "lr = base lr x batch / 256.")
    warmup_epochs: float | None = setting(None, "Epochs of linear warmup.")
    weight_decay: float | None = setting(
        None, "Weight decay (SGD: of every parameter; LARS: of the weights only)."
    )
    sgd_momentum: float | None = setting(None, "Momentum of the optimizer (SGD or LARS).")
    trust_coefficient: float | None = setting(
        None, f"lars only: its trust coefficient eta [{LARS_TRUST_COEFFICIENT:g}, You et al.'s and SimCLR's]."
    )
    key_momentum: float | None = setting(None, "Momentum encoder m (moco, simo).")
    symmetric: bool = setting(False, "moco: symmetric loss (both views as queries).")
    bn_mode: str = setting(
        "shuffle", "moco's BatchNorm: shuffle (shuffle-BN across processes, split-BN on one) or sync "
        "(SyncBN across processes; refused on one process, where it is plain BN: the BN leak).",
    )  # fmt: skip
    bn_splits: int = setting(8, "moco split-BN groups on one process (at least 2).")
    small_stem: bool | None = setting(
        None, "3x3 stride-1 ResNet stem [small for <= 96 px].", flag="--small-stem/--stock-stem"
    )
    zero_init_residual: bool = setting(False, "Zero-init the last BN of each residual block.")
    embedding_dim: int | None = setting(None, "Width of the heads' embeddings.")
    precision: str | None = setting(None, f"One of {', '.join(PRECISIONS)} [bf16 cuda, fp32 cpu].")
    compile: bool = setting(False, "torch.compile the model.")
    checkpoint_every: int = setting(1000, "Steps between checkpoints.")
    log_every: int = setting(10, "Steps between metrics records.")
    knn_every: int = setting(10, "Epochs between kNN monitors (0: off).")
    knn_k: int = setting(KNN_K, "k of the kNN monitor.")
    knn_temperature: float = setting(KNN_TEMPERATURE, "Temperature t of the kNN monitor's vote.")
    knn_max_samples: int | None = setting(None, "Cap on the kNN memory and query sets.")
    seed: int = setting(0, "Seed of the weights, the data order and the augmentations.")
    download: bool = setting(False, "Let torchvision download cifar10/stl10 into --data.")
    synthetic_size: int | None = setting(None, "Images in the synthetic dataset [2048].")
    gpu_augment: str | None = setting(
        None, "Where the two views are made: off (torchvision in the loader workers), decode (workers "
        "decode, views made on --device) or jpeg (workers read JPEG bytes) [decode on cuda, off on cpu; a "
        "resumed run keeps its own].",
    )  # fmt: skip

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    def loss_options(self) -> dict[str, float]:
        """The options of the loss that are set (after :func:`resolve_defaults`: exactly the loss's)."""
        return {name: getattr(self, name) for name in LOSS_OPTION_SETTINGS if getattr(self, name) is not None}

    def synthetic_options(self) -> dict[str, int]:
        """The options of the synthetic dataset that the run sets (its size), else {}."""
        return {"size": self.synthetic_size} if self.dataset == "synthetic" and self.synthetic_size else {}


def default_gpu_augment(device: str) -> str:
    """Where the views are made when ``gpu_augment`` is unset: on the GPU ("decode") for a CUDA
    device, in the loader workers ("off") otherwise."""
    return "decode" if device == "cuda" else "off"


def resolve_defaults(config: PretrainConfig, native_image_size: int | None = None) -> PretrainConfig:
    """A copy of ``config`` with every ``None`` that has a default replaced by it, checked;
    :class:`mitool.checks.ParameterError` naming the setting, its value and what is allowed."""
    method = method_spec(config.method)
    values = _method_defaults(config, method)
    values.update(_optimizer_defaults(config, method, values))
    loss = checks.choice("loss", values.get("loss", config.loss), LOSSES)
    options = method.options_of_loss(
        loss, {name: getattr(config, name) for name in LOSS_OPTION_SETTINGS}, config.dataset
    )
    values.update({name: options.get(name) for name in LOSS_OPTION_SETTINGS})
    image_size = config.image_size or native_image_size
    resolved = dataclasses.replace(
        config,
        precision=config.precision or ("bf16" if config.device == "cuda" else "fp32"),
        gpu_augment=config.gpu_augment or default_gpu_augment(config.device),
        image_size=image_size,
        small_stem=config.small_stem if config.small_stem is not None else (image_size or 224) <= 96,
        **values,
    )
    check(resolved)
    return resolved


def _method_defaults(config: PretrainConfig, method: MethodSpec) -> dict[str, Any]:
    """The unset settings that the dataset's row, the method's row or :data:`DEFAULTS` give."""
    if method.negatives_meaning is None and config.negatives is not None:
        raise checks.ParameterError(
            "negatives",
            f"does not apply to {method.name} ({method.summary}); leave it out, got {config.negatives}",
        )
    if config.support_size is not None and "support_size" not in method.defaults:
        raise checks.ParameterError(
            "support_size",
            f"does not apply to {method.name} (the support set is nnclr's); leave it out, got "
            f"{config.support_size}",
        )
    defaults = {**DEFAULTS, **method.defaults_for(config.dataset)}
    return {
        name: value
        for name, value in defaults.items()
        if name not in LOSS_OPTION_SETTINGS and getattr(config, name) is None
    }


def _optimizer_defaults(config: PretrainConfig, method: MethodSpec, values: dict[str, Any]) -> dict[str, Any]:
    """The optimizer (given, else the method's for the run's global batch) and, for LARS, the
    unset settings of :data:`LARS_DEFAULTS`, which replace the dataset's and the method's."""
    batch_size = config.batch_size if config.batch_size is not None else values["batch_size"]
    optimizer = checks.choice(
        "optimizer", config.optimizer or method.default_optimizer(batch_size), OPTIMIZERS
    )
    if optimizer != "lars":
        if config.trust_coefficient is not None:
            raise checks.ParameterError(
                "trust_coefficient",
                f"is LARS's; it does not apply to optimizer {optimizer} (leave it out or choose lars), got "
                f"{config.trust_coefficient}",
            )
        return {"optimizer": optimizer}
    lars = {name: value for name, value in LARS_DEFAULTS.items() if getattr(config, name) is None}
    return {"optimizer": optimizer, **lars}


_WHOLE_NUMBERS: dict[str, int] = dict(
    epochs=1, batch_size=2, bn_splits=1, embedding_dim=1, checkpoint_every=1, log_every=1, knn_k=1,
    image_size=8, max_steps=1, workers=0, knn_every=0, knn_max_samples=1, negatives=1, synthetic_size=1,
    schedule_steps=1, support_size=1,
)  # fmt: skip
"""Whole-number settings and their least values (None, where allowed, is not checked)."""
_NUMBERS: dict[str, dict[str, float]] = dict(
    warmup_epochs={"minimum": 0.0}, weight_decay={"minimum": 0.0}, temperature={"above": 0.0},
    base_lr={"above": 0.0}, knn_temperature={"above": 0.0}, max_minutes={"above": 0.0},
    key_momentum={"minimum": 0.0, "below": 1.0}, sgd_momentum={"minimum": 0.0, "below": 1.0},
    trust_coefficient={"above": 0.0},
)  # fmt: skip
"""Real-number settings and their limits (as :func:`mitool.checks.number` takes them)."""
_CHOICES: dict[str, tuple[str, ...]] = dict(
    method=tuple(METHODS), loss=LOSSES, arch=ARCHITECTURES, dataset=DATASETS, device=DEVICES,
    bn_mode=BN_MODES, gpu_augment=GPU_AUGMENT_MODES, precision=PRECISIONS, optimizer=OPTIMIZERS,
)  # fmt: skip


def check(config: PretrainConfig) -> None:
    """ParameterError for the first setting of a resolved ``config`` that is out of range."""
    for name, allowed in _CHOICES.items():
        checks.choice(name, getattr(config, name), allowed)
    values = config.to_dict()
    for name, least in _WHOLE_NUMBERS.items():
        if values[name] is not None:
            checks.whole_number(name, values[name], minimum=least)
    for name, limits in _NUMBERS.items():
        if values[name] is not None:
            checks.number(name, values[name], **limits)
    if config.gpu_augment == "jpeg" and config.dataset != "imagefolder":
        raise checks.ParameterError(
            "gpu_augment", f"jpeg is for dataset imagefolder only (use decode for {config.dataset}), got jpeg"
        )
    if config.precision == "fp16" and config.device != "cuda":
        raise checks.ParameterError("precision", "fp16 needs device cuda (use fp32 or bf16 on cpu), got fp16")


@dataclass
class LinearConfig:
    """Settings of the linear protocol on a frozen backbone (MoCo's: lr 30, 100 epochs, decay at 60
    and 80, no weight decay); dataset/data_dir/image_size ``None``: the pretraining run's.
    ``max_epochs`` stops early (the schedule still spans ``epochs``); resume continues."""

    checkpoint: str = setting("", "A pretraining checkpoint (OUT/checkpoint.pt).")
    out: str = setting("", "Directory for linear.pt and linear.json.")
    dataset: str | None = setting(None, "Dataset [the pretraining run's].")
    data_dir: str | None = setting(None, "Dataset directory [the pretraining run's].", flag="--data")
    image_size: int | None = setting(None, "Side of the images [the pretraining run's].")
    epochs: int = setting(100, "Epochs of the schedule.")
    max_epochs: int | None = setting(None, "Stop after this many epochs (--resume continues).")
    batch_size: int = setting(256, "Batch size.")
    lr: float = setting(30.0, "SGD learning rate.")
    momentum: float = setting(0.9, "SGD momentum.")
    weight_decay: float = setting(0.0, "SGD weight decay.")
    milestones: tuple[int, ...] = setting((60, 80), "Epochs where the lr is divided by 10.")
    augment: bool = setting(True, "Crop+flip (else cached features of the plain images).")
    workers: int | None = setting(None, "Data loader processes per process [sized to the free cores].")
    device: str = setting("cpu", f"Where to train, one of {', '.join(DEVICES)}.")
    seed: int = setting(0, "Seed of the classifier and the data order.")
