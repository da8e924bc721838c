"""The pretraining loop: one process (CPU or one GPU) or torchrun DDP, with exact resume.

Optimisation: momentum SGD (momentum 0.9, weight decay 1e-4; torch's fused kernels) or LARS
(:mod:`mitool.vision.lars`; simclr's and nnclr's default at large batch) on the warmup + cosine
schedule of :mod:`mitool.vision.schedule`, one optimizer step at a time (:mod:`mitool.vision.step`),
where ``--batch-size`` is the global batch N (N / W images per process on W processes) and steps
are counted in optimizer steps. On CUDA the forward pass runs under bf16 autocast (the scores and
the bound in float32), in channels_last layout, with cuDNN's autotuner on
(``cudnn.benchmark``), and the two views are made on the GPU by default (``gpu_augment`` decode:
the loader workers only decode); ``compile`` wraps the model in torch.compile.

A step waits for the device once, to read its scalars after its backward pass is queued
(:mod:`mitool.vision.step`); the gradient norms are read with the next step's scalars, the metrics
records every ``log_every`` steps. Under DDP the ranks agree on a batch shortened by unreadable
images over a CPU (gloo) group, which does not wait for the GPU.

The training set is the dataset's ``train`` split, for STL-10 ``train+unlabeled`` (105 000 images,
:data:`mitool.vision.datasets.PRETRAINING_SPLITS`).

Every ``checkpoint_every`` steps and at each epoch end, OUT/checkpoint.pt is rewritten atomically
(see :mod:`mitool.vision.checkpoint`) with: the model (query encoder, momentum encoder and the
queue, whichever the method has), the optimizer, the schedule, the gradient scaler, the epoch and
step, the position in the epoch's data order (seed, epoch, batches done), the RNG states of torch
(CPU and CUDA), numpy and Python, the open interval of the metrics records, and the config.
``resume`` reloads all of it, replays the data loader to the saved position (the order and the
augmentation seeds are functions of (seed, epoch, rank),
:func:`mitool.vision.loader.augmentation_seed`), then restores the RNG states: on one process the
parameters after N + resume + M steps equal those after N + M steps in one go. Under DDP every
rank restores rank 0's RNG states (the global generator is the same on every rank; each rank's
augmentations come from its own stream).

``max_steps`` and ``max_minutes`` (wall time of this call) end a run early, with a checkpoint.

A NaN or infinite loss or gradient norm stops the run before the optimizer step with
:class:`mitool.vision.step.TrainingDiverged`, naming the step; the last checkpoint on disk is the
last good one. SIGINT and SIGTERM stop it after the step in progress, with a checkpoint
(:class:`mitool._infra.runner.Interruption`, :class:`TrainingInterrupted`).

OUT/metrics.jsonl gets, every ``log_every`` steps, the means over the interval of loss, mi (the
bound's estimate in nats), npc (the mean NPC multiplier q_B), grad_norm, and lr, images_per_second
and data_wait_fraction (time spent waiting for the loader / wall time), and when the run stops
mid-interval the record of the interval so far, marked partial (a resumed run continues the
interval saved in the checkpoint and drops that record: its records are an uninterrupted run's,
:mod:`mitool.vision.records`); every ``knn_every`` epochs a record with knn_top1 and knn_top5
(test split scored against the train split; under DDP every rank extracts the features of its
share of both splits, under the run's autocast, and the neighbours are merged across ranks:
:func:`mitool.vision.evaluate.evaluate_knn`) and the alignment and uniformity of the normalised
embeddings on a fixed held-out batch of the test split (:mod:`mitool.vision.alignment`, Wang &
Isola 2020); and when the run ends (its epochs, its ``max_steps``, ``max_minutes`` or fitted
schedule; not a signal), a record of alignment and uniformity at its last step unless the kNN
monitor's record already holds them: every run's records end with them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import sys
import time
from typing import Any

import numpy as np
import torch
from torch import Tensor

from mitool import checks
from mitool._infra.files import atomic_write_text
from mitool._infra.locks import hold_folder
from mitool._infra.progress import Progress
from mitool._infra.runner import Launch, make_out
from mitool.vision import checkpoint as checkpoints
from mitool.vision import distributed
from mitool.vision.alignment import HeldOutBatch
from mitool.vision.augment import two_view_transform
from mitool.vision.checkpoint import saved_step
from mitool.vision.config import RESUMABLE_CHANGES, PretrainConfig, resolve_defaults
from mitool.vision.datasets import DatasetInfo, dataset_info, load_dataset, pretraining_split
from mitool.vision.evaluate import evaluate_knn
from mitool.vision.gpu_augment import GPUTwoViewAugment, loader_options
from mitool.vision.loader import SkippingDataLoader, default_workers, make_loader
from mitool.vision.methods import build_method, method_class
from mitool.vision.records import MetricsLog, keep_records_up_to, write_config
from mitool.vision.run import CHECKPOINT_NAME, Run, restore_run, save_checkpoint
from mitool.vision.schedule import fit_schedule_to_time, plan_schedule
from mitool.vision.step import (
    StepResult,
    TrainingDiverged,
    check_gradient_norm,
    make_optimizer,
    training_step,
)

__all__ = ["CHECKPOINT_NAME", "Run", "TrainingInterrupted", "pretrain", "start_run", "summary"]


class TrainingInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped the run after the step it was making, with a checkpoint at that
    step: ``signal`` (its name), ``step``, ``epoch`` (epochs done), ``checkpoint`` (its path)."""

    def __init__(self, signal_name: str, step: int, epoch: float, checkpoint: str) -> None:
        super().__init__(f"interrupted by {signal_name} at step {step}; checkpoint {checkpoint}")
        self.signal, self.step, self.epoch, self.checkpoint = signal_name, step, epoch, checkpoint


