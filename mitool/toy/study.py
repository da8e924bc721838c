"""The toy MI study: cells of runs, their summary statistics, resumable sweeps shared by ranks.

A *cell* is one critic and one K: every requested bound, EqCo's alpha and every seed at that K are
trained together as one batched model (:func:`mitool.toy.batched.train_vectorised`). A cell writes

* ``curves.csv``: run, estimator, critic, negatives, alpha, seed, step, true_mi, estimate;
* ``summary.csv``: one row per (estimator, critic, negatives, alpha, true_mi), see :func:`summarize`
  (in both files the column ``estimator`` holds the bound, as the command line's ``--estimators``);
* ``done.json``: written last; a cell is finished exactly when it exists;
* ``stage.pt`` while it trains: its state at the end of the last finished stage, from which a
  stopped cell goes on (the same results as straight through), removed when the cell is done.

A sweep is a list of cells under ``OUT/cells/<critic>-K<negatives>/``; run again on the same OUT it
skips finished cells. Under ``torchrun`` (RANK and WORLD_SIZE in the environment) cell number i
goes to rank i mod WORLD_SIZE; rank 0 waits for every cell and then writes ``OUT/summary.csv``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mitool import bounds, checks, critics
from mitool._infra.files import atomic_write_json, read_csv, write_csv
from mitool._infra.runner import Launch, check_config, holding, run_grid, versions
from mitool.settings import Settings, setting

if TYPE_CHECKING:
    from mitool.toy.batched import ProgressCallback, RunRecord
    from mitool.toy.staircase import Stage
from mitool.toy.config import (
    DEFAULT_ALPHA,
    DEMO_BOUNDS,
    MAX_NEGATIVES,
    STUDY_NEGATIVES,
    RunSpec,
    ToySettings,
    check_negatives,
)

__all__ = [
    "CURVE_COLUMNS",
    "SUMMARY_COLUMNS",
    "Grid",
    "SweepCell",
    "cell_specs",
    "interruption_note",
    "run_cell",
    "summarize",
    "sweep",
]

CURVE_COLUMNS = ("run", "estimator", "critic", "negatives", "alpha", "seed", "step", "true_mi", "estimate")
SUMMARY_COLUMNS = (
    "estimator",
    "critic",
    "negatives",
    "alpha",
    "true_mi",
    "n_seeds",
    "mean",
    "bias",
    "std",
    "mse",
    "grad_norm",
    "steps_per_s",
    "diverged",
    "bias_seed_sd",
    "std_seed_sd",
    "grad_norm_seed_sd",
)
"""The issue's columns, then ``diverged``: how many seeds had diverged by the end of the stage
(those seeds are left out of n_seeds and of the statistics), then the spread over seeds of bias,
std and grad_norm (see :func:`summarize`)."""

Log = Callable[[str], None]


def _once_each(name: str, values: tuple) -> tuple:
    """``values`` when none repeats (a repeat would train the same runs twice and count them twice)."""
    repeated = sorted({str(value) for value in values if values.count(value) > 1})
    if repeated:
        raise checks.ParameterError(
            name, f"may list each value once, got {', '.join(repeated)} twice or more"
        )
    return values


def _names_of(allowed: tuple[str, ...]) -> Callable[[str, object], tuple[str, ...]]:
    def check(name: str, values: object) -> tuple[str, ...]:
        chosen = tuple(values)  # type: ignore[call-overload]
        if not chosen:
            raise checks.ParameterError(name, f"must list at least one of {', '.join(allowed)}")
        return _once_each(name, tuple(checks.choice(name, value, allowed) for value in chosen))

    return check


def _negatives(name: str, values: object) -> tuple[int, ...]:
    chosen = tuple(values)  # type: ignore[call-overload]
    if not chosen:
        raise checks.ParameterError(name, "must list at least one K")
    return _once_each(name, tuple(check_negatives(name, value) for value in chosen))


_BOUNDS_HELP = "; ".join(f"{name}: {bound.summary}" for name, bound in bounds.BOUNDS.items())


@dataclass(frozen=True)
class Grid(Settings):
    """What a study varies: bounds, critics, K values, EqCo's alpha, and the seeds first_seed,
    first_seed + 1, ..., first_seed + seeds - 1 (the options of ``toy run`` and ``toy sweep``).
    ``bounds`` is the command line's ``--estimators`` (each estimator of the toy study is a bound
    of :data:`mitool.bounds.BOUNDS`) and config.json's ``estimators``."""

    bounds: tuple[str, ...] = setting(
        DEMO_BOUNDS, f"The bounds to train, of: {_BOUNDS_HELP}.", _names_of(bounds.NAMES), flag="--estimators"
    )
    critics: tuple[str, ...] = setting(
        ("separable",),
        f"The critics, of: {', '.join(critics.NAMES)}.",
        _names_of(critics.NAMES),
        flag="--critic",
    )
    negatives: tuple[int, ...] = setting(
        STUDY_NEGATIVES, f"K, negatives per anchor (1 to {MAX_NEGATIVES}).", _negatives
    )
    alpha: float = setting(
        DEFAULT_ALPHA, "EqCo's alpha (> 0), the same for every K: its estimate is capped at log(alpha + 1).",
        checks.positive,
    )  # fmt: skip
    seeds: int = setting(1, "Seeds per configuration.", partial(checks.whole_number, minimum=1))
    first_seed: int = setting(0, "The first seed.", partial(checks.whole_number, minimum=0), flag="--seed")

    def cells(self) -> list[tuple[str, int]]:
        return [(critic, negatives) for critic in self.critics for negatives in self.negatives]

    def as_dict(self) -> dict:
        return {
            "estimators": list(self.bounds),  # the name resumable sweeps' config.json files hold
            "critics": list(self.critics),
            "negatives": list(self.negatives),
            "alpha": self.alpha,
            "seeds": list(range(self.first_seed, self.first_seed + self.seeds)),
        }


