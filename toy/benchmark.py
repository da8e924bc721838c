"""The MI benchmark: estimators x tasks with closed-form MI x sample sizes x seeds, resumable and
shared by ranks.

A *cell* is one estimator, one task and one sample size n with every seed: seed s draws n pairs of
the task (from a generator seeded by s and the task's name, so every estimator sees the same data)
and estimates their MI with the estimator's seed s. The seeds of a neural cell are trained together
as one model (:func:`mitool.estimate.estimate_runs`). A finished cell is one file,
``OUT/cells/<estimator>/<task>-n<n>.csv`` (written atomically: it exists exactly when the cell is
finished), so a rerun of the same command skips it. Under ``torchrun`` (RANK, WORLD_SIZE) cell i
goes to rank i mod WORLD_SIZE; rank 0 waits for all cells and writes

* ``OUT/results.csv``: :data:`RESULT_COLUMNS`, one row per cell and seed (``seconds``: the cell's
  wall time over its seeds);
* ``OUT/summary.md``: the mean error per task and estimator with the best per task marked, the mean
  absolute error and the target count of each estimator (:mod:`mitool.toy.benchmark_figures`);
* the figures of :mod:`mitool.toy.benchmark_figures`.

Estimators are named as in ``mitool estimate``: ``default`` (``mitool.estimate.estimate`` with its
defaults), ``ksg``, ``gaussian``, a bound (with the default critic) or ``<bound>-<critic>``
(``smile-concat``), each optionally followed by ``:key=value`` settings of the estimate
(``infonce-concat:hidden=64:batch_size=64``); the name with its settings is the estimator's name
in the results.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from mitool import baselines, bounds, checks, critics, suite
from mitool.estimate import DivergenceError, Settings, estimate, estimate_runs
from mitool.files import atomic_write_json, read_csv, write_csv
from mitool.tasks import Task
from mitool.toy.study import SettingsDiffer, distributed_rank, make_out, versions

__all__ = [
    "RESULT_COLUMNS",
    "Cell",
    "EstimatorSpec",
    "Plan",
    "estimator_names",
    "interruption_note",
    "parse_estimator",
    "run_benchmark",
    "task_data",
]

RESULT_COLUMNS = (
    "task", "family", "dim_x", "dim_y", "true_mi", "n", "seed", "estimator", "estimate", "ci_low",
    "ci_high", "seconds",
)  # fmt: skip

Log = Callable[[str], None]


@dataclass(frozen=True)
class EstimatorSpec:
    """An estimator of the benchmark: its ``name`` (as typed and in results.csv) and the call of
    :func:`mitool.estimate.estimate`: ``estimator`` (None: the default), ``critic`` (None: the
    default) and further ``options``."""

    name: str
    estimator: str | None = None
    critic: str | None = None
    options: dict[str, object] = field(default_factory=dict)

    @property
    def neural(self) -> bool:
        return self.estimator not in baselines.BASELINES

    def call(self) -> dict[str, object]:
        """Keyword arguments of :func:`mitool.estimate.estimate` (and ``estimate_runs``)."""
        chosen = {"estimator": self.estimator, "critic": self.critic}
        return {**{key: value for key, value in chosen.items() if value is not None}, **self.options}


def estimator_names() -> list[str]:
    """Every name :func:`parse_estimator` takes: default, the baselines, each bound, and each
    bound with each critic."""
    names = ["default", *baselines.BASELINES, *bounds.NAMES]
    return names + [f"{bound}-{critic}" for bound in bounds.NAMES for critic in critics.NAMES]


def _setting_value(text: str) -> object:
    """A setting's value as typed: a whole number, a number, true/false, or the text itself."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def _settings_of(name: str, items: Sequence[str]) -> dict[str, object]:
    """``key=value`` items of an estimator's name as options of mitool.estimate.estimate."""
    known = {*Settings.names(), *(o for b in bounds.BOUNDS.values() for o in b.option_names), "evaluator"}
    known |= {o for baseline in baselines.BASELINES.values() for o in baseline.options}
    options = {}
    for item in items:
        key, equals, value = item.partition("=")
        if not equals or key not in known:
            raise checks.ParameterError(
                "estimators",
                f"has {item!r} in {name!r}: settings are key=value with a key of {', '.join(sorted(known))}",
            )
        options[key] = _setting_value(value)
    return options