def pretrain(config: PretrainConfig, resume: bool = False, progress: bool = True) -> dict[str, Any]:
    """Run (or, with ``resume``, continue) the pretraining described by ``config``; returns the
    summary of :func:`summary`. Raises ValueError or FileNotFoundError for bad settings before any
    step, :class:`TrainingDiverged` on a non-finite loss, :class:`TrainingInterrupted` (after
    writing a checkpoint) on SIGINT or SIGTERM."""
    launch = Launch.from_environment()
    with hold_folder(make_out(config.out), launch.lock_rank, note=_note):
        return _pretrain_holding(config, resume, progress)


def _note(line: str) -> None:
    print(f"mitool vision pretrain: {line}", file=sys.stderr, flush=True)


def _pretrain_holding(config: PretrainConfig, resume: bool, progress: bool) -> dict[str, Any]:
    run = start_run(config, resume)
    try:
        with run.interruption:
            while run.epoch < run.config.epochs and run.stopped_by is None:
                if train_epoch(run, progress) and not _interrupted(run):
                    end_epoch(run, progress)
        _log_interval(run, partial=True)  # the steps since the last record (a stop mid-interval)
        if run.is_main and not _interrupted(run) and run.last_alignment.get("step") != run.step:
            record = {"step": run.step, "epoch": run.epochs_done, **_alignment(run)}
            run.last_alignment = record
            run.metrics.write(record)
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
    knn_note says why), alignment (the last record of alignment and uniformity), out."""
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
    if run.last_alignment:
        result["alignment"] = run.last_alignment
    return {**result, "out": run.config.out}


# ----------------------------------------------------------------------------------------------
# set-up and resume


def start_run(config: PretrainConfig, resume: bool) -> Run:
    """Check the settings, open the data, build the model and optimizer, and with ``resume``
    load the checkpoint in OUT; nothing is trained or written before every check has passed."""
    device, rank, world = distributed.setup(config.device)
    info = dataset_info(config.dataset, config.data_dir, **config.synthetic_options())
    augment_given = config.gpu_augment is not None
    saved = _previous_run(config, resume) if resume else None
    if saved is not None and config.optimizer is None:  # a resumed run keeps its optimizer (and its defaults)
        config = dataclasses.replace(config, optimizer=saved["config"].get("optimizer") or "sgd")
    config = resolve_defaults(config, info.image_size)
    method = method_class(config.method)
    if config.batch_size % world:
        raise checks.ParameterError(
            "batch_size", f"must be divisible by the {world} processes that share it, got {config.batch_size}"
        )
    method.check_sizes(config, world)
    if not resume:
        _previous_run(config, resume)  # refuses a folder that holds a run
    if saved is not None and not augment_given:  # a resumed run keeps where its views were made
        config = dataclasses.replace(config, gpu_augment=saved["config"].get("gpu_augment", "off"))
    config = _with_schedule_steps(_with_workers(config, saved), saved)
    _check_resumable(config, saved)
    loader, augment = _training_data(config, info, rank, world)
    method.check_training_set(config, len(loader.dataset))
    schedule = plan_schedule(config, loader)
    _seed_everything(config.seed)
    model = build_method(config, info.channels, device)
    trained = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = make_optimizer(
        trained, schedule.peak_lr, config.sgd_momentum, config.weight_decay, device, config.optimizer,
        config.trust_coefficient,
    )  # fmt: skip
    scaler = torch.amp.GradScaler(device.type, enabled=config.precision == "fp16")
    run = Run(
        config, method, info, device, rank, world, loader, augment, schedule, model, model, optimizer, scaler,
        MetricsLog(config.out, rank == 0),
    )  # fmt: skip
    if saved is not None:
        restore_run(run, saved)
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
        return checkpoints.load_latest(path, kind="pretrain", parameter="resume", note=_note)
    if os.path.exists(path) or os.path.exists(checkpoints.previous_path(path)):
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
    for key, value in {"optimizer": "sgd", **saved["config"]}.items():  # runs before LARS: SGD
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
        config.dataset, pretraining_split(config.dataset), config.data_dir, download=config.download,
        **data_options, **config.synthetic_options(),
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
        if "alignment" in record:
            run.last_alignment = record


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
                _save(run)
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
    with _diverged_stops_the_run(run):
        result = training_step(
            run.step_model, run.optimizer, run.scaler, *views, lr, run.config.precision, run.step, flags,
            run.unchecked_grad_norm,
        )  # fmt: skip
    run.unchecked_grad_norm = None if result.grad_norm_checked else result.grad_norm
    run.step, run.last_lr = run.step + 1, lr
    run.interval.add(result)
    fit_schedule_to_time(run)
    if run.step % run.config.log_every == 0:
        _log_interval(run)
    run.stopped_by = _stop_reason(run, *result.flags)
    if run.step % run.config.checkpoint_every == 0 or run.stopped_by is not None:
        _save(run)
    return result


@contextlib.contextmanager
def _diverged_stops_the_run(run: Run):
    """TrainingDiverged with the epoch and the last good checkpoint added to its message."""
    try:
        yield
    except TrainingDiverged as error:
        path = run.checkpoint_path
        kept = f"{path} (step {saved_step(path)})" if os.path.exists(path) else "none written yet"
        raise TrainingDiverged(
            f"{error} (epoch {run.epoch + 1}); stopped; last good checkpoint: {kept}"
        ) from None


def _save(run: Run) -> None:
    """The checkpoint, once the last step's gradient norm is known to be finite (a step whose norm
    was not was not taken, and the run stops with TrainingDiverged instead of saving)."""
    if run.unchecked_grad_norm is not None:
        with _diverged_stops_the_run(run):
            check_gradient_norm(run.unchecked_grad_norm, run.step)
        run.unchecked_grad_norm = None
    save_checkpoint(run)


def _log_interval(run: Run, partial: bool = False) -> None:
    """The metrics record of the steps since the last one (none when there are none); ``partial``
    for the record of an interval cut short by the run's stop, which a resume drops (the
    checkpoint holds the open interval, and the resumed run writes its whole record)."""
    if run.interval.steps == 0:
        return
    record = run.interval.record(run.step, run.epochs_done, run.last_lr, run.config.batch_size, partial)
    run.last_metrics = {**record, "skipped_images": run.skipped.count}
    run.metrics.write(run.last_metrics)


def _usable_views(run: Run, inputs: Any) -> tuple[Tensor, ...] | None:
    """The two view batches on the device, cut (equally on every rank) to a size the method can
    use when unreadable images made this batch short; None when too few images are left."""
    rows = 0 if inputs is None else inputs[0].shape[0]
    rows = distributed.min_over_ranks(rows)  # on the host: no wait for the device
    rows = run.method.usable_rows(rows, run.config, run.world)
    if rows == 0:
        return None
    return tuple(
        view[:rows].to(run.device, non_blocking=True).contiguous(memory_format=torch.channels_last)
        for view in inputs
    )


def end_epoch(run: Run, progress: bool) -> None:
    """Count the epoch, run the kNN monitor (with alignment and uniformity) when it is due, write
    the checkpoint."""
    run.epoch, run.batches_done = run.epoch + 1, 0
    if run.config.knn_every and run.epoch % run.config.knn_every == 0:
        run.last_knn = {**_knn_monitor(run, progress and run.is_main), **_alignment(run)}
        if run.is_main:
            run.last_alignment = run.last_knn
        run.metrics.write(run.last_knn)
    _save(run)
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


def _knn_monitor(run: Run, progress: bool) -> dict[str, Any]:
    """The kNN record of the query backbone: every rank extracts the features of its share of the
    images under the run's autocast (the neighbours merged across ranks), with rank 0's BatchNorm
    statistics (the ones its checkpoint holds and a resumed run starts from)."""
    config = run.config
    backbone = run.model.backbone
    distributed.broadcast_buffers(backbone)
    result = evaluate_knn(
        backbone, config.dataset, config.data_dir, config.image_size, run.device, config.knn_k,
        config.knn_temperature, batch_size=max(config.batch_size // run.world, 64), workers=config.workers,
        max_samples=config.knn_max_samples, progress=progress, synthetic_options=config.synthetic_options(),
        precision=config.precision,
    )  # fmt: skip
    return {
        "step": run.step,
        "epoch": run.epochs_done,
        "knn_top1": result["knn_top1"],
        "knn_top5": result["knn_top5"],
    }


def _alignment(run: Run) -> dict[str, float]:
    """Alignment and uniformity of the model's normalised embeddings on the fixed held-out batch
    (:mod:`mitool.vision.alignment`), under the run's autocast; measured by rank 0 only (the
    records' writer: the other ranks get {})."""
    if not run.is_main:
        return {}
    config = run.config
    if run.held_out is None:
        run.held_out = HeldOutBatch.of_dataset(
            config.dataset, config.data_dir, config.image_size, config.synthetic_options()
        )
    return run.held_out.measure(run.model, run.device, config.precision)
