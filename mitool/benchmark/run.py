"""The MI benchmark: estimators x tasks with closed-form MI x sample sizes x seeds, resumable and
shared by ranks (the grid runs on :mod:`mitool._infra.runner`).

A *cell* is one estimator, one task and one sample size n with every seed: seed s draws n pairs of
the task (from a generator seeded by s and the task's name, so every estimator sees the same data)
and estimates their MI with the estimator's seed s. The seeds of a neural cell are trained together
as one model (:meth:`mitool.estimators.base.Estimator.estimate_many`). A finished cell is one file,
``OUT/cells/<estimator>/<task>-n<n>.csv`` (written atomically: it exists exactly when the cell is
finished), so a rerun of the same command skips it. Under ``torchrun`` cell i goes to rank
i mod WORLD_SIZE; rank 0 waits for all cells and writes

* ``OUT/results.csv``: :data:`RESULT_COLUMNS`, one row per cell and seed (``seconds``: the cell's
  wall time over its seeds);
* ``OUT/summary.md`` and the figures of :mod:`mitool.benchmark.figures`.

Estimators are named as in ``mitool estimate``: ``default`` (the default for continuous data), any
name of :mod:`mitool.estimators`, or ``<bound>-<critic>`` (``smile-concat``), each optionally
followed by ``:key=value`` settings (``infonce-concat:hidden=64:batch_size=64``); the name with its
settings is the estimator's name in the results.
"""

from __future__ import annotations

import dataclasses
import math
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mitool import bounds, checks, critics, estimators
from mitool._infra.files import read_csv, write_csv
from mitool._infra.runner import Launch, check_config, holding, run_grid, versions
from mitool.benchmark import suites
from mitool.estimation import DefaultEstimator, all_setting_names
from mitool.estimators.base import DivergenceError

__all__ = [
    "RESULT_COLUMNS",
    "Cell",
    "EstimatorSpec",
    "DTYPES",
    "Plan",
    "Precision",
    "estimator_names",
    "interruption_note",
    "parse_estimator",
    "plan_from_names",
    "run_benchmark",
    "task_data",
]

RESULT_COLUMNS = (
    "task", "family", "dim_x", "dim_y", "true_mi", "n", "seed", "estimator", "estimate", "ci_low",
    "ci_high", "seconds", "dim_z", "bias_high",
)  # fmt: skip
"""The columns of results.csv; ``dim_z``: Z's dimension for a task of I(X; Y | Z) (the conditional
suite), empty for the others; ``bias_high``: the upper end that allows for a bound's downward bias
(``details["bias_high"]`` of the default's InfoNCE, KSG and flow estimates:
:data:`mitool.trust.BIASED_LOW`), empty where the estimator gives none."""

Log = Callable[[str], None]


@dataclass(frozen=True)
class EstimatorSpec:
    """An estimator of the benchmark: its ``name`` (as typed and in results.csv), the registry's
    ``estimator`` and its ``settings``."""

    name: str
    estimator: str
    settings: dict[str, object] = field(default_factory=dict)

    def build(self, device: str | None = None) -> DefaultEstimator:
        """The estimator as :func:`mitool.estimate` runs it (constant columns, discrete variables
        and ties treated as for a user's data; ``default``: the estimator the data call for), on
        ``device`` when it has that setting and the name does not fix one."""
        settings = dict(self.settings)
        if self.estimator == "default":
            return DefaultEstimator(**settings)
        if device is not None and "device" in estimators.estimator_class(self.estimator).Settings.names():
            settings.setdefault("device", device)
        estimators.get(self.estimator, **settings)  # its settings checked now, before anything runs
        return DefaultEstimator(estimator=self.estimator, **settings)

    def as_config(self) -> dict[str, object]:
        return {"estimator": self.estimator, **self.settings}


