"""A grid of pretraining runs with their evaluation (``mitool vision sweep``).

The grid: lists of methods, losses, negatives K, EqCo alphas, batch sizes, temperatures and seeds
expand into their product, each axis only where it applies (K for moco and simo, not for simclr,
which uses all 2N - 2 in-batch negatives; alpha for the eqco loss only); ``None`` in a list is the
method's default. A combination that cannot run (simo with K >= batch, a moco queue shorter than
the batch, a batch that split-BN cannot divide, ...) is an error naming every such combination
before anything runs.

Each run is ``mitool vision pretrain`` followed by the kNN classifier (and, when asked, the linear
probe on cached features), in a process of its own, into ``OUT/runs/<name>/``:

* ``run.json``: the run's settings (the pretraining config and the evaluation), written first;
* ``checkpoint.pt``, ``metrics.jsonl``: the pretraining run's (see :mod:`mitool.vision.train`);
* ``log.txt``: the run's messages;
* ``result.json``: written last, atomically; a run is finished when it exists (a run whose loss
  diverged is finished too, with its message and no accuracy).

The same command on the same OUT skips finished runs and resumes an interrupted one from its last
checkpoint (exactly: the resumed run ends with the parameters of an uninterrupted one); a run
directory whose run.json differs from the new plan is an error naming the setting. Several sweeps
may share one OUT (to add seeds, or a reference run): the summary and the figures cover every
finished run under OUT/runs.

``parallel`` runs several processes side by side on one device (a small network leaves most of a
GPU idle); on a CPU each gets its share of the free cores. Under ``torchrun`` (``rank``, ``world``)
run i goes to rank i mod world, each rank's processes on its own GPU (LOCAL_RANK), and rank 0
waits for all runs and writes ``OUT/summary.csv`` (one row per run: :data:`SUMMARY_COLUMNS`) and
the figures (:mod:`mitool.vision.sweep_plots`).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mitool.bounds import INFONCE_FAMILY, takes_option
from mitool.checks import ParameterError
from mitool.files import atomic_write_json, write_csv
from mitool.progress import Progress
from mitool.vision.methods import method_class
from mitool.vision.records import read_records

__all__ = [
    "SUMMARY_COLUMNS",
    "Evaluation",
    "Grid",
    "SweepRun",
    "expand",
    "run_in_this_process",
    "run_sweep",
    "summary_rows",
    "write_summary",
]

RUN_FILE, RESULT_FILE, LOG_FILE, FAILED_FILE = "run.json", "result.json", "log.txt", "failed.json"
SUMMARY_COLUMNS: tuple[str, ...] = (
    "name", "method", "loss", "negatives", "alpha", "batch_size", "temperature", "seed", "epochs",
    "steps", "images_per_second", "loss_final", "mi_final", "npc_final", "npc_mean", "knn_top1",
    "knn_top5", "linear_top1", "wall_minutes", "status",
)  # fmt: skip
"""summary.csv: the run's settings; steps made; training images/s (two views each); loss, MI
estimate (nats) and NPC multiplier q_B averaged over the last 10% of the steps (``*_final``) and
q_B over the whole run (``npc_mean``); kNN top-1/top-5 and linear top-1 (fractions; empty when not
evaluated); wall minutes of the run's last process (pretraining and evaluation); status: done or
diverged."""

# torchrun's variables: a run's own process is a plain single-process run
_LAUNCHER_VARIABLES = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE",
)  # fmt: skip


@dataclass(frozen=True)
class Grid:
    """The sweep's axes (each a tuple; ``None`` = the method's default). Field names are the
    command's options' Python names, so errors name the option."""

    method: tuple[str, ...] = ("moco",)
    loss: tuple[str | None, ...] = (None,)
    negatives: tuple[int | None, ...] = (None,)
    alpha: tuple[float | None, ...] = (None,)
    batch_size: tuple[int, ...] = (256,)
    temperature: tuple[float | None, ...] = (None,)
    seeds: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class Evaluation:
    """What follows each pretraining run: kNN (k, temperature, an optional cap on the memory and
    query sets) and, with ``linear_epochs`` > 0, the linear probe on cached features."""

    knn_k: int = 200
    knn_temperature: float = 0.1
    knn_max_samples: int | None = None
    linear_epochs: int = 0


@dataclass(frozen=True)
class SweepRun:
    """One run: its directory name and its resolved pretraining config (a dict of PretrainConfig)."""

    name: str
    config: dict[str, Any]

    def value(self, key: str) -> Any:
        return self.config[key]


def _number_text(value: float) -> str:
    return f"{value:g}"


def run_name(config: dict[str, Any]) -> str:
    """``method-loss[-K<negatives>][-a<alpha>]-b<batch>-t<temperature>-s<seed>`` (K for the
    methods that have it, alpha for eqco)."""
    parts = [config["method"], config["loss"]]
    if config["negatives"] is not None:
        parts.append(f"K{config['negatives']}")
    if config["alpha"] is not None:
        parts.append(f"a{_number_text(config['alpha'])}")
    parts += [f"b{config['batch_size']}", f"t{_number_text(config['temperature'])}", f"s{config['seed']}"]
    return "-".join(parts)


def _combinations(grid: Grid, default_loss: Callable[[str], str]) -> list[dict[str, Any]]:
    """The product of the axes, each axis only where it applies (K for the methods that have it,
    alpha with the eqco loss, given or the method's default); duplicates removed, in order."""
    seen, combinations = set(), []
    for method, loss, negatives, alpha, batch, temperature, seed in itertools.product(
        grid.method, grid.loss, grid.negatives, grid.alpha, grid.batch_size, grid.temperature, grid.seeds
    ):
        if method_class(method).negatives_meaning is None:
            negatives = None
        if not takes_option(loss or default_loss(method), "alpha"):
            alpha = None
        settings = dict(method=method, loss=loss, negatives=negatives, alpha=alpha, batch_size=batch,
                        temperature=temperature, seed=seed)  # fmt: skip
        key = tuple(settings.items())
        if key not in seen:
            seen.add(key)
            combinations.append(settings)
    return combinations


def _check_axes_apply(grid: Grid, default_loss: Callable[[str], str]) -> None:
    """An axis given values that no method or loss of the grid can use is an error."""
    if any(value is not None for value in grid.negatives) and all(
        method_class(method).negatives_meaning is None for method in grid.method
    ):
        raise ParameterError("negatives", f"does not apply to {', '.join(grid.method)}; leave it out")
    losses = {loss or default_loss(method) for loss in grid.loss for method in grid.method}
    with_alpha = [name for name in INFONCE_FAMILY if takes_option(name, "alpha")]
    if any(value is not None for value in grid.alpha) and not losses & set(with_alpha):
        raise ParameterError("alpha", f"applies to the {', '.join(with_alpha)} loss only; add it to --loss")


def expand(grid: Grid, base: Any, out: str | os.PathLike) -> list[SweepRun]:
    """The runs of ``grid`` on top of ``base`` (a PretrainConfig with the shared settings), each
    resolved and checked as ``mitool vision pretrain`` would; out = ``OUT/runs/<name>``.
    ParameterError naming every invalid combination (the first problem's option)."""
    from mitool.vision.config import resolve_defaults

    native_size = _native_image_size(base)

    def default_loss(method: str) -> str:
        return method_class(method).defaults_for(base.dataset)["loss"]

    _check_axes_apply(grid, default_loss)
    runs: dict[str, SweepRun] = {}
    problems: list[tuple[str, str]] = []
    for settings in _combinations(grid, default_loss):
        try:
            resolved = resolve_defaults(dataclasses.replace(base, **settings), native_size)
            method_class(resolved.method).check_sizes(resolved, 1)  # each run is one process
        except ValueError as error:
            problems.append((getattr(error, "parameter", "method"), f"{_describe(settings)}: {error}"))
            continue
        name = run_name(dataclasses.asdict(resolved))
        resolved = dataclasses.replace(resolved, out=os.path.join(os.fspath(out), "runs", name))
        runs.setdefault(name, SweepRun(name, dataclasses.asdict(resolved)))
    if problems:
        listed = "; ".join(problem for _, problem in problems)
        raise ParameterError(problems[0][0], f"gives {len(problems)} invalid combination(s): {listed}")
    return list(runs.values())


def _describe(settings: dict[str, Any]) -> str:
    return " ".join(f"{key}={value}" for key, value in settings.items() if value is not None)


def _native_image_size(config: Any) -> int | None:
    from mitool.vision.datasets import dataset_info

    if config.image_size is not None or config.dataset == "imagefolder":
        return config.image_size
    return dataset_info(config.dataset, config.data_dir, **config.synthetic_options()).image_size


# ----------------------------------------------------------------------------------------------
# one run, in its own process


def _pretrain_config(config: dict[str, Any]) -> Any:
    from mitool.vision.config import PretrainConfig

    return PretrainConfig(**config)


def _planned_steps(config: dict[str, Any], train_sizes: dict[tuple, int]) -> int:
    """Optimizer steps the run will make (epochs x full batches, capped by max_steps)."""
    from mitool.vision.datasets import load_dataset

    synthetic = _pretrain_config(config).synthetic_options()
    key = (config["dataset"], config["data_dir"], tuple(synthetic.items()))
    if key not in train_sizes:
        train_sizes[key] = len(load_dataset(config["dataset"], "train", config["data_dir"], **synthetic))
    steps = config["epochs"] * (train_sizes[key] // config["batch_size"])
    return min(steps, config["max_steps"]) if config["max_steps"] else steps


def run_in_this_process(run_directory: str | os.PathLike, progress: bool = False) -> dict[str, Any]:
    """Pretrain (or resume) the run described by RUN/run.json, evaluate it, write RUN/result.json
    last; returns the result. A diverged run is a result too (status "diverged")."""
    import torch

    from mitool.vision.evaluate import evaluate_knn, load_backbone
    from mitool.vision.train import TrainingDiverged, pretrain

    directory = Path(run_directory)
    plan = json.loads((directory / RUN_FILE).read_text())
    config, evaluation = _pretrain_config(plan["config"]), Evaluation(**plan["evaluation"])
    started = time.perf_counter()
    checkpoint = directory / "checkpoint.pt"
    result: dict[str, Any] = {"name": plan["name"], "status": "done"}
    try:
        summary = pretrain(config, resume=checkpoint.is_file(), progress=progress)
        result.update(steps=summary["step"], epochs=summary["epoch"])
    except TrainingDiverged as error:
        result.update(status="diverged", message=str(error))
    if result["status"] == "done":
        backbone, _, saved, _ = load_backbone(str(checkpoint), torch.device(config.device))
        synthetic = config.synthetic_options()
        knn = evaluate_knn(
            backbone, config.dataset, config.data_dir, saved["image_size"], torch.device(config.device),
            evaluation.knn_k, evaluation.knn_temperature, batch_size=max(config.batch_size, 256),
            workers=config.workers, max_samples=evaluation.knn_max_samples, synthetic_options=synthetic,
        )  # fmt: skip
        result.update(knn_top1=knn["knn_top1"], knn_top5=knn["knn_top5"])
        if evaluation.linear_epochs:
            result["linear_top1"] = _linear_top1(config, str(checkpoint), directory, evaluation.linear_epochs)
    result["wall_seconds"] = time.perf_counter() - started
    atomic_write_json(directory / RESULT_FILE, result)
    return result


def _linear_top1(config: Any, checkpoint: str, directory: Path, epochs: int) -> float:
    """Top-1 of the linear probe on cached features (no augmentation), decay at 60% and 80%."""
    from mitool.vision.linear import LinearConfig, linear_evaluation

    milestones = tuple(sorted({max(1, round(epochs * 0.6)), max(1, round(epochs * 0.8))}))
    linear = LinearConfig(
        checkpoint=checkpoint, out=str(directory / "linear"), epochs=epochs, milestones=milestones,
        augment=False, workers=config.workers, device=config.device, seed=config.seed,
    )  # fmt: skip
    resume = (directory / "linear" / "linear.pt").is_file()
    return float(linear_evaluation(linear, resume=resume, progress=False)["top1"])


# ----------------------------------------------------------------------------------------------
# the sweep: plan, launch processes, follow them, summarise


def _write_plan(run: SweepRun, evaluation: Evaluation) -> None:
    """RUN/run.json, or a check that the one already there describes the same run."""
    directory = Path(run.config["out"])
    plan = {"name": run.name, "config": run.config, "evaluation": dataclasses.asdict(evaluation)}
    plan = json.loads(json.dumps(plan))  # as it reads back (tuples become lists)
    path = directory / RUN_FILE
    if path.is_file():
        saved = json.loads(path.read_text())
        for section in ("config", "evaluation"):
            for key, value in plan[section].items():
                if key not in _MAY_CHANGE and saved[section].get(key) != value:
                    raise ParameterError(
                        key,
                        f"differs from the run already in {directory} (was {saved[section].get(key)!r}, "
                        f"now {value!r}): give the same settings to resume, or another --out",
                    )
    atomic_write_json(path, plan)


_MAY_CHANGE = {"device", "workers", "checkpoint_every", "log_every", "data_dir", "knn_every", "out"}


def is_finished(run: SweepRun) -> bool:
    return (Path(run.config["out"]) / RESULT_FILE).is_file()


def _child_environment(device: str, threads: int | None) -> dict[str, str]:
    """The environment of a run's process: no torchrun variables (it is a single-process run),
    this rank's GPU only, and its share of the CPU threads."""
    environment = {key: value for key, value in os.environ.items() if key not in _LAUNCHER_VARIABLES}
    local_rank = os.environ.get("LOCAL_RANK")
    if device == "cuda" and local_rank is not None:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        choices = visible.split(",") if visible else None
        index = int(local_rank)
        environment["CUDA_VISIBLE_DEVICES"] = choices[index % len(choices)] if choices else str(index)
    if threads is not None and "MITOOL_THREADS" not in os.environ:
        environment["MITOOL_THREADS"] = str(threads)
    return environment


@dataclass
class _Active:
    """A run's process, and its log file open for it."""

    run: SweepRun
    process: subprocess.Popen
    log: Any


class SweepInterrupted(Exception):
    """SIGINT or SIGTERM: the running runs were stopped; ``finished`` and ``interrupted`` name them."""

    def __init__(self, finished: list[str], interrupted: list[str], signal_number: int) -> None:
        super().__init__(f"interrupted by signal {signal_number}")
        self.finished, self.interrupted, self.signal_number = finished, interrupted, signal_number


def _last_step(run: SweepRun) -> int:
    """The last logged step of a running run, read from the end of its metrics file."""
    path = Path(run.config["out"]) / "metrics.jsonl"
    try:
        with open(path, "rb") as file:
            file.seek(max(0, os.path.getsize(path) - 4096))
            lines = file.read().decode(errors="replace").splitlines()
    except OSError:
        return 0
    for line in reversed(lines):
        try:
            return int(json.loads(line).get("step", 0))
        except (json.JSONDecodeError, AttributeError, ValueError):
            continue
    return 0


class SweepFailed(RuntimeError):
    """Some runs ended without a result (their log.txt says why); the others were summarised."""


def run_sweep(
    runs: Sequence[SweepRun],
    evaluation: Evaluation,
    out: str | os.PathLike,
    parallel: int = 1,
    rank: int = 0,
    world: int = 1,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    threads: int | None = None,
    poll_seconds: float = 1.0,
) -> Path | None:
    """Run this rank's unfinished runs, ``parallel`` processes at a time; rank 0 then waits for
    every run and writes the summary and the figures (returns OUT/summary.csv; None elsewhere).
    ``threads``: torch threads of each run's process (CPU). Raises SweepInterrupted on SIGINT or
    SIGTERM, SweepFailed (after the summary) when a run's process failed."""
    if parallel < 1:
        raise ParameterError("parallel", f"must be a whole number >= 1, got {parallel}")
    mine = [run for index, run in enumerate(runs) if index % world == rank]
    for run in mine:
        _write_plan(run, evaluation)
    pending = [run for run in mine if not is_finished(run)]
    if log is not None and len(pending) < len(mine):
        log(f"{len(mine) - len(pending)} of {len(mine)} runs already finished, skipped")
    failures = _launch_all(pending, mine, parallel, progress, log, threads, poll_seconds)
    summary = None
    if rank == 0:
        _wait_for_others(runs, poll_seconds, log)
        summary = write_summary(out)
        from mitool.vision.sweep_plots import plot_sweep

        plot_sweep(out)
    if failures:
        raise SweepFailed(f"{len(failures)} run(s) failed: {', '.join(failures)} (see their log.txt)")
    return summary


def _launch_all(
    pending: list[SweepRun],
    mine: list[SweepRun],
    parallel: int,
    progress: bool,
    log: Callable[[str], None] | None,
    threads: int | None,
    poll_seconds: float,
) -> list[str]:
    """Keep ``parallel`` run processes going until ``pending`` is empty, drawing the progress in
    images (runs of several batch sizes weigh by their work); returns the names of failed runs."""
    train_sizes: dict[tuple, int] = {}
    planned = {run.name: _planned_steps(run.config, train_sizes) for run in mine}
    images = {run.name: planned[run.name] * run.config["batch_size"] for run in mine}
    done_images = sum(images[run.name] for run in mine if is_finished(run))
    bar = Progress(sum(images.values()), "vision sweep", enabled=progress, done=done_images)
    queue, active, failures = list(pending), [], []
    stop = _SignalCatcher()
    try:
        while queue or active:
            while queue and len(active) < parallel:
                active.append(_start(queue.pop(0), threads))
            stop.raise_if_caught(mine, active)
            for entry in [entry for entry in active if entry.process.poll() is not None]:
                active.remove(entry)
                done_images += images[entry.run.name]
                failures += _finish(entry, log)
            running = {entry.run.name: _last_step(entry.run) for entry in active}
            notes = ", ".join(f"{name} step {step}/{planned[name]}" for name, step in running.items())
            done_runs = sum(is_finished(run) for run in mine)
            busy = sum(step * _batch(mine, name) for name, step in running.items())
            bar.set_done(
                done_images + busy, f"{done_runs}/{len(mine)} runs done" + (f"; {notes}" if notes else "")
            )
            if active:
                time.sleep(poll_seconds)
    finally:
        stop.restore()
        bar.close()
    return failures


def _batch(runs: Sequence[SweepRun], name: str) -> int:
    return next(run.config["batch_size"] for run in runs if run.name == name)


def _finish(entry: _Active, log: Callable[[str], None] | None) -> list[str]:
    """After a run's process ended: its one-line outcome; [name] when it left no result."""
    entry.log.close()
    directory = Path(entry.run.config["out"])
    if is_finished(entry.run):
        if log is not None:
            log(f"finished {entry.run.name}: {_result_line(entry.run)}")
        return []
    atomic_write_json(directory / FAILED_FILE, {"exit_code": entry.process.returncode})
    if log is not None:
        log(f"run {entry.run.name} failed (exit {entry.process.returncode}); see {directory / LOG_FILE}")
    return [entry.run.name]


def _start(run: SweepRun, threads: int | None) -> _Active:
    """Start ``python -m mitool.vision.sweep RUN`` with the run's log as its output."""
    directory = Path(run.config["out"])
    directory.mkdir(parents=True, exist_ok=True)
    (directory / FAILED_FILE).unlink(missing_ok=True)
    log = open(directory / LOG_FILE, "a")
    command = [sys.executable, "-m", "mitool.vision.sweep", str(directory)]
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env=_child_environment(run.config["device"], threads)
    )
    return _Active(run, process, log)


def _result_line(run: SweepRun) -> str:
    result = json.loads((Path(run.config["out"]) / RESULT_FILE).read_text())
    if result["status"] != "done":
        return result["status"]
    return f"kNN top-1 {100 * result['knn_top1']:.2f}% in {result['wall_seconds'] / 60:.1f} min"


class _SignalCatcher:
    """Turns SIGINT/SIGTERM into a SweepInterrupted raised from the polling loop, after the run
    processes are stopped (each resumes from its last checkpoint)."""

    def __init__(self) -> None:
        self.signal_number: int | None = None
        self.previous = {}
        for number in (signal.SIGINT, signal.SIGTERM):
            try:
                self.previous[number] = signal.signal(number, self._catch)
            except ValueError:  # not the main thread: signals stay as they are
                pass

    def _catch(self, number: int, _frame: object) -> None:
        self.signal_number = number

    def raise_if_caught(self, mine: list[SweepRun], active: list[_Active]) -> None:
        if self.signal_number is None:
            return
        for entry in active:
            if entry.process.poll() is None:
                entry.process.terminate()
        for entry in active:
            try:
                entry.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                entry.process.kill()
            entry.log.close()
        finished = [run.name for run in mine if is_finished(run)]
        interrupted = [entry.run.name for entry in active if not is_finished(entry.run)]
        raise SweepInterrupted(finished, interrupted, self.signal_number)

    def restore(self) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)


