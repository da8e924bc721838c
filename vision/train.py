"""The pretraining loop: one process (CPU or one GPU) or torchrun DDP, with exact resume.

Optimisation: SGD (momentum 0.9, weight decay 1e-4) at

    lr(step) = peak * (step + 1) / warmup                               for step < warmup
    lr(step) = peak * (1 + cos(pi * (step - warmup) / (total - warmup))) / 2    afterwards
    peak     = base_lr * global_batch / 256                              (the linear scaling rule)

where ``--batch-size`` is the global batch N (N / W images per process on W processes) and
steps are counted in optimizer steps. On CUDA the forward pass runs under bf16 autocast (the bound
upcasts its scores to float32), in channels_last layout; ``compile`` wraps the model in
torch.compile.

Every ``checkpoint_every`` steps and at each epoch end, OUT/checkpoint.pt is rewritten
atomically (see :mod:`mitool.vision.checkpoint`) with: the model (query encoder, momentum encoder and the
queue, whichever the method has), the optimizer, the schedule, the gradient scaler, the epoch and
step, the position in the epoch's data order (seed, epoch, batches done), the RNG states of
torch (CPU and CUDA), numpy and Python, and the config. ``resume`` reloads all of it, replays the
data loader to the saved position (the order and the augmentation seeds are functions of
(seed, epoch, rank), :func:`mitool.vision.data.augmentation_seed`), then restores the RNG states: on one
process the parameters after N + resume + M steps equal those after N + M steps in one go. Under
DDP every rank restores rank 0's RNG states (the global generator is the same on every rank; each
rank's augmentations come from its own stream).

``max_steps`` and ``max_minutes`` (wall time of this call) end a run early, with a checkpoint.

A NaN or infinite loss or gradient norm stops the run before the optimizer step with
:class:`TrainingDiverged`, naming the step; the last checkpoint on disk is the last good one.

OUT/metrics.jsonl gets, every ``log_every`` steps, the means over the interval of loss, mi (the
bound's estimate in nats), npc (the mean NPC multiplier q_B), grad_norm, and lr, images_per_second
and data_wait_fraction (time spent waiting for the loader / wall time); every ``knn_every``
epochs a record with knn_top1 and knn_top5 (test split scored against the train split).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor, nn

from mitool.files import atomic_write_text
from mitool.progress import Progress
from mitool.vision import checkpoint as checkpoints
from mitool.vision import distributed
from mitool.vision.augment import two_view_transform
from mitool.vision.common import ContrastiveMethod
from mitool.vision.config import PretrainConfig, resolve_defaults
from mitool.vision.data import (
    DatasetInfo,
    SkippedImages,
    SkippingDataLoader,
    dataset_info,
    default_workers,
    load_dataset,
    make_loader,
)
from mitool.vision.evaluate import evaluate_knn
from mitool.vision.gpu_augment import GPUTwoViewAugment, loader_options
from mitool.vision.methods import build_method, method_class

__all__ = ["Run", "Schedule", "StepResult", "TrainingDiverged", "learning_rate", "pretrain", "training_step"]

CHECKPOINT_NAME = "checkpoint.pt"
METRICS_NAME = "metrics.jsonl"
# options that may change when a run is resumed; any other difference is an error
_RESUMABLE_CHANGES = {
    "max_steps",
    "max_minutes",
    "device",
    "checkpoint_every",
    "log_every",
    "knn_every",
    "compile",
    "data_dir",
}


class TrainingDiverged(RuntimeError):
    """The loss or the gradient norm became NaN or infinite; the message names the step."""


@dataclass(frozen=True)
class StepResult:
    """Scalars of one optimizer step, averaged over ranks: loss, mi, npc (NaN when the bound has
    none), grad_norm (of all trained parameters, after DDP's averaging)."""

    loss: float
    mi: float
    npc: float
    grad_norm: float


def learning_rate(step: int, total_steps: int, warmup_steps: int, peak: float) -> float:
    """Linear warmup over ``warmup_steps`` to ``peak``, then cosine decay to 0 at ``total_steps``."""
    if step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return peak * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def training_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    view_1: Tensor,
    view_2: Tensor,
    lr: float,
    precision: str,
    step: int,
) -> StepResult:
    """Forward both views, queue the backward pass, check the loss, step. Raises
    :class:`TrainingDiverged` before the parameters change when a value is not finite."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    device_type = view_1.device.type
    with torch.autocast(device_type, dtype=_AUTOCAST[precision], enabled=precision != "fp32"):
        result = model(view_1, view_2)
    npc = result.npc if result.npc is not None else torch.full((), float("nan"), device=view_1.device)
    scalars = torch.stack([result.loss.detach(), result.mi.detach(), npc]).float()
    if distributed.is_distributed():
        dist.all_reduce(scalars)
        scalars /= distributed.world_size()
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(result.loss).backward()
    # read the scalars only once the backward pass is queued, so that on a GPU the host does not
    # wait for the forward pass before launching the backward kernels; the parameters are still
    # untouched here, so a non-finite loss stops the run before they change
    loss, mi, npc_value = scalars.tolist()
    if not math.isfinite(loss):
        raise TrainingDiverged(f"loss is {loss} at step {step + 1}")
    scaler.unscale_(optimizer)
    parameters = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    grad_norm = float(_total_norm([p.grad for p in parameters]))
    if not math.isfinite(grad_norm) and not scaler.is_enabled():
        raise TrainingDiverged(f"gradient norm is {grad_norm} at step {step + 1}")
    scaler.step(optimizer)
    scaler.update()
    return StepResult(loss, mi, npc_value, grad_norm)


def _total_norm(gradients: list[Tensor]) -> Tensor:
    """The 2-norm of all gradients together (without clip_grad_norm_'s extra scaling pass)."""
    get_total_norm = getattr(torch.nn.utils, "get_total_norm", None)  # torch >= 2.6
    if get_total_norm is not None:
        return get_total_norm(gradients)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float()) for g in gradients]))