def parse_estimator(name: str) -> EstimatorSpec:
    """The estimator called ``name``: ``default``, a baseline, a bound or ``<bound>-<critic>``,
    optionally followed by settings of :func:`mitool.estimate.estimate`, each ``:key=value``
    (``infonce-concat:hidden=64:batch_size=64``). ParameterError "estimators ..." otherwise."""
    base, *items = name.split(":")
    options = _settings_of(name, items)
    if base == "default":
        return EstimatorSpec(name, options=options)
    if base in baselines.BASELINES or base in bounds.NAMES:
        return EstimatorSpec(name, base, options=options)
    bound, _, critic = base.partition("-")
    if bound in bounds.NAMES and critic in critics.NAMES:
        return EstimatorSpec(name, bound, critic, options)
    raise checks.ParameterError(
        "estimators",
        f"has an unknown estimator {base!r}; use default, {', '.join(baselines.BASELINES)}, a bound "
        f"({', '.join(bounds.NAMES)}) or <bound>-<critic> with a critic of {', '.join(critics.NAMES)}, "
        "each optionally with :key=value settings",
    )


@dataclass(frozen=True)
class Cell:
    estimator: EstimatorSpec
    task: Task
    n: int

    @property
    def name(self) -> str:
        return f"{self.estimator.name}/{self.task.name}-n{self.n}"

    def path(self, out: Path) -> Path:
        return Path(out) / "cells" / self.estimator.name / f"{self.task.name}-n{self.n}.csv"


@dataclass(frozen=True)
class Plan:
    """What a benchmark runs: estimators x tasks x sizes, each with ``seeds``."""

    estimators: tuple[EstimatorSpec, ...]
    tasks: tuple[Task, ...]
    sizes: tuple[int, ...]
    seeds: tuple[int, ...]

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

    def cells(self) -> list[Cell]:
        """In the order they run: sizes, tasks, then estimators (a partial run covers all estimators)."""
        return [Cell(e, t, n) for n in self.sizes for t in self.tasks for e in self.estimators]

    def as_config(self) -> dict:
        """What fixes the results, for OUT/config.json."""
        return {
            "estimators": {e.name: e.call() for e in self.estimators},
            "tasks": [t.name for t in self.tasks],
            "sizes": list(self.sizes),
            "seeds": list(self.seeds),
        }


