"""Running a vision sweep on :mod:`mitool._infra.runner`: each run in a process of its own
(:mod:`mitool.vision.sweep.worker`) into ``OUT/runs/<name>/``, ``parallel`` at a time, with one
progress bar over the images of every run; then (rank 0) the summary and the figures.

A run's folder holds ``run.json`` (its settings, written first: a rerun whose settings differ is an
error naming the setting, apart from those that may change on resume,
:data:`mitool.vision.config.RESUMABLE_CHANGES`), ``checkpoint.pt`` and ``metrics.jsonl``,
``log.txt`` (its messages) and ``result.json``, written last: the run is finished when it exists.
A run whose process failed leaves ``failed.json`` (its exit code): the summary goes on without it,
the sweep then ends with :class:`SweepFailed`, and a rerun tries it again. Several sweeps may share
one OUT (to add seeds, or a reference run): the summary and the figures cover every finished run
under OUT/runs. The sweep's own lock is ``OUT/.mitool-lock``; each run's process holds its folder's.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mitool._infra.files import atomic_write_json
from mitool._infra.progress import Progress
from mitool._infra.runner import Launch, Processes, check_config, holding, run_grid, spawn
from mitool.vision.choices import smoke_test_note
from mitool.vision.sweep.grid import Evaluation, SweepRun
from mitool.vision.sweep.worker import RESULT_FILE, RUN_FILE

__all__ = ["SweepFailed", "run_sweep"]

LOG_FILE, FAILED_FILE = "log.txt", "failed.json"

# torchrun's variables: a run's own process is a plain single-process run
_LAUNCHER_VARIABLES = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE",
)  # fmt: skip


class SweepFailed(RuntimeError):
    """Some runs ended without a result (their log.txt says why); the others were summarised."""


@dataclass(frozen=True)
class RunCell:
    """A run of the sweep as a cell of the runner."""

    run: SweepRun

    @property
    def name(self) -> str:
        return self.run.name

    @property
    def directory(self) -> Path:
        return Path(self.run.config["out"])

    def finished(self) -> bool:
        return (self.directory / RESULT_FILE).is_file()

    def ended(self) -> bool:
        """Finished, or failed (so that rank 0 does not wait for it)."""
        return self.finished() or (self.directory / FAILED_FILE).is_file()


def _write_plan(run: SweepRun, evaluation: Evaluation) -> None:
    """RUN/run.json, or a check that the one already there describes the same run."""
    from mitool.vision.config import RESUMABLE_CHANGES

    plan = {"name": run.name, "config": run.config, "evaluation": dataclasses.asdict(evaluation)}
    path = Path(run.config["out"]) / RUN_FILE
    check_config(
        path, plan, write=False, compared=("config", "evaluation"), may_differ=(*RESUMABLE_CHANGES, "out")
    )
    atomic_write_json(path, plan)


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


def _last_step(directory: Path) -> int:
    """The last logged step of a running run, read from the end of its metrics file."""
    path = directory / "metrics.jsonl"
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


def _planned_steps(config: dict[str, Any], train_sizes: dict[tuple, int]) -> int:
    """Optimizer steps the run will make (epochs x full batches, capped by max_steps)."""
    from mitool.vision.config import PretrainConfig
    from mitool.vision.datasets import load_dataset

    synthetic = PretrainConfig(**config).synthetic_options()
    key = (config["dataset"], config["data_dir"], tuple(synthetic.items()))
    if key not in train_sizes:
        train_sizes[key] = len(load_dataset(config["dataset"], "train", config["data_dir"], **synthetic))
    steps = config["epochs"] * (train_sizes[key] // config["batch_size"])
    return min(steps, config["max_steps"]) if config["max_steps"] else steps


def _result_line(cell: RunCell) -> str:
    result = json.loads((cell.directory / RESULT_FILE).read_text())
    if result["status"] != "done":
        return result["status"]
    note = smoke_test_note(cell.run.config["dataset"])
    return f"kNN top-1 {100 * result['knn_top1']:.2f}% in {result['wall_seconds'] / 60:.1f} min" + (
        f" ({note})" if note else ""
    )


class _Follower:
    """Starts the runs' processes, follows them on one progress bar (in images: runs of several batch
    sizes weigh by their work) and records how each ended."""

    def __init__(
        self, cells: Sequence[RunCell], threads: int | None, progress: bool, log: Callable | None
    ) -> None:
        sizes: dict[tuple, int] = {}
        self.planned = {cell.name: _planned_steps(cell.run.config, sizes) for cell in cells}
        self.images = {cell.name: self.planned[cell.name] * cell.run.config["batch_size"] for cell in cells}
        self.cells, self.threads, self.log = list(cells), threads, log
        self.done_images = sum(self.images[cell.name] for cell in cells if cell.finished())
        self.bar = Progress(
            sum(self.images.values()), "vision sweep", enabled=progress, done=self.done_images
        )
        self.failures: list[str] = []
        self.logs: dict[str, Any] = {}

    def start(self, cell: RunCell) -> Any:
        cell.directory.mkdir(parents=True, exist_ok=True)
        (cell.directory / FAILED_FILE).unlink(missing_ok=True)
        self.logs[cell.name] = open(cell.directory / LOG_FILE, "a")
        command = [sys.executable, "-m", "mitool.vision.sweep.worker", str(cell.directory)]
        return spawn(
            command, self.logs[cell.name], _child_environment(cell.run.config["device"], self.threads)
        )

    def ended(self, cell: RunCell, process: Any) -> None:
        self.logs.pop(cell.name).close()
        self.done_images += self.images[cell.name]
        if cell.finished():
            if self.log is not None:
                self.log(f"finished {cell.name}: {_result_line(cell)}")
            return
        atomic_write_json(cell.directory / FAILED_FILE, {"exit_code": process.returncode})
        self.failures.append(cell.name)
        if self.log is not None:
            self.log(f"run {cell.name} failed (exit {process.returncode}); see {cell.directory / LOG_FILE}")

    def poll(self, running: list[RunCell]) -> None:
        steps = {cell.name: _last_step(cell.directory) for cell in running}
        busy = sum(
            step * cell.run.config["batch_size"] for cell, step in zip(running, steps.values(), strict=True)
        )
        notes = ", ".join(f"{name} step {step}/{self.planned[name]}" for name, step in steps.items())
        done_runs = sum(cell.finished() for cell in self.cells)
        self.bar.set_done(
            self.done_images + busy,
            f"{done_runs}/{len(self.cells)} runs done" + (f"; {notes}" if notes else ""),
        )

    def close(self) -> None:
        for handle in self.logs.values():
            handle.close()
        self.bar.close()


def run_sweep(
    runs: Sequence[SweepRun],
    evaluation: Evaluation,
    out: str | os.PathLike,
    parallel: int = 1,
    launch: Launch | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    threads: int | None = None,
) -> Path | None:
    """Run this rank's unfinished runs, ``parallel`` processes at a time; rank 0 then waits for
    every run and writes the summary and the figures (returns OUT/summary.csv; None elsewhere).
    ``threads``: torch threads of each run's process (CPU). An interrupt (Ctrl-C, SIGTERM) stops the
    runs' processes (each resumes from its last checkpoint) and is raised on; SweepFailed (after
    the summary) when a run's process failed."""
    launch = launch or Launch.from_environment()
    with holding(out, launch, log) as folder:
        if launch.rank == 0 and log is not None:
            log(f"vision sweep: {len(runs)} runs into {folder / 'runs'}, {parallel} at a time")
        cells = [RunCell(run) for run in runs]
        for cell in launch.mine(cells):
            _write_plan(cell.run, evaluation)
        follower = _Follower(launch.mine(cells), threads, progress, log)
        try:
            processes = Processes(follower.start, parallel, follower.ended, follower.poll)
            finished = run_grid(folder, cells, launch, processes=processes, log=log, noun="runs")
        finally:
            follower.close()
        summary = None
        if finished:
            from mitool.vision.sweep.plots import plot_sweep
            from mitool.vision.sweep.summary import write_summary

            summary = write_summary(folder)
            plot_sweep(folder)
    if follower.failures:
        raise SweepFailed(
            f"{len(follower.failures)} run(s) failed: {', '.join(follower.failures)} (see their log.txt)"
        )
    return summary
