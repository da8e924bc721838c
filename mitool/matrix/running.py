"""Where the blocks run: in this process, in worker processes on this machine, or on a Dask
cluster; the finished blocks handed to ``done`` as they come."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np

from mitool.matrix.blocks import Columns

_WORKER_DATA: tuple[Columns, np.ndarray | None] | None = None


def _set_worker_data(data: Columns, given: np.ndarray | None, owner: int) -> None:
    """A worker process's initializer: killed with its parent
    (:func:`mitool._infra.processes.die_with_parent`; ``owner`` the PID that made the pool); the data,
    once; one thread for everything."""
    import os
    import signal

    from mitool._infra.processes import die_with_parent

    die_with_parent(owner)
    global _WORKER_DATA
    _WORKER_DATA = (data, given)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it ends the workers
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    from mitool import runtime

    runtime._chosen = 1  # a forked worker inherits the parent's count: the trees' queries get one thread
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = "1"
    if "torch" in __import__("sys").modules:  # pragma: no cover - nothing here imports it
        __import__("torch").set_num_threads(1)


def _in_worker(function: Callable[..., Any], *arguments: Any) -> Any:
    assert _WORKER_DATA is not None
    return function(*_WORKER_DATA, *arguments)


Task = tuple[str, Callable[..., Any], tuple[Any, ...]]
"""A block: its key (its file's name), the function and its arguments after (data, given)."""


def _run_serial(tasks: list[Task], data: Columns, given: np.ndarray | None,
                done: Callable[[str, Any], None]) -> None:  # fmt: skip
    for key, function, arguments in tasks:
        done(key, function(data, given, *arguments))


def _run_processes(tasks: list[Task], data: Columns, given: np.ndarray | None,
                   done: Callable[[str, Any], None], workers: int) -> None:  # fmt: skip
    """The blocks in ``workers`` processes; an interrupt cancels what has not started. The workers
    are forked where the parent runs no other thread (they inherit the data and mitool's imports,
    and a script without a ``__main__`` guard works); otherwise they start from a fork server (or
    fresh, where there is none), which re-imports the main module as multiprocessing does. Either
    way a worker dies with this process (:func:`_set_worker_data`). A worker that dies under the
    run (killed, or by the out-of-memory killer) stops it with
    :class:`mitool._infra.processes.WorkersLost`; the finished blocks are already saved."""
    import multiprocessing
    import os
    import threading
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    from mitool._infra.processes import WorkersLost

    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        method = "fork"
    else:
        method = "forkserver" if "forkserver" in methods else "spawn"
    context = multiprocessing.get_context(method)
    executor = ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=_set_worker_data,
        initargs=(data, given, os.getpid()),
    )  # fmt: skip
    finished_all, broken, started = False, False, {}
    try:
        running = {}
        for key, function, arguments in tasks:
            running[executor.submit(_in_worker, function, *arguments)] = key
            started.update(getattr(executor, "_processes", None) or {})
        while running:
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                done(running.pop(future), future.result())
        finished_all = True
    except BrokenProcessPool:
        broken = True
    finally:
        if not finished_all:  # stopped: the blocks under way are lost, their workers ended now
            for process in list((getattr(executor, "_processes", None) or {}).values()):
                process.terminate()
        executor.shutdown(wait=True, cancel_futures=True)
    if broken:  # the workers joined: their exit codes are known
        raise WorkersLost(_how_a_worker_ended(started.values()))


def _how_a_worker_ended(processes: Any) -> str:
    """What ended the pool's workers, from their exit codes, in words: the first that did not end
    by SIGTERM (what the pool sends the others once one is lost), else SIGTERM."""
    import signal

    codes = [process.exitcode for process in processes if process.exitcode not in (None, 0)]
    codes.sort(key=lambda code: code == -signal.SIGTERM)
    if not codes:
        return "a worker process ended abruptly"
    if codes[0] == -signal.SIGKILL:
        return "a worker process was killed (SIGKILL: by hand, or by the out-of-memory killer)"
    if codes[0] < 0:
        name = signal.Signals(-codes[0]).name if -codes[0] in signal.valid_signals() else -codes[0]
        return f"a worker process was killed by signal {name}"
    return f"a worker process exited with code {codes[0]}"


def _run_dask(tasks: list[Task], data: Columns, given: np.ndarray | None,
              done: Callable[[str, Any], None], client: Any) -> None:  # fmt: skip
    """The blocks on a Dask cluster: the data scattered once, one task per block. A lost scheduler
    or lost workers (the blocks under way cancelled, the scattered data gone with the workers that
    held it, a block whose workers died each time it ran) stop the run with
    :class:`mitool._infra.processes.WorkersLost`; the finished blocks are already saved."""
    from concurrent.futures import CancelledError

    from distributed import KilledWorker, as_completed

    from mitool._infra.processes import WorkersLost

    lost = (CancelledError, KilledWorker, OSError, TimeoutError)  # CommClosedError is an OSError
    futures: dict[Any, str] = {}
    try:
        try:
            data_future = client.scatter(data, broadcast=True, hash=False)
            given_future = None if given is None else client.scatter(given, broadcast=True, hash=False)
            for key, function, arguments in tasks:
                futures[client.submit(function, data_future, given_future, *arguments, pure=False)] = key
        except lost as error:
            raise WorkersLost(_dask_loss(error, client)) from None
        for future in as_completed(list(futures)):
            try:
                result = future.result()
            except lost as error:
                raise WorkersLost(_dask_loss(error, client)) from None
            done(futures[future], result)
    finally:
        with contextlib.suppress(*lost):
            client.cancel([future for future in futures if not future.done()])


def _dask_loss(error: BaseException, client: Any) -> str:
    """What a Dask error raised while the blocks ran says was lost, in words."""
    from distributed import KilledWorker

    address = getattr(getattr(client, "scheduler", None), "address", None) or "its address"
    if isinstance(error, KilledWorker):
        times = error.allowed_failures + 1
        return f"Dask workers died running a block, {times} times (killed, or out of memory: see their logs)"
    reason = getattr(error, "reason", None)
    if reason is None or reason == "scheduler-connection-lost":
        return f"the connection to the Dask scheduler at {address} was lost"
    return f"the Dask cluster lost its workers, and with them the data and the blocks under way ({reason})"