def estimator_names() -> list[str]:
    """Every name :func:`parse_estimator` takes: default, the registry's, each bound with each critic."""
    return ["default", *estimators.names(), *(f"{b}-{c}" for b in bounds.NAMES for c in critics.NAMES)]


def _setting_value(text: str) -> object:
    """A setting's value as typed: a whole number, a number, true/false, or the text itself."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def _settings_of(name: str, items: Sequence[str], known: Sequence[str]) -> dict[str, object]:
    """The ``key=value`` items of an estimator's name, each key one of ``known``."""
    settings = {}
    for item in items:
        key, equals, value = item.partition("=")
        if not equals or key not in known:
            raise checks.ParameterError(
                "estimators",
                f"has {item!r} in {name!r}: settings are key=value with a key of {', '.join(known)}",
            )
        settings[key] = _setting_value(value)
    return settings


def parse_estimator(name: str) -> EstimatorSpec:
    """The estimator called ``name`` (see the module); ParameterError "estimators ..." otherwise,
    naming the settings the estimator has when one is unknown."""
    base, *items = name.split(":")
    settings: dict[str, object] = {}
    if base == "default":
        known = sorted(all_setting_names())
        return EstimatorSpec(name, "default", _settings_of(name, items, (*known, "discrete", "estimator")))
    if base not in estimators.names():
        bound, _, critic = base.partition("-")
        if bound not in bounds.NAMES or critic not in critics.NAMES:
            raise checks.ParameterError(
                "estimators",
                f"has an unknown estimator {base!r}; use default, one of {', '.join(estimators.names())} or "
                f"<bound>-<critic> with a critic of {', '.join(critics.NAMES)}, each optionally with "
                ":key=value settings",
            )
        base, settings["critic"] = bound, critic
    settings.update(_settings_of(name, items, estimators.estimator_class(base).Settings.names()))
    spec = EstimatorSpec(name, base, settings)
    spec.build()  # the settings' own checks, before anything runs
    return spec


@dataclass(frozen=True)
class Cell:
    """One estimator on one task at one size, every seed; finished when its CSV exists."""

    estimator: EstimatorSpec
    task: object
    n: int
    out: Path

    @property
    def name(self) -> str:
        return f"{self.estimator.name}/{self.task.name}-n{self.n}"

    @property
    def path(self) -> Path:
        return self.out / "cells" / self.estimator.name / f"{self.task.name}-n{self.n}.csv"

    def finished(self) -> bool:
        return self.path.is_file()


DTYPES = ("float64", "float32")
"""The precisions a benchmark can draw its samples in (bmi's own samples are float32)."""


@dataclass(frozen=True)
class Precision:
    """How the samples reach the estimators: ``dtype`` (float64 or float32, as bmi draws them) and,
    when ``digits`` > 0, rounded to that many significant digits (as a CSV export with ``%.3g``
    writes them)."""

    dtype: str = "float64"
    digits: int = 0

    def __post_init__(self) -> None:
        checks.choice("dtype", self.dtype, DTYPES)
        checks.whole_number("digits", self.digits, 0, 15)

    def apply(self, values: np.ndarray) -> np.ndarray:
        """``values`` rounded to :attr:`digits` significant digits, then in :attr:`dtype`."""
        if self.digits:
            magnitude = np.floor(np.log10(np.where(values == 0, 1.0, np.abs(values))))
            scale = 10.0 ** (self.digits - 1 - magnitude)
            values = np.round(values * scale) / scale
        return values.astype(self.dtype)