def cell_specs(grid: Grid, critic: str, negatives: int) -> list[RunSpec]:
    """The runs of one cell: every bound and seed at this critic and K."""
    return [
        RunSpec(
            bound,
            critic,
            negatives,
            seed,
            alpha=grid.alpha if bounds.takes_option(bound, "alpha") else None,
        )
        for bound in grid.bounds
        for seed in range(grid.first_seed, grid.first_seed + grid.seeds)
    ]


def cell_name(critic: str, negatives: int) -> str:
    return f"{critic}-K{negatives}"


def _alpha_text(spec: RunSpec) -> str:
    return "" if spec.alpha is None else f"{spec.alpha:g}"


def summarize(records: Sequence[RunRecord], settings: ToySettings) -> list[list[object]]:
    """Rows of :data:`SUMMARY_COLUMNS`, one per (bound, critic, K, alpha, stage).

    Over the seeds that had not diverged by the end of the stage, with the estimates e_t of the
    last half of the stage pooled over steps and seeds and I the stage's true MI:
    mean = mean(e), bias = mean - I, std = standard deviation of e (ddof 1), mse = mean((e - I)^2);
    grad_norm = mean over the whole stage and the seeds of ||grad of the loss w.r.t. the critic's
    parameters||; steps_per_s = training steps per second of one run (its batched group's rate).
    bias_seed_sd, std_seed_sd, grad_norm_seed_sd: the standard deviation (ddof 1) over those seeds
    of each seed's own bias, std and grad_norm (nan with fewer than two seeds): the error bars of
    the figures.
    """
    groups: dict[tuple, list[RunRecord]] = {}
    for record in records:
        spec = record.spec
        groups.setdefault((spec.bound, spec.critic, spec.negatives, _alpha_text(spec)), []).append(record)
    rows = []
    for (bound, critic, negatives, alpha), members in groups.items():
        for stage in settings.staircase:
            finished = [r for r in members if r.diverged_step is None or r.diverged_step >= stage.stop]
            pooled, spread = _stage_statistics(finished, stage, settings.total_steps)
            rows.append(
                [bound, critic, negatives, alpha, f"{stage.mi:g}", len(finished)]
                + [_number(v) for v in pooled]
                + [len(members) - len(finished)]
                + [_number(v) for v in spread]
            )
    return rows


