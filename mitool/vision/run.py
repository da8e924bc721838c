"""A pretraining run's state (:class:`Run`: what the set-up, the epochs and the checkpoints of
:mod:`mitool.vision.train` share), and its checkpoint: what is saved (:func:`save_checkpoint`)
and how it is put back (:func:`restore_run`), in the file format of :mod:`mitool.vision.checkpoint`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from mitool._infra.runner import Interruption
from mitool.checks import ParameterError
from mitool.vision import distributed
from mitool.vision.alignment import HeldOutBatch
from mitool.vision.checkpoint import rng_states, save
from mitool.vision.common import ContrastiveMethod
from mitool.vision.config import PretrainConfig
from mitool.vision.datasets import DatasetInfo
from mitool.vision.gpu_augment import GPUTwoViewAugment
from mitool.vision.loader import SkippedImages, SkippingDataLoader
from mitool.vision.lr_schedule import Schedule
from mitool.vision.records import Interval, MetricsLog

__all__ = ["CHECKPOINT_NAME", "Run", "restore_run", "save_checkpoint"]

CHECKPOINT_NAME = "checkpoint.pt"


@dataclass
class Run:
    """What the set-up, the epochs and the checkpoints of a pretraining run share.

    The where-we-are counters: ``epoch`` (epochs completed), ``step`` (optimizer steps made),
    ``batches_done`` (batches of the current epoch consumed, the position to replay on resume).
    ``pending_rng``: the saved RNG states, put back once the resumed epoch's batches are replayed.
    ``stopped_by``: why the run stops before its last epoch ("max_steps", "max_minutes",
    "schedule_end" of a fitted schedule, or the signal's name), None while it trains. ``last_lr``:
    the learning rate of the last step. ``fit_probe``: (step, time) where a time-boxed run started
    measuring its speed (:func:`mitool.vision.schedule.fit_schedule_to_time`).
    ``unchecked_grad_norm``: the last step's gradient norm (a device tensor) while no host read has
    checked it yet. ``held_out``: the fixed held-out images of the alignment and uniformity (read at
    the first evaluation, rank 0 only).
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
    unchecked_grad_norm: Tensor | None = None
    started: float = field(default_factory=time.perf_counter)
    skipped: SkippedImages = field(default_factory=SkippedImages)
    interval: Interval = field(default_factory=Interval)
    interruption: Interruption = field(default_factory=lambda: Interruption())
    last_metrics: dict[str, Any] = field(default_factory=dict)
    last_knn: dict[str, Any] = field(default_factory=dict)
    last_alignment: dict[str, Any] = field(default_factory=dict)
    held_out: HeldOutBatch | None = None

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


def save_checkpoint(run: Run) -> None:
    """Write OUT/checkpoint.pt atomically (rank 0; every rank takes part in gathering the device
    augmentation's state): everything :func:`mitool.vision.train.pretrain` needs to continue exactly."""
    augment_states = _gather_augment_states(run.augment)
    if not run.is_main:
        return
    schedule = run.schedule
    save(
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
            "rng": rng_states(),
            "skipped_images": run.skipped.count,
            "metrics_interval": run.interval.state_dict(),  # the open interval of the metrics records
            **({"gpu_augment": augment_states} if augment_states is not None else {}),
        },
    )


def restore_run(run: Run, saved: dict[str, Any]) -> None:
    """Put the saved model, optimizer, scaler, position, open metrics interval and augmentation
    state into ``run``; the RNG states wait in ``run.pending_rng`` until the loader has replayed
    the epoch's batches."""
    run.model.load_state_dict(saved["model"])
    fused = [group.get("fused") for group in run.optimizer.param_groups]
    run.optimizer.load_state_dict(saved["optimizer"])
    for group, flag in zip(run.optimizer.param_groups, fused, strict=True):
        if flag is not None or "fused" in group:  # SGD: this run's kernels (an unfused SGD's state loads too)
            group["fused"] = flag
    run.scaler.load_state_dict(saved["scaler"])
    run.epoch, run.step = saved["epoch"], saved["step"]
    run.batches_done = saved["data_order"]["batches_done"]
    run.pending_rng = saved["rng"]
    run.skipped = SkippedImages(earlier=saved.get("skipped_images", 0))
    run.interval.load_state_dict(saved.get("metrics_interval"))  # absent in older checkpoints: empty
    if run.augment is not None:
        run.augment.load_state_dict(_augment_state_of_rank(saved, run.rank, run.world, run.checkpoint_path))


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
        raise ParameterError(
            "resume",
            f"needs as many processes as the run in {path} had, with the same gpu_augment: it holds the "
            f"device augmentation state of {count} process(es), this run has {world}",
        )
    return states[rank]