@dataclass(frozen=True)
class Plan:
    """What a benchmark runs: estimators x tasks x sizes, each with ``seeds``, the samples in
    ``precision``."""

    estimators: tuple[EstimatorSpec, ...]
    tasks: tuple[object, ...]
    sizes: tuple[int, ...]
    seeds: tuple[int, ...]
    precision: Precision = Precision()

    def __post_init__(self) -> None:
        for parameter, values in (
            ("estimators", self.estimators),
            ("tasks", self.tasks),
            ("sizes", self.sizes),
        ):
            if not values:
                raise checks.ParameterError(parameter, "must name at least one")
        for size in self.sizes:
            checks.whole_number("sizes", size, 2)
        if not self.seeds:
            raise checks.ParameterError("seeds", "must be a whole number >= 1, got 0")
        for parameter, names in (("estimators", [e.name for e in self.estimators]),
                                 ("tasks", [t.name for t in self.tasks])):  # fmt: skip
            repeated = sorted({name for name in names if names.count(name) > 1})
            if repeated:
                raise checks.ParameterError(
                    parameter, f"may list each name once, got {', '.join(repeated)} twice"
                )

    def cells(self, out: Path) -> list[Cell]:
        """In the order they run: sizes, tasks, then estimators (a partial run covers all estimators)."""
        return [Cell(e, t, n, Path(out)) for n in self.sizes for t in self.tasks for e in self.estimators]

    def as_config(self) -> dict:
        """What fixes the results, for OUT/config.json (the precision only when it is not the
        default float64, so that folders made before it existed still resume)."""
        precision = {} if self.precision == Precision() else dataclasses.asdict(self.precision)
        return {
            "estimators": {e.name: e.as_config() for e in self.estimators},
            "tasks": [t.name for t in self.tasks],
            "sizes": list(self.sizes),
            "seeds": list(self.seeds),
            **precision,
        }


def task_data(task: object, n: int, seed: int, precision: Precision = Precision()) -> tuple[np.ndarray, ...]:
    """n rows of ``task`` for ``seed``: (x, y), or (x, y, z) of a conditional task, drawn in float64
    and given in ``precision`` (an image task's as images, (n, H, W)); the same for every estimator
    (the generator is seeded by the seed and the task's name)."""
    import torch

    generator = torch.Generator().manual_seed(
        int(np.random.SeedSequence([seed, zlib.crc32(task.name.encode())]).generate_state(1)[0])
    )
    parts = [
        precision.apply(part.numpy()) for part in task.sample(n, generator=generator, dtype=torch.float64)
    ]
    if getattr(task, "image_shape", None):  # images, as a user gives them: (n, H, W)
        parts = [part.reshape(n, *task.image_shape) for part in parts]
    return tuple(parts)


def _rows(cell: Cell, seeds: Sequence[int], results: Sequence, seconds: float) -> list[list[object]]:
    task, rows = cell.task, []
    for seed, result in zip(seeds, results, strict=True):
        values = (
            (math.nan,) * 3
            if isinstance(result, Exception)
            else (result.value, result.ci_low, result.ci_high)
        )
        bias_high = None if isinstance(result, Exception) else result.details.get("bias_high")
        described = [task.name, task.family, task.dim_x, task.dim_y, f"{task.mi:.6g}", cell.n, seed]
        rows.append([*described, cell.estimator.name, *(f"{v:.6g}" for v in values),
                     f"{seconds / len(seeds):.4g}", getattr(task, "dim_z", ""),
                     "" if bias_high is None else f"{bias_high:.6g}"])  # fmt: skip
    return rows


def run_cell(
    cell: Cell,
    seeds: Sequence[int],
    log: Log | None = None,
    device: str | None = None,
    precision: Precision = Precision(),
) -> list[list[object]]:
    """The rows of results.csv for ``cell``: its estimator on each seed's data (a neural
    estimator's seeds trained together, on ``device``); a seed whose estimate ran away gets NaN and a
    log line, and so does a cell whose estimator refuses the task's data (KSG on tied counts)."""
    start = time.perf_counter()
    data = [task_data(cell.task, cell.n, seed, precision) for seed in seeds]
    try:
        results = cell.estimator.build(device).estimate_many(data, list(seeds))
    except checks.ParameterError as error:  # the estimator does not take this kind of data
        if log is not None:
            log(f"{cell.name}: refused ({str(error).splitlines()[0]})")
        results = [error] * len(seeds)
    for seed, result in zip(seeds, results, strict=True):
        if isinstance(result, DivergenceError) and log is not None:
            log(f"{cell.name} seed {seed}: {result}")
    return _rows(cell, seeds, results, time.perf_counter() - start)