_AUTOCAST = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class Schedule:
    """The run's length and learning rate: ``steps_per_epoch`` (batches of the local loader),
    ``total_steps`` over all epochs, ``warmup_steps`` and the ``peak_lr`` after the warmup."""

    steps_per_epoch: int
    total_steps: int
    warmup_steps: int
    peak_lr: float

    def lr(self, step: int) -> float:
        return learning_rate(step, self.total_steps, self.warmup_steps, self.peak_lr)


@dataclass
class Run:
    """What the set-up, the epochs and the checkpoints of a pretraining run share.

    The where-we-are counters: ``epoch`` (epochs completed), ``step`` (optimizer steps made),
    ``batches_done`` (batches of the current epoch consumed, the position to replay on resume).
    ``pending_rng``: the saved RNG states, put back once the resumed epoch's batches are replayed.
    ``stopped_by``: why the run stops early ("max_steps", "max_minutes"), None while it trains.
    """

    config: PretrainConfig
    method: type[ContrastiveMethod]
    info: DatasetInfo
    device: torch.device
    rank: int
    world: int
    loader: SkippingDataLoader
    augment: GPUTwoViewAugment | None
    schedule: Schedule
    model: nn.Module
    step_model: nn.Module
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    metrics: _MetricsLog
    epoch: int = 0
    step: int = 0
    batches_done: int = 0
    pending_rng: dict[str, Any] | None = None
    stopped_by: str | None = None
    started: float = field(default_factory=time.perf_counter)
    skipped: SkippedImages = field(default_factory=SkippedImages)
    interval: _Interval = field(default_factory=lambda: _Interval())
    last_metrics: dict[str, Any] = field(default_factory=dict)
    last_knn: dict[str, Any] = field(default_factory=dict)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.config.out, CHECKPOINT_NAME)


def pretrain(config: PretrainConfig, resume: bool = False, progress: bool = True) -> dict[str, Any]:
    """Run (or, with ``resume``, continue) the pretraining described by ``config``; returns a
    summary (steps, epochs, last logged metrics, last kNN record). Raises ValueError or
    FileNotFoundError for bad settings before any step, TrainingDiverged on a non-finite loss."""
    run = start_run(config, resume)
    try:
        while run.epoch < run.config.epochs and run.stopped_by is None:
            if train_epoch(run, progress):
                end_epoch(run, progress)
    finally:
        run.metrics.close()
    if run.is_main:
        run.skipped.report()
    return {
        "steps": run.step,
        "epochs": run.epoch,
        "metrics": run.last_metrics,
        "knn": run.last_knn,
        "out": run.config.out,
    }


