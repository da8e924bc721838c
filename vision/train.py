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
(seed, epoch, rank), :func:`mitool.vision.loader.augmentation_seed`), then restores the RNG states: on one
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
import math
import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor, nn

from mitool import checks
from mitool.files import atomic_write_text
from mitool.progress import Progress
from mitool.vision import checkpoint as checkpoints
from mitool.vision import distributed
from mitool.vision.augment import two_view_transform
from mitool.vision.common import ContrastiveMethod
from mitool.vision.config import RESUMABLE_CHANGES, PretrainConfig, resolve_defaults
from mitool.vision.datasets import DatasetInfo, dataset_info, load_dataset
from mitool.vision.evaluate import evaluate_knn
from mitool.vision.gpu_augment import GPUTwoViewAugment, loader_options
from mitool.vision.loader import SkippedImages, SkippingDataLoader, default_workers, make_loader
from mitool.vision.methods import build_method, method_class
from mitool.vision.records import Interval, MetricsLog, keep_records_up_to, write_config

__all__ = [
    "Interruption",
    "Run",
    "Schedule",
    "StepResult",
    "TrainingDiverged",
    "TrainingInterrupted",
    "learning_rate",
    "pretrain",
    "summary",
    "training_step",
]

CHECKPOINT_NAME = "checkpoint.pt"


class TrainingDiverged(RuntimeError):
    """The loss or the gradient norm became NaN or infinite; the message names the step."""


@dataclass(frozen=True)
class StepResult:
    """Scalars of one optimizer step, averaged over ranks: loss, mi, npc (NaN when the bound has
    none), grad_norm (of all trained parameters, after DDP's averaging); flags: the step's
    ``flags``, each true when it was true on any rank."""

    loss: float
    mi: float
    npc: float
    grad_norm: float
    flags: tuple[bool, ...] = ()


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
    flags: tuple[bool, ...] = (),
) -> StepResult:
    """Forward both views, queue the backward pass, check the loss, step. Raises
    :class:`TrainingDiverged` before the parameters change when a value is not finite.

    ``flags`` (e.g. "stop now") travel with the step's scalars: under DDP they are summed over the
    ranks in the same all-reduce, so every rank learns whether any rank raised one without a
    synchronisation of its own."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    device_type = view_1.device.type
    with torch.autocast(device_type, dtype=_AUTOCAST[precision], enabled=precision != "fp32"):
        result = model(view_1, view_2)
    npc = result.npc if result.npc is not None else torch.full((), float("nan"), device=view_1.device)
    values = [result.loss.detach(), result.mi.detach(), npc]
    several = distributed.is_distributed()
    if several:
        values += [torch.full((), float(flag), device=view_1.device) for flag in flags]
    scalars = torch.stack(values).float()
    if several:
        dist.all_reduce(scalars)
        scalars[:3] /= distributed.world_size()
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(result.loss).backward()
    # read the scalars only once the backward pass is queued, so that on a GPU the host does not
    # wait for the forward pass before launching the backward kernels; the parameters are still
    # untouched here, so a non-finite loss stops the run before they change
    loss, mi, npc_value, *summed = scalars.tolist()
    agreed = tuple(value > 0 for value in summed) if several else tuple(bool(flag) for flag in flags)
    if not math.isfinite(loss):
        raise TrainingDiverged(f"loss is {loss} at step {step + 1}")
    scaler.unscale_(optimizer)
    parameters = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    grad_norm = float(_total_norm([p.grad for p in parameters]))
    if not math.isfinite(grad_norm) and not scaler.is_enabled():
        raise TrainingDiverged(f"gradient norm is {grad_norm} at step {step + 1}")
    scaler.step(optimizer)
    scaler.update()
    return StepResult(loss, mi, npc_value, grad_norm, agreed)


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
    ``stopped_by``: why the run stops before its last epoch ("max_steps", "max_minutes",
    "schedule_end" of a fitted schedule, or the signal's name), None while it trains. ``last_lr``:
    the learning rate of the last step. ``fit_probe``: (step, time) where a time-boxed run started
    measuring its speed (:func:`fit_schedule_to_time`).
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
    metrics: MetricsLog
    epoch: int = 0
    step: int = 0
    batches_done: int = 0
    pending_rng: dict[str, Any] | None = None
    stopped_by: str | None = None
    last_lr: float = 0.0
    fit_probe: tuple[int, float] | None = None
    started: float = field(default_factory=time.perf_counter)
    skipped: SkippedImages = field(default_factory=SkippedImages)
    interval: Interval = field(default_factory=Interval)
    interruption: Interruption = field(default_factory=lambda: Interruption())
    last_metrics: dict[str, Any] = field(default_factory=dict)
    last_knn: dict[str, Any] = field(default_factory=dict)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.config.out, CHECKPOINT_NAME)

    @property
    def epochs_done(self) -> float:
        """Epochs completed, with the fraction of the current one (the ``epoch`` of the records)."""
        return round(self.epoch + self.batches_done / self.schedule.steps_per_epoch, 4)


class TrainingInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped the run after the step it was making, with a checkpoint at that
    step: ``signal`` (its name), ``step``, ``epoch`` (epochs done), ``checkpoint`` (its path)."""

    def __init__(self, signal_name: str, step: int, epoch: float, checkpoint: str) -> None:
        super().__init__(f"interrupted by {signal_name} at step {step}; checkpoint {checkpoint}")
        self.signal, self.step, self.epoch, self.checkpoint = signal_name, step, epoch, checkpoint