def interruption_note(out: Path, plan: Plan) -> str:
    """One line for a benchmark stopped midway: which cells are finished and how to resume."""
    cells = plan.cells(out)
    finished = [cell.name for cell in cells if cell.finished()]
    listed = f": {', '.join(finished[:8])}{', ...' if len(finished) > 8 else ''}" if finished else ""
    return (
        f"{len(finished)} of {len(cells)} cells finished and saved under {Path(out) / 'cells'}{listed}; "
        "the cell in progress is lost. Run the same command again to resume: finished cells are skipped."
    )


def combined_rows(out: Path, plan: Plan) -> list[dict[str, str]]:
    """The rows of every finished cell of ``plan``, in the plan's order."""
    rows: list[dict[str, str]] = []
    for cell in plan.cells(out):
        if cell.finished():
            rows += read_csv(cell.path)
    return rows


def run_benchmark(
    out: Path,
    plan: Plan,
    progress_factory: Callable[[int], Callable[[int, str], None]] | None = None,
    log: Log | None = None,
    launch: Launch | None = None,
    device: str = "cpu",
) -> Path | None:
    """Run this rank's unfinished cells, then (rank 0) wait for all cells and write
    OUT/results.csv; returns its path on rank 0, None elsewhere. ``progress_factory(total)`` is
    called with the number of cells this rank runs and returns ``progress(done, note)``, called
    before and after each cell; ``log`` gets one-line messages (skipped cells, divergences). The
    neural estimators run on ``device`` (under a launcher ``cuda`` is this rank's GPU)."""
    launch = launch or Launch.from_environment()
    with holding(out, launch, log) as folder:
        config = {"kind": "benchmark", **plan.as_config(), "versions": versions()}
        check_config(
            folder / "config.json",
            config,
            launch.rank == 0,
            ("kind", "estimators", "tasks", "sizes", "seeds", "dtype", "digits"),
        )
        cells = plan.cells(folder)
        pending = [cell for cell in launch.mine(cells) if not cell.finished()]
        progress = progress_factory(len(pending)) if progress_factory is not None else None
        done = iter(range(len(pending) + 1))

        def run(cell: Cell) -> None:
            if progress is not None:
                progress(next(done), cell.name)
            write_csv(
                cell.path,
                RESULT_COLUMNS,
                run_cell(cell, plan.seeds, log, launch.device(device), plan.precision),
            )

        if not run_grid(folder, cells, launch, run, log=log):
            return None
        if progress is not None:
            progress(len(pending), "")
        rows = combined_rows(folder, plan)
        write_csv(
            folder / "results.csv", RESULT_COLUMNS, [[row.get(c, "") for c in RESULT_COLUMNS] for row in rows]
        )
        return folder / "results.csv"


def plan_from_names(
    estimators_: Sequence[str],
    tasks: Sequence[str] | None,
    suite_name: str | None,
    sizes: Sequence[int],
    seeds: int,
    precision: Precision = Precision(),
) -> Plan:
    """A :class:`Plan` from names: ``tasks`` (any suite's task names) or the suite ``suite_name``
    (the main suite when both are None), seeds 0 .. seeds - 1, samples in ``precision``."""
    if tasks and suite_name:
        raise checks.ParameterError(
            "tasks", "and {=suite_name} exclude each other: give one of them", ("suite_name",)
        )
    chosen = [suites.get_task(name) for name in tasks] if tasks else suites.suite(suite_name or "main")
    checks.whole_number("seeds", seeds, 1)
    return Plan(
        tuple(parse_estimator(name) for name in estimators_),
        tuple(chosen),
        tuple(sizes),
        tuple(range(seeds)),
        precision,
    )
