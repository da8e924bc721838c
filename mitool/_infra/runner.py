"""One runner for every grid of runs: the toy sweep, the MI benchmark and the vision sweep.

A grid is a list of cells, each with a ``name`` and a ``finished()`` test (a file the cell writes
last, atomically). :func:`run_grid`

1. holds the output folder's lock for the time of the run (one writer per folder and rank,
   :mod:`mitool._infra.locks`);
2. checks OUT/config.json against the grid's settings (:class:`SettingsDiffer` names each one
   that differs; rank 0 writes it);
3. gives cell i to rank i mod WORLD_SIZE (:class:`Launch`, from RANK, WORLD_SIZE and LOCAL_RANK
   as torchrun sets them; each rank's CUDA device is its LOCAL_RANK's, :meth:`Launch.device`). A
   *rank* here is always a process's place among the processes of a launcher (torchrun's RANK),
   never a listing order or a rank score;
4. skips the finished cells and runs the others: in this process (``run(cell)``), or each in a
   process of its own, ``parallel`` at a time (:class:`Processes`, :func:`mitool._infra.processes.spawn`);
5. on rank 0, waits for the other ranks' cells with one line naming the ranks awaited, and stops
   with :class:`RanksMissing` naming them when one never starts or stops showing signs of life
   (every rank touches OUT/.ranks/rank<r> every few seconds while it runs).

SIGTERM stops the run as Ctrl-C does (a KeyboardInterrupt where the program is): finished cells
stay saved, the processes of a cell are terminated (they save what they can) and
:func:`mitool.cli.common.resumable_run` prints the one line on what is saved. How processes are
started and stopped and how signals are caught is :mod:`mitool._infra.processes`.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mitool import checks
from mitool._infra.files import atomic_write_json
from mitool._infra.locks import hold_folder
from mitool._infra.processes import (
    Interruption,  # noqa: F401 - vision/run.py imports it from here still
    sigterm_as_interrupt,
    spawn,
    stop_processes,
)

__all__ = [
    "Launch",
    "Processes",
    "RankWait",
    "RanksMissing",
    "SettingsDiffer",
    "check_config",
    "holding",
    "local_ranks",
    "make_out",
    "run_grid",
    "versions",
]

Log = Callable[[str], None]


class Cell(Protocol):
    name: str

    def finished(self) -> bool: ...


@dataclass(frozen=True)
class Launch:
    """This process's place among the processes of a launcher: rank of world (torchrun's RANK of
    WORLD_SIZE), and its local rank on its machine (LOCAL_RANK; None without a launcher)."""

    rank: int = 0
    world: int = 1
    local_rank: int | None = None

    @classmethod
    def from_environment(cls) -> Launch:
        """RANK, WORLD_SIZE and LOCAL_RANK as torchrun sets them; (0, 1, None) without them."""
        try:
            rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
            local = os.environ.get("LOCAL_RANK")
            local_rank = int(local) if local not in (None, "") else None
        except ValueError:
            raise ValueError(
                "RANK, WORLD_SIZE and LOCAL_RANK must be whole numbers (as torchrun sets them)"
            ) from None
        if world < 1 or not 0 <= rank < world:
            raise ValueError(f"RANK must be in [0, WORLD_SIZE), got RANK={rank}, WORLD_SIZE={world}")
        return cls(rank, world, local_rank)

    @property
    def lock_rank(self) -> int | None:
        """The rank in the lock file's name: None for a single process."""
        return None if self.world == 1 else self.rank

    def mine(self, items: Sequence[Any]) -> list[Any]:
        """Item i goes to rank i mod world."""
        return [item for index, item in enumerate(items) if index % self.world == self.rank]

    def device(self, device: str) -> str:
        """Under a launcher a plain ``cuda`` means this process's own GPU, cuda:LOCAL_RANK (modulo the
        GPUs present), so that N processes of one machine do not all share cuda:0."""
        if device != "cuda" or self.local_rank is None:
            return device
        import torch

        count = torch.cuda.device_count()
        return f"cuda:{self.local_rank % count}" if count else device