def _wait_for_others(
    runs: Sequence[SweepRun], poll_seconds: float, log: Callable[[str], None] | None
) -> None:
    """Rank 0: wait until every run of the grid is finished (other ranks run theirs)."""
    reported = False
    while not all(is_finished(run) or (Path(run.config["out"]) / FAILED_FILE).is_file() for run in runs):
        if log is not None and not reported:
            log("waiting for the other ranks' runs")
            reported = True
        time.sleep(poll_seconds)


# ----------------------------------------------------------------------------------------------
# summary


def _mean(values: Sequence[float]) -> float:
    finite = [value for value in values if value is not None and math.isfinite(value)]
    return sum(finite) / len(finite) if finite else math.nan


def _training_figures(records: list[dict[str, Any]]) -> dict[str, float]:
    """images/s (total images / total time over the logged intervals), the means of loss, mi and
    npc over the last 10% of the steps, and npc over all of them."""
    training = [record for record in records if "loss" in record]
    if not training:
        return {
            key: math.nan for key in ("images_per_second", "loss_final", "mi_final", "npc_final", "npc_mean")
        }
    last_step = training[-1]["step"]
    tail = [record for record in training if record["step"] > 0.9 * last_step] or training[-1:]
    # an interval of s steps at r images/s took s * batch / r seconds: images/s = steps / sum(s / r)
    steps_before = [0] + [record["step"] for record in training[:-1]]
    step_seconds_per_image = sum(
        (record["step"] - before) / max(record["images_per_second"], 1e-9)
        for record, before in zip(training, steps_before, strict=True)
    )
    return {
        "images_per_second": last_step / step_seconds_per_image if step_seconds_per_image > 0 else math.nan,
        "loss_final": _mean([record["loss"] for record in tail]),
        "mi_final": _mean([record["mi"] for record in tail]),
        "npc_final": _mean([record["npc"] for record in tail]),
        "npc_mean": _mean([record["npc"] for record in training]),
    }


