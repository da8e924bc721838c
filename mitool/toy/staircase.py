"""The toy study's schedule of true-MI stages: 2, 4, 6, 8, 10 nats for 4000 steps each in the
protocol of Poole et al. 2019 (d = 20). Each stage trains on :class:`mitool.tasks.CorrelatedGaussian`
at the stage's MI (:func:`mitool.toy.batched.train_vectorised`)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["Stage", "Staircase"]


@dataclass(frozen=True)
class Stage:
    """One stage of a staircase: ``mi`` nats for steps [start, start + steps)."""

    index: int
    mi: float
    start: int
    steps: int

    @property
    def stop(self) -> int:
        return self.start + self.steps


class Staircase:
    """A schedule of true-MI stages, e.g. 2, 4, 6, 8, 10 nats for 4000 steps each (the literature's
    protocol, d = 20). ``steps_per_stage`` is one number for every stage or one per stage.

    Examples
    --------
    >>> from mitool.toy.staircase import Staircase
    >>> stairs = Staircase((2, 4, 6), steps_per_stage=100)
    >>> stairs.total_steps, stairs.mi_at(150), [stage.start for stage in stairs]
    (300, 4.0, [0, 100, 200])
    """

    def __init__(
        self, mi_values: Sequence[float] = (2, 4, 6, 8, 10), steps_per_stage: int | Sequence[int] = 4000
    ):
        values = [float(v) for v in mi_values]
        if not values:
            raise ValueError("mi_values must hold at least one MI value (nats)")
        for value in values:
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"mi values must be finite and >= 0 (nats), got {value}")
        if isinstance(steps_per_stage, int):
            steps = [steps_per_stage] * len(values)
        else:
            steps = [int(s) for s in steps_per_stage]
        if len(steps) != len(values):
            raise ValueError(f"steps_per_stage must be one number or {len(values)} numbers, got {len(steps)}")
        if any(s < 1 for s in steps):
            raise ValueError(f"steps_per_stage must be >= 1, got {steps}")
        self.stages: tuple[Stage, ...] = tuple(
            Stage(index, value, sum(steps[:index]), count)
            for index, (value, count) in enumerate(zip(values, steps, strict=True))
        )

    @property
    def total_steps(self) -> int:
        return self.stages[-1].stop

    def __iter__(self) -> Iterator[Stage]:
        return iter(self.stages)

    def __len__(self) -> int:
        return len(self.stages)

    def stage_at(self, step: int) -> Stage:
        """The stage that holds ``step`` (0-based, < total_steps)."""
        if not 0 <= step < self.total_steps:
            raise ValueError(f"step must be in [0, {self.total_steps}), got {step}")
        for stage in self.stages:
            if step < stage.stop:
                return stage
        raise AssertionError("unreachable")

    def mi_at(self, step: int) -> float:
        return self.stage_at(step).mi