class Interruption:
    """Catches SIGINT and SIGTERM while a run trains (within ``with``, in the main thread): the
    first one is noted in ``received`` and the run stops after its current step with a
    checkpoint; a second one stops at once (KeyboardInterrupt)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.received: str | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Interruption:
        if threading.current_thread() is threading.main_thread():
            self._previous = {number: signal.signal(number, self._note) for number in self.SIGNALS}
        return self

    def __exit__(self, *exception: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}

    def _note(self, number: int, frame: object) -> None:
        if self.received is not None:
            self.__exit__()
            raise KeyboardInterrupt
        self.received = signal.Signals(number).name


def pretrain(config: PretrainConfig, resume: bool = False, progress: bool = True) -> dict[str, Any]:
    """Run (or, with ``resume``, continue) the pretraining described by ``config``; returns the
    summary of :func:`summary`. Raises ValueError or FileNotFoundError for bad settings before any
    step, :class:`TrainingDiverged` on a non-finite loss, :class:`TrainingInterrupted` (after
    writing a checkpoint) on SIGINT or SIGTERM."""
    run = start_run(config, resume)
    try:
        with run.interruption:
            while run.epoch < run.config.epochs and run.stopped_by is None:
                if train_epoch(run, progress) and not _interrupted(run):
                    end_epoch(run, progress)
        _log_interval(run)  # the steps since the last record (a run stopped early, or its last steps)
    finally:
        run.metrics.close()
    if run.is_main:
        run.skipped.report()
    if _interrupted(run):
        raise TrainingInterrupted(run.stopped_by, run.step, run.epochs_done, run.checkpoint_path)
    return summary(run)


def _interrupted(run: Run) -> bool:
    """Stopped by a signal (the epoch's end, with its kNN monitor, is left to the resumed run)."""
    return run.stopped_by is not None and run.stopped_by not in ("max_steps", "max_minutes", "schedule_end")


def summary(run: Run) -> dict[str, Any]:
    """step, epoch (as in the records), stopped_by ("epochs" when the run ended its schedule),
    skipped_images, metrics (the last record), knn (the last monitor record; when there is none,
    knn_note says why), out."""
    result: dict[str, Any] = {
        "step": run.step,
        "epoch": run.epochs_done,
        "stopped_by": run.stopped_by or "epochs",
        "skipped_images": run.skipped.count,
        "metrics": run.last_metrics,
    }
    if run.last_knn:
        result["knn"] = run.last_knn
    elif not run.config.knn_every:
        result["knn_note"] = "the kNN monitor is off (knn_every 0)"
    else:
        result["knn_note"] = (
            f"the kNN monitor runs at the end of every {run.config.knn_every} epoch(s); none yet"
        )
    return {**result, "out": run.config.out}


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
        raise checks.ParameterError(
            "batch_size", f"must be divisible by the {world} processes that share it, got {config.batch_size}"
        )
    method.check_sizes(config, world)
    saved = _previous_run(config, resume)
    config = _with_schedule_steps(_with_workers(config, saved), saved)
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
        MetricsLog(config.out, rank == 0),
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
        if not os.path.exists(path):
            raise checks.ParameterError(
                "resume", f"finds no run in {config.out} (no {CHECKPOINT_NAME}); start it without --resume"
            )
        return checkpoints.load(path, map_location="cpu", kind="pretrain", parameter="resume")
    if os.path.exists(path):
        raise checks.ParameterError(
            "out", f"{config.out} already holds a run ({CHECKPOINT_NAME}); resume it or choose another folder"
        )
    return None


def _with_schedule_steps(config: PretrainConfig, saved: dict[str, Any] | None) -> PretrainConfig:
    """A resumed time-boxed run keeps the schedule length it decided (``schedule_steps``)."""
    if saved is None or config.schedule_steps is not None:
        return config
    return dataclasses.replace(config, schedule_steps=saved["config"].get("schedule_steps"))


def _with_workers(config: PretrainConfig, saved: dict[str, Any] | None) -> PretrainConfig:
    """``config`` with its loader workers set: the resumed run's (the augmentations depend on
    them), or a number sized to the free cores (:func:`mitool.vision.loader.default_workers`)."""
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
        if key not in RESUMABLE_CHANGES and key != "out" and current.get(key) != value:
            raise checks.ParameterError(
                "resume",
                f"continues the run in {config.out}, but option {key} differs (was {value!r}, now "
                f"{current.get(key)!r}); only {', '.join(sorted(RESUMABLE_CHANGES))} may change",
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
        raise checks.ParameterError(
            "batch_size",
            f"must be at most the {len(train_set)} images of the dataset, got {config.batch_size}",
        )
    return loader, augment


def _schedule(config: PretrainConfig, loader: SkippingDataLoader) -> Schedule:
    """epochs x batches per epoch, or the length a time-boxed run decided (``schedule_steps``),
    the warmup scaled with it (the schedule keeps its shape)."""
    steps_per_epoch = len(loader)
    planned = config.epochs * steps_per_epoch
    total = config.schedule_steps or planned
    return Schedule(
        steps_per_epoch,
        total,
        round(config.warmup_epochs * steps_per_epoch * total / planned),
        config.base_lr * config.batch_size / 256,
    )


FIT_PROBE_STEPS = 100
"""A time-boxed run measures its speed over this many steps after its first one, then fits its
schedule (:func:`fit_schedule_to_time`)."""
FIT_MARGIN = 0.02
"""Share of ``max_minutes`` kept free when fitting (the last checkpoint, speed changes)."""


def steps_that_fit(step: int, seconds_per_step: float, seconds_left: float, planned: int) -> int:
    """The fitted length of a schedule at ``step``: the steps that fit in ``seconds_left`` at
    ``seconds_per_step`` after those made, at least one more, at most the ``planned`` length."""
    return max(step + 1, min(planned, step + int(max(seconds_left, 0.0) / seconds_per_step)))


def fit_schedule_to_time(run: Run) -> None:
    """With ``max_minutes`` and ``fit_schedule``, once, :data:`FIT_PROBE_STEPS` steps after the
    first: set the cosine schedule's length to the steps that fit in the time left at the speed
    measured over those steps (the slowest rank's), so that the learning rate reaches 0 when the
    time is up instead of the run being cut mid-schedule. The decision is recorded as
    ``config.schedule_steps`` (saved with the checkpoint: a resumed run keeps it, exactly) and as a
    metrics record (schedule_steps, seconds_per_step)."""
    config = run.config
    if config.max_minutes is None or not config.fit_schedule or config.schedule_steps is not None:
        return
    now = time.perf_counter()
    if run.fit_probe is None:
        run.fit_probe = (run.step, now)  # from the end of the first step: start-up left out
        return
    first_step, since = run.fit_probe
    if run.step - first_step < FIT_PROBE_STEPS:
        return
    seconds_left = 60 * config.max_minutes * (1 - FIT_MARGIN) - (now - run.started)
    timing = torch.tensor([(now - since) / (run.step - first_step), -seconds_left])
    if distributed.is_distributed():  # every rank decides at the same step: agree on the worst case
        device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
        timing = timing.to(device)
        dist.all_reduce(timing, op=dist.ReduceOp.MAX)
    seconds_per_step, seconds_left = float(timing[0]), -float(timing[1])
    steps = steps_that_fit(run.step, seconds_per_step, seconds_left, run.schedule.total_steps)
    run.config = dataclasses.replace(config, schedule_steps=steps)
    run.schedule = _schedule(run.config, run.loader)
    run.metrics.write({"step": run.step, "schedule_steps": steps, "seconds_per_step": seconds_per_step})


def _restore(run: Run, saved: dict[str, Any]) -> None:
    """Put the saved model, optimizer, scaler, position and augmentation state into ``run``; the
    RNG states wait in ``run.pending_rng`` until the loader has replayed the epoch's batches."""
    run.model.load_state_dict(saved["model"])
    run.optimizer.load_state_dict(saved["optimizer"])
    run.scaler.load_state_dict(saved["scaler"])
    run.epoch, run.step = saved["epoch"], saved["step"]
    run.batches_done = saved["data_order"]["batches_done"]
    run.pending_rng = saved["rng"]
    run.skipped = SkippedImages(earlier=saved.get("skipped_images", 0))
    if run.augment is not None:
        run.augment.load_state_dict(_augment_state_of_rank(saved, run.rank, run.world, run.checkpoint_path))


def _prepare_out(run: Run, resumed: bool) -> None:
    """Create OUT and write its config.json; start metrics.jsonl afresh, or keep the records up
    to the resumed step (the last of them are the run's last metrics and kNN records)."""
    try:
        os.makedirs(run.config.out, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise checks.ParameterError(
            "out", f"{run.config.out} must be a directory (or a path to create), but a file is in the way"
        ) from None
    if not run.is_main:
        return
    write_config(run.config.out, run.config.to_dict())
    if not resumed:
        atomic_write_text(run.metrics.path, "")
        return
    for record in keep_records_up_to(run.metrics.path, run.step):
        if "loss" in record:
            run.last_metrics = record
        if "knn_top1" in record:
            run.last_knn = record


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
            try:
                batch = next(batches, None)
            except RuntimeError:  # a loader worker ended by the same Ctrl-C (the terminal signals all)
                if run.interruption.received is None:
                    raise
                run.stopped_by = run.interruption.received
                save_checkpoint(run)
                break
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
    late = (
        run.config.max_minutes is not None and time.perf_counter() - run.started > 60 * run.config.max_minutes
    )
    flags = (late, run.interruption.received is not None)
    try:
        result = training_step(
            run.step_model, run.optimizer, run.scaler, *views, lr, run.config.precision, run.step, flags
        )
    except TrainingDiverged as error:
        path = run.checkpoint_path
        kept = f"{path} (step {_saved_step(path)})" if os.path.exists(path) else "none written yet"
        raise TrainingDiverged(
            f"{error} (epoch {run.epoch + 1}); stopped; last good checkpoint: {kept}"
        ) from None
    run.step, run.last_lr = run.step + 1, lr
    run.interval.add(result)
    fit_schedule_to_time(run)
    if run.step % run.config.log_every == 0:
        _log_interval(run)
    run.stopped_by = _stop_reason(run, *result.flags)
    if run.step % run.config.checkpoint_every == 0 or run.stopped_by is not None:
        save_checkpoint(run)
    return result


def _log_interval(run: Run) -> None:
    """The metrics record of the steps since the last one (none when there are none)."""
    if run.interval.steps == 0:
        return
    record = run.interval.record(run.step, run.epochs_done, run.last_lr, run.config.batch_size)
    run.last_metrics = {**record, "skipped_images": run.skipped.count}
    run.metrics.write(run.last_metrics)


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


def _stop_reason(run: Run, late: bool = False, interrupted: bool = False) -> str | None:
    """Why the run stops now: the signal received (by any rank: ``interrupted``), "max_minutes"
    (``late`` on any rank), "max_steps" when reached; None to go on. The ranks learn the flags
    of the others through :func:`training_step`, so they all stop at the same step."""
    if interrupted:
        return run.interruption.received or "a signal to another process"
    if late:
        return "max_minutes"
    if run.config.max_steps is not None and run.step >= run.config.max_steps:
        return "max_steps"
    if run.config.schedule_steps is not None and run.step >= run.schedule.total_steps:
        return "schedule_end"  # a time-boxed run's fitted schedule ends mid-epoch
    return None


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
            "skipped_images": run.skipped.count,
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
        raise checks.ParameterError(
            "resume",
            f"needs as many processes as the run in {path} had, with the same gpu_augment: it holds the "
            f"device augmentation state of {count} process(es), this run has {world}",
        )
    return states[rank]


def _saved_step(path: str) -> int | str:
    try:
        return checkpoints.load(path, kind="pretrain")["step"]
    except (ValueError, FileNotFoundError):
        return "unreadable"


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
            "epoch": run.epochs_done,
            "knn_top1": result["knn_top1"],
            "knn_top5": result["knn_top5"],
        }
    if distributed.is_distributed():
        dist.barrier()
    return record
