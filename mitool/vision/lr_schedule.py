"""The learning rate of a pretraining run over its steps: a linear warmup, then a cosine decay.

    lr(step) = peak * (step + 1) / warmup                                       for step < warmup
    lr(step) = peak * (1 + cos(pi * (step - warmup) / (total - warmup))) / 2    afterwards
    peak     = base_lr * global_batch / 256                                     (the linear scaling rule)

How a run plans its :class:`Schedule`, and fits it to a time box, is :mod:`mitool.vision.schedule`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Schedule", "learning_rate"]


def learning_rate(step: int, total_steps: int, warmup_steps: int, peak: float) -> float:
    """Linear warmup over ``warmup_steps`` to ``peak``, then cosine decay to 0 at ``total_steps``."""
    if step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return peak * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


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