def _stage_statistics(
    finished: Sequence[RunRecord], stage: Stage, total_steps: int
) -> tuple[list[float], list[float]]:
    """(mean, bias, std, mse, grad_norm, steps_per_s) pooled over the seeds, and the standard
    deviation over seeds of each seed's (bias, std, grad_norm); see :func:`summarize`."""
    if not finished:
        return [math.nan] * 6, [math.nan] * 3
    half = stage.start + stage.steps // 2
    windows = [r.estimates[half : stage.stop] for r in finished]
    grads = [float(r.grad_norms[stage.start : stage.stop].mean()) for r in finished]
    window = np.concatenate(windows)
    mean = float(window.mean())
    std = float(window.std(ddof=1)) if window.size > 1 else 0.0
    mse = float(np.mean((window - stage.mi) ** 2))
    rate = float(np.mean([total_steps / r.seconds for r in finished if r.seconds > 0] or [0]))
    per_seed = np.array(
        [
            [w.mean() - stage.mi, w.std(ddof=1) if w.size > 1 else 0.0, g]
            for w, g in zip(windows, grads, strict=True)
        ]
    )
    spread = per_seed.std(axis=0, ddof=1) if len(finished) > 1 else np.full(3, math.nan)
    return [mean, mean - stage.mi, std, mse, float(np.mean(grads)), rate], [float(v) for v in spread]


def _number(value: float) -> str:
    return "nan" if not math.isfinite(value) else f"{value:.6g}"


def curve_rows(records: Sequence[RunRecord], settings: ToySettings, first_run: int = 0) -> list[list[object]]:
    """Rows of :data:`CURVE_COLUMNS`; a diverged run stops at its last recorded step."""
    true_mi = np.concatenate([np.full(stage.steps, stage.mi) for stage in settings.staircase])
    rows = []
    for number, record in enumerate(records, start=first_run):
        spec = record.spec
        steps = settings.total_steps if record.diverged_step is None else record.diverged_step
        fixed = [number, spec.bound, spec.critic, spec.negatives, _alpha_text(spec), spec.seed]
        for step in range(steps):
            rows.append(fixed + [step, f"{true_mi[step]:g}", f"{record.estimates[step]:.6g}"])
    return rows


def run_cell(
    specs: Sequence[RunSpec],
    settings: ToySettings,
    directory: Path,
    progress: ProgressCallback | None = None,
    log: Log | None = None,
    mark_done: bool = True,
) -> list[RunRecord]:
    """Train one cell and write its curves.csv, summary.csv and (last, when ``mark_done``) done.json
    into ``directory``."""
    from mitool.toy.batched import train_vectorised

    directory.mkdir(parents=True, exist_ok=True)
    stages = directory / STAGE_FILE
    records = train_vectorised(specs, settings, progress=progress, stages=stages)
    for record in records:
        if record.diverged_step is not None and log is not None:
            log(record.divergence_message())
    write_csv(directory / "curves.csv", CURVE_COLUMNS, curve_rows(records, settings))
    write_csv(directory / "summary.csv", SUMMARY_COLUMNS, summarize(records, settings))
    if not mark_done:
        stages.unlink(missing_ok=True)
        return records
    atomic_write_json(
        directory / "done.json",
        {
            "runs": len(records),
            "seconds": records[0].seconds if records else 0.0,
            "diverged": [
                {"run": r.spec.label(), "step": r.diverged_step, "last_finite": r.last_finite}
                for r in records
                if r.diverged_step is not None
            ],
        },
    )
    stages.unlink(missing_ok=True)
    return records


STAGE_FILE = "stage.pt"
"""A cell's state at the end of its last finished stage (removed when the cell is done): a cell
that was stopped goes on from there."""


def study_config(kind: str, grid: Grid, settings: ToySettings) -> dict:
    """Everything that fixes the results (the grid and the settings), plus the device, the versions
    and the command."""
    settings_dict = settings.as_dict()
    device = settings_dict.pop("device")
    return {"kind": kind, "grid": grid.as_dict(), "settings": settings_dict, "device": device,
            "versions": versions(), "command": " ".join(sys.argv)}  # fmt: skip


_COMPARED = ("kind", "grid", "settings")
"""The entries of config.json that must agree for a rerun to resume a sweep."""


@dataclass(frozen=True)
class SweepCell:
    """A (critic, K) cell of a sweep under OUT; finished when its done.json exists."""

    critic: str
    negatives: int
    out: Path

    @property
    def name(self) -> str:
        return cell_name(self.critic, self.negatives)

    @property
    def directory(self) -> Path:
        return self.out / "cells" / self.name

    def finished(self) -> bool:
        return (self.directory / "done.json").is_file()


