"""The learning-rate schedule of a pretraining run (:class:`Schedule`, the warmup and cosine decay
of :mod:`mitool.vision.lr_schedule`), as its settings plan it, and its fitting to a time box.

With ``max_minutes`` and ``fit_schedule`` a run measures its speed over its first
:data:`FIT_PROBE_STEPS` steps and shortens ``total`` to the steps that fit in the time
(:func:`fit_schedule_to_time`), so that it ends its schedule instead of being cut at a high
learning rate; the length decided is recorded as ``schedule_steps``.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from mitool.vision import distributed
from mitool.vision.lr_schedule import Schedule

if TYPE_CHECKING:
    from mitool.vision.config import PretrainConfig
    from mitool.vision.loader import SkippingDataLoader
    from mitool.vision.run import Run

__all__ = [
    "FIT_MARGIN",
    "FIT_PROBE_STEPS",
    "fit_schedule_to_time",
    "plan_schedule",
    "steps_that_fit",
]


def plan_schedule(config: PretrainConfig, loader: SkippingDataLoader) -> Schedule:
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
    run.schedule = plan_schedule(run.config, run.loader)
    run.metrics.write({"step": run.step, "schedule_steps": steps, "seconds_per_step": seconds_per_step})