# ----------------------------------------------------------------------------------------------
# set-up and resume


def start_run(config: PretrainConfig, resume: bool) -> Run:
    """Check the settings, open the data, build the model and optimizer, and with ``resume``
    load the checkpoint in OUT; nothing is trained or written before every check has passed."""
    device, rank, world = distributed.setup(config.device)
    info = dataset_info(config.dataset, config.data_dir, **config.synthetic_options())
    config = resolve_defaults(config, info.image_size)
    method = method_class(config.method)
    if config.batch_size % world:
        raise ValueError(
            f"batch_size (the global batch, {config.batch_size}) must be divisible by {world} processes"
        )
    method.check_sizes(config, world)
    saved = _previous_run(config, resume)
    config = _with_workers(config, saved)
    _check_resumable(config, saved)
    loader, augment = _training_data(config, info, rank, world)
    schedule = _schedule(config, loader)
    _seed_everything(config.seed)
    model = build_method(config, info.channels, device)
    trained = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.SGD(
        trained, lr=schedule.peak_lr, momentum=config.sgd_momentum, weight_decay=config.weight_decay
    )
    scaler = torch.amp.GradScaler(device.type, enabled=config.precision == "fp16")
    run = Run(
        config, method, info, device, rank, world, loader, augment, schedule, model, model, optimizer, scaler,
        _MetricsLog(config.out, rank == 0),
    )  # fmt: skip
    if saved is not None:
        _restore(run, saved)
    if world > 1:
        run.step_model = distributed.wrap_for_data_parallel(model, device)
    if config.compile:
        run.step_model = torch.compile(run.step_model)
    _prepare_out(run, resumed=saved is not None)
    run.stopped_by = _stop_reason(run)
    return run


def _previous_run(config: PretrainConfig, resume: bool) -> dict[str, Any] | None:
    """The checkpoint in OUT to resume from; None for a new run, which must not overwrite one."""
    path = os.path.join(config.out, CHECKPOINT_NAME)
    if resume:
        return checkpoints.load(path, map_location="cpu", kind="pretrain")
    if os.path.exists(path):
        raise ValueError(
            f"out {config.out} already holds a run ({CHECKPOINT_NAME}); pass --resume or choose another --out"
        )
    return None


def _with_workers(config: PretrainConfig, saved: dict[str, Any] | None) -> PretrainConfig:
    """``config`` with its loader workers set: the resumed run's (the augmentations depend on
    them), or a number sized to the free cores (:func:`mitool.vision.data.default_workers`)."""
    if config.workers is not None:
        return config
    workers = saved["config"]["workers"] if saved is not None else default_workers()
    return dataclasses.replace(config, workers=workers)


def _check_resumable(config: PretrainConfig, saved: dict[str, Any] | None) -> None:
    """ValueError naming the first setting (other than those that may change) that differs from
    the run being resumed."""
    if saved is None:
        return
    current = config.to_dict()
    for key, value in saved["config"].items():
        if key not in _RESUMABLE_CHANGES and key != "out" and current.get(key) != value:
            raise ValueError(
                f"--resume: option {key} differs from the run in {config.out} "
                f"(was {value!r}, now {current.get(key)!r})"
            )