def _cells(out: Path, grid: Grid) -> list[SweepCell]:
    return [SweepCell(critic, negatives, Path(out)) for critic, negatives in grid.cells()]


def interruption_note(out: Path, grid: Grid) -> str:
    """One line for a sweep stopped midway: which cells are finished (saved) and how to resume."""
    finished = [cell.name for cell in _cells(out, grid) if cell.finished()]
    saved = f" ({', '.join(finished)})" if finished else ""
    return (
        f"{len(finished)} of {len(grid.cells())} cells finished and saved under "
        f"{Path(out) / 'cells'}{saved}; "
        "the cell in training is lost. Run the same command again to resume: finished cells are skipped."
    )


def _shifted(progress: Callable, offset: int, note: str, steps: int, estimate: float) -> None:
    """A cell's progress as the sweep's: steps counted from ``offset``, the cell named in ``note``."""
    progress(offset + steps, estimate, note)


def _write_summary(out: Path, grid: Grid) -> Path:
    """OUT/summary.csv from every cell's summary."""
    rows: list[list[object]] = []
    for cell in _cells(out, grid):
        path = cell.directory / "summary.csv"
        if path.is_file():
            # a cell written before a column was added has it empty
            rows += [[row.get(column, "") for column in SUMMARY_COLUMNS] for row in read_csv(path)]
    write_csv(out / "summary.csv", SUMMARY_COLUMNS, rows)
    return out / "summary.csv"


def sweep(
    out: Path,
    grid: Grid,
    settings: ToySettings,
    progress_factory: Callable[[int], ProgressCallback] | None = None,
    log: Log | None = None,
    launch: Launch | None = None,
) -> Path | None:
    """Run every unfinished cell of this rank (on :mod:`mitool._infra.runner`), then (rank 0) wait for all
    cells and write ``OUT/summary.csv``; returns its path on rank 0 and None elsewhere.

    ``progress_factory(total_steps)`` is called once with the number of training steps this rank
    has to run (finished cells not counted) and returns the progress callback, called as
    ``progress(steps, estimate, note)``. ``log`` gets one-line messages (divergences, skipped
    cells). A rerun on the same ``out`` skips finished cells; with other settings it raises
    :class:`mitool._infra.runner.SettingsDiffer`. Interrupted (KeyboardInterrupt), the finished cells stay
    saved: :func:`interruption_note` says which.
    """
    launch = launch or Launch.from_environment()
    settings = dataclasses.replace(settings, device=launch.device(settings.device))
    with holding(out, launch, log) as folder:
        check_config(
            folder / "config.json", study_config("sweep", grid, settings), launch.rank == 0, _COMPARED
        )
        cells = _cells(folder, grid)
        pending = [cell for cell in launch.mine(cells) if not cell.finished()]
        progress = progress_factory(len(pending) * settings.total_steps) if progress_factory else None
        started = iter(range(len(pending)))

        def train(cell: SweepCell) -> None:
            cell_progress = None
            if progress is not None:
                offset = next(started) * settings.total_steps
                cell_progress = functools.partial(
                    _shifted, progress, offset, f"{cell.critic} K={cell.negatives}:"
                )
            specs = cell_specs(grid, cell.critic, cell.negatives)
            run_cell(specs, settings, cell.directory, progress=cell_progress, log=log)

        finished = run_grid(folder, cells, launch, train, log=log)
        if progress is not None:
            progress(len(pending) * settings.total_steps, math.nan)
        return _write_summary(folder, grid) if finished else None


def run(
    out: Path,
    grid: Grid,
    settings: ToySettings,
    progress: ProgressCallback | None = None,
    log: Log | None = None,
) -> list[RunRecord]:
    """One configuration (one critic, one K; several bounds and seeds) over the staircase:
    OUT/curves.csv, OUT/summary.csv and OUT/config.json."""
    for parameter in ("critics", "negatives"):
        values = getattr(grid, parameter)
        if len(values) != 1:
            raise checks.ParameterError(
                parameter, f"takes one value in a single run, got {len(values)}; a sweep takes lists"
            )
    with holding(out, Launch(), log) as folder:
        specs = cell_specs(grid, grid.critics[0], grid.negatives[0])
        records = run_cell(specs, settings, folder, progress=progress, log=log, mark_done=False)
        atomic_write_json(folder / "config.json", study_config("run", grid, settings))
    return records