def summary_rows(out: str | os.PathLike) -> list[dict[str, Any]]:
    """One dict per finished run under OUT/runs (columns :data:`SUMMARY_COLUMNS`), sorted by name."""
    rows = []
    for directory in sorted(Path(out, "runs").glob("*/")):
        if not (directory / RESULT_FILE).is_file() or not (directory / RUN_FILE).is_file():
            continue
        plan = json.loads((directory / RUN_FILE).read_text())
        result = json.loads((directory / RESULT_FILE).read_text())
        config = plan["config"]
        figures = _training_figures(read_records(str(directory)))
        row = {
            key: config.get(key)
            for key in ("method", "loss", "negatives", "alpha", "batch_size", "temperature", "seed", "epochs")
        }
        row.update(figures)
        row.update(
            name=plan["name"], steps=result.get("steps"), knn_top1=result.get("knn_top1"),
            knn_top5=result.get("knn_top5"), linear_top1=result.get("linear_top1"),
            wall_minutes=result["wall_seconds"] / 60, status=result["status"],
        )  # fmt: skip
        rows.append(row)
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.6g}"
    return str(value)


def write_summary(out: str | os.PathLike) -> Path:
    """OUT/summary.csv from every finished run; returns its path."""
    path = Path(out) / "summary.csv"
    rows = summary_rows(out)
    write_csv(path, SUMMARY_COLUMNS, [[_cell(row[column]) for column in SUMMARY_COLUMNS] for row in rows])
    return path


def main(argv: list[str] | None = None) -> int:
    """``python -m mitool.vision.sweep RUN_DIR``: one run of a sweep, in this process."""
    from mitool.runtime import set_threads_to_free_cores

    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 1:
        print("usage: python -m mitool.vision.sweep OUT/runs/NAME", file=sys.stderr)
        return 2
    set_threads_to_free_cores()
    result = run_in_this_process(arguments[0])
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