def task_data(task: Task, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n pairs of ``task`` for ``seed``, float64: the same for every estimator (the generator is
    seeded by the seed and the task's name)."""
    generator = torch.Generator().manual_seed(
        int(np.random.SeedSequence([seed, zlib.crc32(task.name.encode())]).generate_state(1)[0])
    )
    x, y = task.sample(n, generator=generator, dtype=torch.float64)
    return x.numpy(), y.numpy()


def _rows(cell: Cell, seeds: Sequence[int], results: Sequence, seconds: float) -> list[list[object]]:
    task, rows = cell.task, []
    for seed, result in zip(seeds, results, strict=True):
        values = (
            (math.nan,) * 3
            if isinstance(result, Exception)
            else (result.value, result.ci_low, result.ci_high)
        )
        described = [task.name, task.family, task.dim_x, task.dim_y, f"{task.mi:.6g}", cell.n, seed]
        rows.append(
            [*described, cell.estimator.name, *(f"{v:.6g}" for v in values), f"{seconds / len(seeds):.4g}"]
        )
    return rows


def run_cell(
    cell: Cell, seeds: Sequence[int], device: str = "cpu", log: Log | None = None
) -> list[list[object]]:
    """The rows of results.csv for ``cell``: a neural estimator's seeds trained together, a
    baseline's one after another; a seed whose estimate ran away gets NaN (and a log line)."""
    start = time.perf_counter()
    data = [task_data(cell.task, cell.n, seed) for seed in seeds]
    call = cell.estimator.call()
    if cell.estimator.neural:
        results = estimate_runs(data, seeds=list(seeds), device=device, **call)
    else:
        results = [estimate(x, y, seed=seed, **call) for (x, y), seed in zip(data, seeds, strict=True)]
    for seed, result in zip(seeds, results, strict=True):
        if isinstance(result, DivergenceError) and log is not None:
            log(f"{cell.name} seed {seed}: {result}")
    return _rows(cell, seeds, results, time.perf_counter() - start)


# ----------------------------------------------------------------------------------------------
# the run: configuration, cells of this rank, the combined results


def _config(plan: Plan) -> dict:
    key = hashlib.sha256(json.dumps(plan.as_config(), sort_keys=True).encode()).hexdigest()[:16]
    return {"kind": "benchmark", **plan.as_config(), "key": key, "versions": versions()}


def _check_or_write_config(out: Path, plan: Plan, rank: int) -> None:
    """Write OUT/config.json (rank 0), or check that the one there is this plan's; SettingsDiffer
    names each setting that differs."""
    config, path = _config(plan), out / "config.json"
    if not path.is_file():
        if rank == 0:
            atomic_write_json(path, config)
        return
    try:
        existing = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        existing = {}
    if existing.get("key") != config["key"]:
        names = ("estimators", "tasks", "sizes", "seeds")
        differences = [
            (name, existing.get(name), config[name]) for name in names if existing.get(name) != config[name]
        ]
        raise SettingsDiffer(out, differences)


def interruption_note(out: Path, plan: Plan) -> str:
    """One line for a benchmark stopped midway: which cells are finished and how to resume."""
    cells = plan.cells()
    finished = [cell.name for cell in cells if cell.path(out).is_file()]
    listed = f": {', '.join(finished[:8])}{', ...' if len(finished) > 8 else ''}" if finished else ""
    return (
        f"{len(finished)} of {len(cells)} cells finished and saved under {Path(out) / 'cells'}{listed}; "
        "the cell in progress is lost. Run the same command again to resume: finished cells are skipped."
    )


def _wait_for(out: Path, cells: Sequence[Cell], wait_seconds: float, poll_seconds: float) -> list[Cell]:
    deadline = time.monotonic() + wait_seconds
    while True:
        missing = [cell for cell in cells if not cell.path(out).is_file()]
        if not missing or time.monotonic() > deadline:
            return missing
        time.sleep(poll_seconds)


def combined_rows(out: Path, plan: Plan) -> list[dict[str, str]]:
    """The rows of every finished cell of ``plan``, in the plan's order."""
    rows: list[dict[str, str]] = []
    for cell in plan.cells():
        if cell.path(out).is_file():
            rows += read_csv(cell.path(out))
    return rows


def run_benchmark(
    out: Path,
    plan: Plan,
    device: str = "cpu",
    progress_factory: Callable[[int], Callable[[int, str], None]] | None = None,
    log: Log | None = None,
    wait_seconds: float = 7 * 24 * 3600.0,
    poll_seconds: float = 2.0,
) -> Path | None:
    """Run this rank's unfinished cells, then (rank 0) wait for all cells and write
    OUT/results.csv; returns its path on rank 0, None elsewhere. ``progress_factory(total)`` is
    called with the number of cells this rank runs and returns ``progress(done, note)``, called
    before and after each cell; ``log`` gets one-line messages (skipped cells, divergences)."""
    out = make_out(out)
    rank, world = distributed_rank()
    _check_or_write_config(out, plan, rank)
    cells = plan.cells()
    mine = [cell for index, cell in enumerate(cells) if index % world == rank]
    pending = [cell for cell in mine if not cell.path(out).is_file()]
    if log is not None and len(pending) < len(mine):
        log(f"rank {rank}: {len(mine) - len(pending)} of {len(mine)} cells already finished, skipped")
    progress = progress_factory(len(pending)) if progress_factory is not None else None
    for done, cell in enumerate(pending):
        if progress is not None:
            progress(done, cell.name)
        write_csv(cell.path(out), RESULT_COLUMNS, run_cell(cell, plan.seeds, device, log))
    if progress is not None:
        progress(len(pending), "")
    if rank != 0:
        return None
    missing = _wait_for(out, cells, wait_seconds, poll_seconds)
    if missing and log is not None:
        log(f"results written without {len(missing)} unfinished cells: {', '.join(c.name for c in missing)}")
    rows = combined_rows(out, plan)
    write_csv(out / "results.csv", RESULT_COLUMNS, [[row[c] for c in RESULT_COLUMNS] for row in rows])
    return out / "results.csv"


def plan_from_names(
    estimators: Sequence[str],
    tasks: Sequence[str] | None,
    suite_name: str | None,
    sizes: Sequence[int],
    seeds: int,
) -> Plan:
    """A :class:`Plan` from names: ``tasks`` (any suite's task names) or the suite ``suite_name``
    (the main suite when both are None), seeds 0 .. seeds - 1."""
    if tasks and suite_name:
        raise checks.ParameterError("tasks", "and suite exclude each other: give one of them")
    chosen = [suite.get_task(name) for name in tasks] if tasks else suite.suite(suite_name or "main")
    checks.whole_number("seeds", seeds, 1)
    return Plan(
        tuple(parse_estimator(name) for name in estimators), tuple(chosen), tuple(sizes), tuple(range(seeds))
    )
