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
from dataclasses import dataclass
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
from mitool.vision.config import PretrainConfig, build_method, resolve_defaults
from mitool.vision.data import SkippedImages, dataset_info, load_dataset, make_loader
from mitool.vision.evaluate import evaluate_knn
from mitool.vision.gpu_augment import GPUTwoViewAugment, loader_options

__all__ = ["StepResult", "TrainingDiverged", "learning_rate", "pretrain", "training_step"]

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


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


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


def _check_resumable(saved: dict[str, Any], config: PretrainConfig, path: str) -> None:
    current = config.to_dict()
    for key, value in saved.items():
        if key not in _RESUMABLE_CHANGES and key != "out" and current.get(key) != value:
            raise ValueError(
                f"--resume: option {key} differs from the run in {path} "
                f"(was {value!r}, now {current.get(key)!r})"
            )


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


def pretrain(config: PretrainConfig, resume: bool = False, progress: bool = True) -> dict[str, Any]:
    """Run (or, with ``resume``, continue) the pretraining described by ``config``; returns a
    summary (steps, epochs, last logged metrics, last kNN record). Raises ValueError or
    FileNotFoundError for bad settings before any step, TrainingDiverged on a non-finite loss."""
    device, rank, world = distributed.setup(config.device)
    synthetic = (
        {"size": config.synthetic_size} if config.dataset == "synthetic" and config.synthetic_size else {}
    )
    info = dataset_info(config.dataset, config.data_dir, **synthetic)
    config = resolve_defaults(config, info.image_size)
    if config.batch_size % world:
        raise ValueError(
            f"batch_size (the global batch, {config.batch_size}) must be divisible by {world} processes"
        )
    local_batch = config.batch_size // world
    _check_method_sizes(config, local_batch, world)
    out = config.out
    path = os.path.join(out, CHECKPOINT_NAME)
    saved = None
    if resume:
        saved = checkpoints.load(path, map_location="cpu", kind="pretrain")
        _check_resumable(saved["config"], config, path)
    elif os.path.exists(path):
        raise ValueError(
            f"out {out} already holds a run ({CHECKPOINT_NAME}); pass --resume or choose another --out"
        )
    augment: GPUTwoViewAugment | None = None
    if config.gpu_augment == "off":
        data_options: dict[str, Any] = {"transform": two_view_transform(info, config.image_size)}
    else:
        # workers only decode (or read the JPEG bytes); both views are made on the device
        data_options = loader_options(config.gpu_augment)
        augment = GPUTwoViewAugment.for_dataset(info, config.image_size, seed=config.seed + rank)
    train_set = load_dataset(
        config.dataset, "train", config.data_dir, download=config.download, **data_options, **synthetic
    )
    loader = make_loader(
        train_set, local_batch, True, config.workers, config.seed, drop_last=True, distributed=world > 1
    )
    steps_per_epoch = len(loader)
    if steps_per_epoch == 0:
        raise ValueError(
            f"batch_size {config.batch_size} is larger than the dataset ({len(train_set)} images)"
        )
    total_steps = config.epochs * steps_per_epoch
    warmup_steps = round(config.warmup_epochs * steps_per_epoch)
    peak_lr = config.base_lr * config.batch_size / 256

    _seed_everything(config.seed)
    model = build_method(config, info.channels, device)
    trained = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.SGD(
        trained, lr=peak_lr, momentum=config.sgd_momentum, weight_decay=config.weight_decay
    )
    scaler = torch.amp.GradScaler(device.type, enabled=config.precision == "fp16")
    epoch, step, batches_done = 0, 0, 0
    if saved is not None:
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        scaler.load_state_dict(saved["scaler"])
        epoch, step, batches_done = saved["epoch"], saved["step"], saved["data_order"]["batches_done"]
        if augment is not None:
            augment.load_state_dict(_augment_state_of_rank(saved, rank, world, path))
    step_model: nn.Module = model
    if world > 1:
        step_model = distributed.wrap_for_data_parallel(model, device)
    if config.compile:
        step_model = torch.compile(step_model)

    is_main = rank == 0
    try:
        os.makedirs(out, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ValueError(
            f"--out: {out} must be a directory (or a path to create), but a file is in the way"
        ) from None
    metrics = _MetricsLog(out, is_main)
    if is_main:
        if saved is not None:
            _metrics_up_to(metrics.path, step)
        else:
            atomic_write_text(metrics.path, "")
    skipped_images = SkippedImages()

    def save_checkpoint(epoch_now: int, batches: int) -> None:
        augment_states = _gather_augment_states(augment)  # every rank takes part
        if not is_main:
            return
        checkpoints.save(
            path,
            {
                "kind": "pretrain",
                "config": config.to_dict(),
                "dataset_info": dataclasses.asdict(info),
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scaler": scaler.state_dict(),
                "schedule": {"peak_lr": peak_lr, "warmup_steps": warmup_steps, "total_steps": total_steps},
                "epoch": epoch_now,
                "step": step,
                "data_order": {"seed": config.seed, "epoch": epoch_now, "batches_done": batches},
                "rng": checkpoints.rng_states(),
                **({"gpu_augment": augment_states} if augment_states is not None else {}),
            },
        )

    last_metrics: dict[str, Any] = {}
    last_knn: dict[str, Any] = {}
    interval = _Interval()
    images_per_step = config.batch_size
    run_started = time.perf_counter()
    stop = _should_stop(config, step, run_started)
    try:
        while epoch < config.epochs and not stop:
            loader.set_epoch(epoch)
            batches = iter(loader)
            for _ in range(batches_done):
                next(batches)
            if saved is not None:
                checkpoints.restore_rng_states(saved["rng"])
                saved = None
            bar = Progress(
                steps_per_epoch,
                f"epoch {epoch + 1}/{config.epochs}",
                enabled=progress and is_main,
                done=batches_done,
            )
            while not stop:
                started = time.perf_counter()
                batch = next(batches, None)
                interval.data_wait += time.perf_counter() - started
                if batch is None:
                    break
                inputs, labels, skipped = batch
                skipped_images.add(skipped)
                batches_done += 1
                if augment is not None and inputs is not None:
                    view_1, view_2, kept, failed = augment.views_of_batch(inputs, device)
                    inputs, labels = (view_1, view_2), labels[kept]
                    skipped_images.add(failed)
                views = _usable_views(inputs, config, local_batch, device)
                if views is None:
                    continue
                lr = learning_rate(step, total_steps, warmup_steps, peak_lr)
                try:
                    result = training_step(step_model, optimizer, scaler, *views, lr, config.precision, step)
                except TrainingDiverged as error:
                    kept = (
                        f"{path} (step {_saved_step(path)})" if os.path.exists(path) else "none written yet"
                    )
                    raise TrainingDiverged(
                        f"{error} (epoch {epoch + 1}); stopped; last good checkpoint: {kept}"
                    ) from None
                step += 1
                interval.add(result)
                bar.update(note=f"loss {result.loss:.3f}")
                if step % config.log_every == 0:
                    last_metrics = interval.record(step, epoch + 1, lr, images_per_step)
                    metrics.write(last_metrics)
                stop = _should_stop(config, step, run_started)
                if step % config.checkpoint_every == 0 or stop:
                    save_checkpoint(epoch, batches_done)
            bar.close()
            if stop and batches_done < steps_per_epoch:
                break
            epoch, batches_done = epoch + 1, 0
            if config.knn_every and epoch % config.knn_every == 0:
                last_knn = _knn_monitor(model, config, device, step, epoch, progress and is_main)
                metrics.write(last_knn)
            save_checkpoint(epoch, 0)
            if is_main:
                skipped_images.report()
    finally:
        metrics.close()
    if is_main:
        skipped_images.report()
    return {"steps": step, "epochs": epoch, "metrics": last_metrics, "knn": last_knn, "out": out}


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


def _should_stop(config: PretrainConfig, step: int, run_started: float) -> bool:
    """max_steps reached, or max_minutes of wall time spent in this process (the ranks agree)."""
    if config.max_steps is not None and step >= config.max_steps:
        return True
    if config.max_minutes is None:
        return False
    late = torch.tensor([float(time.perf_counter() - run_started > 60 * config.max_minutes)])
    if distributed.is_distributed():
        device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
        late = late.to(device)
        dist.all_reduce(late, op=dist.ReduceOp.MAX)
    return bool(late.item())


def _saved_step(path: str) -> int | str:
    try:
        return checkpoints.load(path, kind="pretrain")["step"]
    except (ValueError, FileNotFoundError):
        return "unreadable"


def _check_method_sizes(config: PretrainConfig, local_batch: int, world: int) -> None:
    if config.method == "simo" and config.negatives > config.batch_size - 1:
        raise ValueError(
            f"negatives ({config.negatives}) must be < batch_size ({config.batch_size}) for simo"
        )
    if config.method == "moco":
        per_step = config.batch_size * (2 if config.symmetric else 1)
        if config.negatives < per_step:
            raise ValueError(
                f"negatives (the queue size, {config.negatives}) must be >= {per_step} keys per step"
            )
        if config.bn_mode == "shuffle" and world == 1 and local_batch % config.bn_splits:
            raise ValueError(
                f"batch_size ({local_batch}) must be a multiple of bn_splits ({config.bn_splits}) "
                "for moco's split-BN on one process"
            )


def _usable_views(inputs: Any, config: PretrainConfig, local_batch: int, device: torch.device):
    """The two view batches on the device, cut (equally on every rank) to a size the method can
    use when unreadable images made this batch short; None when too few images are left."""
    if inputs is None:
        rows = 0
    else:
        rows = inputs[0].shape[0]
    if distributed.is_distributed():
        shared = torch.tensor([rows], device=device)
        dist.all_reduce(shared, op=dist.ReduceOp.MIN)
        rows = int(shared)
    if config.method == "moco" and config.bn_mode == "shuffle" and distributed.world_size() == 1:
        rows -= rows % config.bn_splits
    if rows < 2 or (config.method == "simo" and rows * distributed.world_size() <= config.negatives):
        return None
    return tuple(
        view[:rows].to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
        for view in inputs
    )


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


def _knn_monitor(
    model: nn.Module, config: PretrainConfig, device: torch.device, step: int, epoch: int, progress: bool
) -> dict[str, Any]:
    """The kNN record of the query backbone (rank 0 computes, the others wait)."""
    record: dict[str, Any] = {}
    if distributed.rank() == 0:
        synthetic = (
            {"size": config.synthetic_size} if config.dataset == "synthetic" and config.synthetic_size else {}
        )
        result = evaluate_knn(
            model.backbone,
            config.dataset,
            config.data_dir,
            config.image_size,
            device,
            config.knn_k,
            config.knn_temperature,
            batch_size=max(config.batch_size // distributed.world_size(), 64),
            workers=config.workers,
            max_samples=config.knn_max_samples,
            progress=progress,
            synthetic_options=synthetic,
        )
        record = {
            "step": step,
            "epoch": epoch,
            "knn_top1": result["knn_top1"],
            "knn_top5": result["knn_top5"],
        }
    if distributed.is_distributed():
        dist.barrier()
    return record