def _training_data(
    config: PretrainConfig, info: DatasetInfo, rank: int, world: int
) -> tuple[SkippingDataLoader, GPUTwoViewAugment | None]:
    """The loader of the local batches and, with --gpu-augment, the augmentation on the device."""
    augment: GPUTwoViewAugment | None = None
    if config.gpu_augment == "off":
        data_options: dict[str, Any] = {"transform": two_view_transform(info, config.image_size)}
    else:
        # workers only decode (or read the JPEG bytes); both views are made on the device
        data_options = loader_options(config.gpu_augment)
        augment = GPUTwoViewAugment.for_dataset(info, config.image_size, seed=config.seed + rank)
    train_set = load_dataset(
        config.dataset, "train", config.data_dir, download=config.download, **data_options,
        **config.synthetic_options(),
    )  # fmt: skip
    loader = make_loader(
        train_set, config.batch_size // world, True, config.workers, config.seed, drop_last=True,
        distributed=world > 1,
    )  # fmt: skip
    if len(loader) == 0:
        raise ValueError(
            f"batch_size {config.batch_size} is larger than the dataset ({len(train_set)} images)"
        )
    return loader, augment


def _schedule(config: PretrainConfig, loader: SkippingDataLoader) -> Schedule:
    steps_per_epoch = len(loader)
    return Schedule(
        steps_per_epoch,
        config.epochs * steps_per_epoch,
        round(config.warmup_epochs * steps_per_epoch),
        config.base_lr * config.batch_size / 256,
    )


def _restore(run: Run, saved: dict[str, Any]) -> None:
    """Put the saved model, optimizer, scaler, position and augmentation state into ``run``; the
    RNG states wait in ``run.pending_rng`` until the loader has replayed the epoch's batches."""
    run.model.load_state_dict(saved["model"])
    run.optimizer.load_state_dict(saved["optimizer"])
    run.scaler.load_state_dict(saved["scaler"])
    run.epoch, run.step = saved["epoch"], saved["step"]
    run.batches_done = saved["data_order"]["batches_done"]
    run.pending_rng = saved["rng"]
    if run.augment is not None:
        run.augment.load_state_dict(_augment_state_of_rank(saved, run.rank, run.world, run.checkpoint_path))


