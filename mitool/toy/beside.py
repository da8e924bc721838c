"""Estimators beside the bounds on the toy staircase: at each stage, fresh pairs of the stage's law
(:class:`mitool.tasks.CorrelatedGaussian` of the study's d, MI and transform) estimated by whole
estimators of :mod:`mitool.estimators` (``mitool toy run --beside flow,ksg``), where the bounds'
lines flatten at log(K + 1) or log(alpha + 1).

Each row of OUT/beside.csv is one estimator at one stage: the stage's true MI and steps, the estimate,
its interval (``ci_high`` inf where the estimate is a lower bound near a ceiling: KSG's
psi(n) - psi(k), InfoNCE's log(K + 1)) and its seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mitool import checks
from mitool._infra.files import read_csv, write_csv

if TYPE_CHECKING:
    from mitool.toy.config import ToySettings

__all__ = ["BESIDE_COLUMNS", "check_beside", "estimates_beside", "read_beside", "write_beside"]

BESIDE_COLUMNS = (
    "estimator", "true_mi", "start", "stop", "estimate", "ci_low", "ci_high", "pairs", "seconds",
)  # fmt: skip


def check_beside(names: Sequence[str]) -> tuple[str, ...]:
    """The estimator names, each one of :func:`mitool.estimators.names` (ParameterError "beside ...")."""
    from mitool import estimators

    return tuple(checks.choice("beside", name, estimators.names()) for name in names)


def estimates_beside(
    names: Sequence[str], settings: ToySettings, pairs: int, seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> list[list[object]]:  # fmt: skip
    """The rows of OUT/beside.csv (:data:`BESIDE_COLUMNS`): each estimator of ``names`` on ``pairs``
    fresh pairs of each stage of ``settings.staircase`` (``settings``: the study's
    :class:`~mitool.toy.config.ToySettings`), the same pairs for every estimator of a stage."""
    import torch

    import mitool
    from mitool.tasks import CorrelatedGaussian

    rows: list[list[object]] = []
    for stage in settings.staircase:
        task = CorrelatedGaussian(settings.dim, mi=stage.mi, transform=settings.transform)
        stage_seed = np.random.SeedSequence([seed, stage.index]).generate_state(1)[0]
        generator = torch.Generator().manual_seed(int(stage_seed))
        x, y = (part.double().numpy() for part in task.sample(pairs, generator, dtype=torch.float64))
        for name in names:
            result = mitool.estimate(x, y, estimator=name, seed=seed)
            rows.append([name, stage.mi, stage.start, stage.stop, result.value, result.ci_low, result.ci_high,
                         pairs, round(result.seconds, 3)])  # fmt: skip
            if log is not None:
                log(f"beside: {name} at {stage.mi:g} nats: {result.value:.3f} in {result.seconds:.1f} s")
    return rows


def write_beside(folder: Path, rows: list[list[object]]) -> Path:
    """OUT/beside.csv, written atomically."""
    path = Path(folder) / "beside.csv"
    write_csv(path, BESIDE_COLUMNS, rows)
    return path


def read_beside(folder: Path) -> list[dict[str, str]]:
    """The rows of OUT/beside.csv, none when there is no such file."""
    path = Path(folder) / "beside.csv"
    return read_csv(path) if path.is_file() else []