def make_out(out: str | os.PathLike, parameter: str = "out") -> Path:
    """``out`` as a Path, created with its parents; ParameterError naming ``parameter`` when it is a
    file (or cannot be made a folder)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise checks.ParameterError(parameter, f"must be a directory; {out} is a file")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # a link to nowhere, or to itself: say why it is no folder
        os.stat(out)
        raise
    return out


def versions() -> dict[str, str]:
    """The versions that made a result: Python, torch, mitool and the git revision of the source
    tree when it is a checkout (what a committed benchmark result records)."""
    import platform
    from importlib import metadata

    found = {"python": platform.python_version()}
    for package in ("torch", "mitool"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "unknown"
    found["git"] = _git_revision()
    return found


def _git_revision() -> str:
    root = Path(__file__).resolve().parents[2]
    try:
        revision = subprocess.run(
            ["git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return revision or "unknown"


class SettingsDiffer(checks.ParameterError):
    """``out`` holds results made with other settings. ``differences``: (setting, value there, value
    now) for each setting that differs, named as the Python parameters."""

    def __init__(self, out: Path, differences: list[tuple[str, object, object]]) -> None:
        described = "; ".join(f"{name} {there} there, {now} now" for name, there, now in differences)
        super().__init__(
            "out", f"{out} holds results made with other settings ({described or 'config.json differs'}); "
            "use another directory, or the same settings to resume",
        )  # fmt: skip
        self.out = out
        self.differences = differences


def _flat(config: dict, compared: Sequence[str]) -> dict[str, object]:
    """The compared entries of ``config``, a dict entry's own entries in its place (named
    ``entry.name`` where two entries share a name)."""
    flat: dict[str, object] = {}
    for key in compared:
        value = config.get(key)
        if isinstance(value, dict) and key != "estimators":
            for name, item in value.items():
                flat[f"{key}.{name}" if name in flat else name] = item
        else:
            flat[key] = value
    return flat


def check_config(
    path: Path, config: dict, write: bool, compared: Sequence[str], may_differ: Sequence[str] = ()
) -> None:
    """Compare ``config`` with the one saved at ``path`` on the ``compared`` entries (those of a dict
    entry one by one), ignoring ``may_differ``; SettingsDiffer naming each difference. Without a saved
    one, write ``config`` there when ``write`` (rank 0)."""
    if not path.is_file():
        if write:
            atomic_write_json(path, config)
        return
    try:
        existing = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        existing = {}
    there, now = _flat(existing, compared), _flat(json.loads(json.dumps(config)), compared)
    differences = [(name, there.get(name), value) for name, value in now.items()
                   if name not in may_differ and there.get(name) != value]  # fmt: skip
    if differences:
        raise SettingsDiffer(path.parent, differences)


@dataclass(frozen=True)
class RankWait:
    """How long rank 0 waits for the other ranks: a rank that has not started after
    ``start_seconds``, or whose sign of life is older than ``silent_seconds``, stops the wait.
    $MITOOL_RANK_TIMEOUT (seconds) sets both."""

    start_seconds: float = 600.0
    silent_seconds: float = 300.0
    poll_seconds: float = 2.0

    @classmethod
    def from_environment(cls) -> RankWait:
        text = os.environ.get("MITOOL_RANK_TIMEOUT")
        if not text:
            return cls()
        seconds = checks.positive("MITOOL_RANK_TIMEOUT", float(text))
        return cls(seconds, seconds, min(2.0, seconds / 4))


class RanksMissing(RuntimeError):
    """Rank 0 waited for ranks that never started or stopped; the message names them and their cells."""


HEARTBEAT_SECONDS = 5.0


def _rank_file(out: Path, rank: int) -> Path:
    return out / ".ranks" / f"rank{rank}"


@contextlib.contextmanager
def _heartbeat(out: Path, rank: int) -> Iterator[None]:
    """Touch OUT/.ranks/rank<r> now and every :data:`HEARTBEAT_SECONDS` within the block."""
    path = _rank_file(out, rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()

    def beat() -> None:
        while True:
            with contextlib.suppress(OSError):
                path.touch()
            if stop.wait(HEARTBEAT_SECONDS):
                return

    thread = threading.Thread(target=beat, name="mitool-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _ended(cell: Cell) -> bool:
    ended = getattr(cell, "ended", None)
    return ended() if ended is not None else cell.finished()


def _wait_for_ranks(
    out: Path, cells: Sequence[Cell], launch: Launch, wait: RankWait, log: Log | None
) -> None:
    """Rank 0: wait until every cell has ended; RanksMissing for a rank that never started or went
    silent with cells unfinished."""
    started = time.monotonic()
    announced: set[int] = set()
    while True:
        missing: dict[int, list[str]] = {}
        for index, cell in enumerate(cells):
            if not _ended(cell):
                missing.setdefault(index % launch.world, []).append(cell.name)
        if not missing:
            return
        new = sorted(set(missing) - announced)
        if new and log is not None:
            described = "; ".join(f"rank {r}: {len(missing[r])} cells" for r in new)
            log(f"rank 0: waiting for the other ranks' cells ({described})")
            announced.update(new)
        _check_alive(out, missing, time.monotonic() - started, wait)
        time.sleep(wait.poll_seconds)


def _check_alive(out: Path, missing: dict[int, list[str]], waited: float, wait: RankWait) -> None:
    for rank, names in sorted(missing.items()):
        listed = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        path = _rank_file(out, rank)
        if not path.exists():
            if waited > wait.start_seconds:
                raise RanksMissing(
                    f"rank {rank} has not started after {waited:.0f} s and its cells are unfinished "
                    f"({listed}); "
                    f"start it (RANK={rank} with the same command) or run with WORLD_SIZE=1"
                )
            continue
        silent = time.time() - path.stat().st_mtime
        if silent > wait.silent_seconds:
            raise RanksMissing(
                f"rank {rank} stopped {silent:.0f} s ago with its cells unfinished ({listed}); run the same "
                f"command as rank {rank} again: finished cells are skipped"
            )


@dataclass(frozen=True)
class Processes:
    """How the cells of a grid run in processes of their own: ``start(cell) -> Popen`` (use
    :func:`spawn`), ``parallel`` at a time; ``ended(cell, process)`` when one ends, ``poll(running)``
    with the cells still running every ``poll_seconds``."""

    start: Callable[[Any], subprocess.Popen]
    parallel: int = 1
    ended: Callable[[Any, subprocess.Popen], None] | None = None
    poll: Callable[[list[Any]], None] | None = None
    poll_seconds: float = 1.0


def run_grid(
    out: Path,
    cells: Sequence[Cell],
    launch: Launch,
    run: Callable[[Any], None] | None = None,
    processes: Processes | None = None,
    log: Log | None = None,
    wait: RankWait | None = None,
    noun: str = "cells",
) -> bool:
    """Run this rank's unfinished cells, each by ``run(cell)`` in this process or, given
    ``processes``, in a process of its own; then, on rank 0, wait for the other ranks' cells (see
    the module; a cell may have ``ended()``, true also for a failure that should not hold up the
    others, else ``finished()`` counts). Returns True on rank 0 (every cell ended), False elsewhere.
    Call it within :func:`holding` (the folder's lock) after :func:`check_config`."""
    mine = launch.mine(list(cells))
    pending = [cell for cell in mine if not cell.finished()]
    if log is not None and len(pending) < len(mine):
        log(f"rank {launch.rank}: {len(mine) - len(pending)} of {len(mine)} {noun} already finished, skipped")
    with _heartbeat(out, launch.rank):
        if processes is None:
            for cell in pending:
                run(cell)  # type: ignore[misc]
        else:
            _run_processes(pending, processes)
        if launch.rank != 0:
            return False
        _wait_for_ranks(out, cells, launch, wait or RankWait.from_environment(), log)
    return True


@contextlib.contextmanager
def holding(out: str | os.PathLike, launch: Launch, log: Log | None = None) -> Iterator[Path]:
    """The output folder made (:func:`make_out`) and its lock held, SIGTERM acting as Ctrl-C."""
    path = make_out(out)
    with hold_folder(path, launch.lock_rank, note=log), sigterm_as_interrupt():
        yield path


def _run_processes(pending: list[Cell], processes: Processes) -> None:
    """Keep ``processes.parallel`` processes going until every cell of ``pending`` has run; on an
    interrupt (Ctrl-C, SIGTERM) terminate them (they save what they can), wait, and re-raise."""
    parallel = checks.whole_number("parallel", processes.parallel, 1)
    queue, active = list(pending), []
    try:
        while queue or active:
            while queue and len(active) < parallel:
                cell = queue.pop(0)
                active.append((cell, processes.start(cell)))
            for cell, process in [entry for entry in active if entry[1].poll() is not None]:
                active.remove((cell, process))
                if processes.ended is not None:
                    processes.ended(cell, process)
            if processes.poll is not None:
                processes.poll([cell for cell, _ in active])
            if active:
                time.sleep(processes.poll_seconds)
    finally:
        stop_processes([process for _, process in active])


@contextlib.contextmanager
def local_ranks(count: int, command: Sequence[str]) -> Iterator[None]:
    """Within the block this process is rank 0 of ``count`` ranks on this machine, the others
    copies of ``command`` (this command, run again) started with RANK and WORLD_SIZE set and one
    torch thread each; they end with the block (or with this process, killed or not). A rank that
    stops early is reported by rank 0's wait after MITOOL_RANK_TIMEOUT (default here 120 s)."""
    if count <= 1 or Launch.from_environment().world > 1:
        yield
        return
    names = ("RANK", "WORLD_SIZE", "MITOOL_THREADS", "MITOOL_RANK_TIMEOUT")
    saved = {name: os.environ.get(name) for name in names}
    shared = {"WORLD_SIZE": str(count), "MITOOL_THREADS": "1",
              "MITOOL_RANK_TIMEOUT": saved["MITOOL_RANK_TIMEOUT"] or "120"}  # fmt: skip
    quiet = open(os.devnull, "w")  # noqa: SIM115 - the children's output, closed with them
    children = [
        spawn(command, quiet, {**os.environ, **shared, "RANK": str(rank)}) for rank in range(1, count)
    ]
    os.environ.update({**shared, "RANK": "0"})
    try:
        yield
    finally:
        stop_processes(children)
        quiet.close()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