def _prepare_out(run: Run, resumed: bool) -> None:
    """Create OUT; start metrics.jsonl afresh, or keep the records up to the resumed step."""
    try:
        os.makedirs(run.config.out, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ValueError(
            f"--out: {run.config.out} must be a directory (or a path to create), but a file is in the way"
        ) from None
    if run.is_main:
        if resumed:
            _metrics_up_to(run.metrics.path, run.step)
        else:
            atomic_write_text(run.metrics.path, "")


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# ----------------------------------------------------------------------------------------------
# one epoch


def train_epoch(run: Run, progress: bool) -> bool:
    """Train on the batches of epoch ``run.epoch`` from ``run.batches_done`` on, until the epoch
    ends or the run stops; True when the epoch's batches are all done."""
    batches = _epoch_batches(run)
    label = f"epoch {run.epoch + 1}/{run.config.epochs}"
    enabled = progress and run.is_main
    with Progress(run.schedule.steps_per_epoch, label, enabled=enabled, done=run.batches_done) as bar:
        while run.stopped_by is None:
            started = time.perf_counter()
            batch = next(batches, None)
            run.interval.data_wait += time.perf_counter() - started
            if batch is None:
                break
            run.batches_done += 1
            result = _train_on_batch(run, batch)
            if result is not None:
                bar.update(note=f"loss {result.loss:.3f}")
    return run.stopped_by is None or run.batches_done >= run.schedule.steps_per_epoch


def _epoch_batches(run: Run):
    """The epoch's batches, the first ``run.batches_done`` of them skipped (replayed: a resumed
    run sees the same order and augmentations); then the saved RNG states are put back."""
    run.loader.set_epoch(run.epoch)
    batches = iter(run.loader)
    for _ in range(run.batches_done):
        next(batches)
    if run.pending_rng is not None:
        checkpoints.restore_rng_states(run.pending_rng)
        run.pending_rng = None
    return batches


def _train_on_batch(run: Run, batch: tuple[Any, Tensor, list[str]]) -> StepResult | None:
    """One optimizer step on ``batch`` (None when too few of its images are usable), with the
    metrics record, the stop check and the checkpoint that fall due."""
    inputs, _labels, skipped = batch
    run.skipped.add(skipped)
    if run.augment is not None and inputs is not None:
        view_1, view_2, _kept, failed = run.augment.views_of_batch(inputs, run.device)
        inputs = (view_1, view_2)
        run.skipped.add(failed)
    views = _usable_views(run, inputs)
    if views is None:
        return None
    lr = run.schedule.lr(run.step)
    try:
        result = training_step(
            run.step_model, run.optimizer, run.scaler, *views, lr, run.config.precision, run.step
        )
    except TrainingDiverged as error:
        path = run.checkpoint_path
        kept = f"{path} (step {_saved_step(path)})" if os.path.exists(path) else "none written yet"
        raise TrainingDiverged(
            f"{error} (epoch {run.epoch + 1}); stopped; last good checkpoint: {kept}"
        ) from None
    run.step += 1
    run.interval.add(result)
    if run.step % run.config.log_every == 0:
        run.last_metrics = run.interval.record(run.step, run.epoch + 1, lr, run.config.batch_size)
        run.metrics.write(run.last_metrics)
    run.stopped_by = _stop_reason(run)
    if run.step % run.config.checkpoint_every == 0 or run.stopped_by is not None:
        save_checkpoint(run)
    return result


def _usable_views(run: Run, inputs: Any) -> tuple[Tensor, ...] | None:
    """The two view batches on the device, cut (equally on every rank) to a size the method can
    use when unreadable images made this batch short; None when too few images are left."""
    rows = 0 if inputs is None else inputs[0].shape[0]
    if distributed.is_distributed():
        shared = torch.tensor([rows], device=run.device)
        dist.all_reduce(shared, op=dist.ReduceOp.MIN)
        rows = int(shared)
    rows = run.method.usable_rows(rows, run.config, run.world)
    if rows == 0:
        return None
    return tuple(
        view[:rows].to(run.device, non_blocking=True).contiguous(memory_format=torch.channels_last)
        for view in inputs
    )


def end_epoch(run: Run, progress: bool) -> None:
    """Count the epoch, run the kNN monitor when it is due, write the checkpoint."""
    run.epoch, run.batches_done = run.epoch + 1, 0
    if run.config.knn_every and run.epoch % run.config.knn_every == 0:
        run.last_knn = _knn_monitor(run, progress and run.is_main)
        run.metrics.write(run.last_knn)
    save_checkpoint(run)
    if run.is_main:
        run.skipped.report()


def _stop_reason(run: Run) -> str | None:
    """ "max_steps" when reached, "max_minutes" when that much wall time has passed in this call
    (the ranks agree), else None."""
    config = run.config
    if config.max_steps is not None and run.step >= config.max_steps:
        return "max_steps"
    if config.max_minutes is None:
        return None
    late = torch.tensor([float(time.perf_counter() - run.started > 60 * config.max_minutes)])
    if distributed.is_distributed():
        device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
        late = late.to(device)
        dist.all_reduce(late, op=dist.ReduceOp.MAX)
    return "max_minutes" if late.item() else None


# ----------------------------------------------------------------------------------------------
# checkpoints


def save_checkpoint(run: Run) -> None:
    """Write OUT/checkpoint.pt atomically (rank 0; every rank takes part in gathering the device
    augmentation's state): everything :func:`pretrain` needs to continue exactly."""
    augment_states = _gather_augment_states(run.augment)
    if not run.is_main:
        return
    schedule = run.schedule
    checkpoints.save(
        run.checkpoint_path,
        {
            "kind": "pretrain",
            "config": run.config.to_dict(),
            "dataset_info": dataclasses.asdict(run.info),
            "model": run.model.state_dict(),
            "optimizer": run.optimizer.state_dict(),
            "scaler": run.scaler.state_dict(),
            "schedule": {
                "peak_lr": schedule.peak_lr,
                "warmup_steps": schedule.warmup_steps,
                "total_steps": schedule.total_steps,
            },  # fmt: skip
            "epoch": run.epoch,
            "step": run.step,
            "data_order": {"seed": run.config.seed, "epoch": run.epoch, "batches_done": run.batches_done},
            "rng": checkpoints.rng_states(),
            **({"gpu_augment": augment_states} if augment_states is not None else {}),
        },
    )


def _gather_augment_states(augment: GPUTwoViewAugment | None) -> list[dict[str, Tensor]] | None:
    """The device augmentation's generator state of every rank, in rank order (None without it)."""
    if augment is None:
        return None
    state = augment.state_dict()
    if not distributed.is_distributed():
        return [state]
    states: list[Any] = [None] * distributed.world_size()
    dist.all_gather_object(states, state)
    return states


def _augment_state_of_rank(saved: dict[str, Any], rank: int, world: int, path: str) -> dict[str, Tensor]:
    states = saved.get("gpu_augment")
    if not isinstance(states, list) or len(states) != world:
        count = len(states) if isinstance(states, list) else 0
        raise ValueError(
            f"--resume: {path} holds the device augmentation state of {count} process(es), this run has "
            f"{world}; resume with as many processes and the same --gpu-augment"
        )
    return states[rank]


def _saved_step(path: str) -> int | str:
    try:
        return checkpoints.load(path, kind="pretrain")["step"]
    except (ValueError, FileNotFoundError):
        return "unreadable"


def _metrics_up_to(path: str, step: int) -> None:
    """Keep only the metrics records of steps <= ``step`` (those of the run being resumed)."""
    if not os.path.exists(path):
        return
    kept = []
    with open(path) as file:
        for line in file:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # e.g. a last line cut short by a crash: drop it
                continue
            if isinstance(record, dict) and record.get("step", 0) <= step:
                kept.append(line if line.endswith("\n") else line + "\n")
    atomic_write_text(path, "".join(kept))


# ----------------------------------------------------------------------------------------------
# metrics and the kNN monitor


class _MetricsLog:
    """Appends JSON lines to OUT/metrics.jsonl (rank 0 only), and to TensorBoard when installed."""

    def __init__(self, out: str, enabled: bool) -> None:
        self.path = os.path.join(out, METRICS_NAME)
        self.enabled = enabled
        self.tensorboard = None
        if enabled:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tensorboard = SummaryWriter(os.path.join(out, "tensorboard"))
            except ImportError:
                self.tensorboard = None

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with open(self.path, "a") as file:
            file.write(json.dumps(record) + "\n")
        if self.tensorboard is not None:
            for key, value in record.items():
                if key not in ("step", "epoch") and isinstance(value, float) and math.isfinite(value):
                    self.tensorboard.add_scalar(key, value, record["step"])

    def close(self) -> None:
        if self.tensorboard is not None:
            self.tensorboard.close()


class _Interval:
    """Sums over the steps since the last metrics record."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.steps = 0
        self.sums = {"loss": 0.0, "mi": 0.0, "npc": 0.0, "grad_norm": 0.0}
        self.data_wait = 0.0
        self.started = time.perf_counter()

    def add(self, result: StepResult) -> None:
        self.steps += 1
        for key in self.sums:
            self.sums[key] += getattr(result, key)

    def record(self, step: int, epoch: int, lr: float, images_per_step: int) -> dict[str, Any]:
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        record: dict[str, Any] = {"step": step, "epoch": epoch}
        record.update({key: value / max(self.steps, 1) for key, value in self.sums.items()})
        record.update(
            lr=lr,
            images_per_second=images_per_step * self.steps / elapsed,
            data_wait_fraction=min(1.0, self.data_wait / elapsed),
        )
        self.reset()
        return record


def _knn_monitor(run: Run, progress: bool) -> dict[str, Any]:
    """The kNN record of the query backbone (rank 0 computes, the others wait)."""
    record: dict[str, Any] = {}
    config = run.config
    if run.is_main:
        result = evaluate_knn(
            run.model.backbone, config.dataset, config.data_dir, config.image_size, run.device,
            config.knn_k, config.knn_temperature, batch_size=max(config.batch_size // run.world, 64),
            workers=config.workers, max_samples=config.knn_max_samples, progress=progress,
            synthetic_options=config.synthetic_options(),
        )  # fmt: skip
        record = {
            "step": run.step,
            "epoch": run.epoch,
            "knn_top1": result["knn_top1"],
            "knn_top5": result["knn_top5"],
        }
    if distributed.is_distributed():
        dist.barrier()
    return record
