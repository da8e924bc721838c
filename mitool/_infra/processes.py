"""The processes the runs start and the signals that stop them, for every grid of runs (the toy
sweep, the MI benchmark, the vision sweep; :mod:`mitool._infra.runner`) and for one training run.

* :func:`spawn` starts a child that gets SIGTERM when its parent dies, however it dies (a
  parent-death signal), so no run goes on alone after a ``kill -9`` of the sweep;
  :func:`stop_processes` ends children: SIGTERM, then SIGKILL after a grace period.
* :func:`die_with_parent`: the same for the workers of a process pool (its initializer), forked,
  spawned or started by a fork server; :class:`WorkersLost` says that workers died under a run.
* :func:`sigterm_as_interrupt`: SIGTERM stops the program as Ctrl-C does (:class:`Terminated`, a
  KeyboardInterrupt, raised where the program is), so finished cells stay saved and
  :func:`mitool.cli.common.resumable_run` prints the one line on what is saved.
* :class:`Interruption`: a training run notes the first SIGINT or SIGTERM and stops after its
  current step with a checkpoint; a second one stops at once.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = [
    "Interruption",
    "Terminated",
    "WorkersLost",
    "die_with_parent",
    "sigterm_as_interrupt",
    "spawn",
    "stop_processes",
]


class WorkersLost(RuntimeError):
    """The processes that computed a run's work are gone (a worker killed or taken by the
    out-of-memory killer, a cluster's workers or scheduler lost); the message says which. What was
    finished and saved stays saved: the same command resumes from it."""


def stop_processes(processes: Sequence[subprocess.Popen], grace_seconds: float = 30.0) -> None:
    """SIGTERM to each running process, then SIGKILL to those still running after ``grace_seconds``."""
    running = [process for process in processes if process.poll() is None]
    for process in running:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
    deadline = time.monotonic() + grace_seconds
    for process in running:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _parent_death_signal(number: int) -> None:
    """Ask the kernel for signal ``number`` when the parent of this process ends (Linux prctl
    PR_SET_PDEATHSIG; nothing elsewhere). The parent is the thread that forked this process: the
    main thread of a pool's owner, or the single thread of a fork server."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(number))  # PR_SET_PDEATHSIG


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """In a child: SIGTERM when the parent dies (:func:`_parent_death_signal`); a new process group,
    so that the terminal's Ctrl-C reaches the runner, which stops its children itself."""
    os.setpgrp()
    _parent_death_signal(signal.SIGTERM)


def die_with_parent(owner: int) -> None:
    """In a worker of a process pool (call it first in the pool's initializer): SIGKILL when the
    process that made the pool ends, however it ends, ``kill -9`` and the out-of-memory killer
    included, so that no worker outlives the run that started it (waiting on a pipe for work that
    never comes, holding the run's memory and its files). ``owner`` is that process's PID, taken
    before the worker started.

    A forked or spawned worker is the owner's child: the kernel sends it the signal when its parent
    ends (:func:`_parent_death_signal`). A worker started by a fork server is the fork server's
    child, and the fork server ends only when the owner and every worker have closed its pipe, so
    the worker watches the owner itself (:func:`_watch`), as every worker does outside Linux, where
    there is no parent-death signal. The kernel signals only an end that comes after the request,
    so a worker whose parent is no longer the owner when it looks (the owner died before: the worker
    was adopted) is handled the same way: the watch finds the owner gone and ends the worker at
    once."""
    _parent_death_signal(signal.SIGKILL)
    if os.getppid() != owner or not sys.platform.startswith("linux"):  # elsewhere no such signal
        _watch(owner)


def _watch(owner: int) -> None:
    """SIGKILL to this process when process ``owner`` ends (at once if it has ended): a daemon
    thread waits on a pidfd of the owner (Linux 5.3 and later: no polling, no PID reuse), or where
    there is none looks once a second whether the owner runs."""

    def end() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    try:
        handle = os.pidfd_open(owner)
    except ProcessLookupError:
        end()
        return
    except (AttributeError, OSError):  # no pidfd: look once a second
        handle = None
        if not _running(owner):
            end()

    def wait() -> None:
        if handle is not None:  # readable when the owner has ended
            poller = select.poll()
            poller.register(handle, select.POLLIN)
            poller.poll()
        else:
            while _running(owner):
                time.sleep(1.0)
        end()

    threading.Thread(target=wait, name="mitool-watch-owner", daemon=True).start()


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - another user's process
        return True
    return True


def spawn(command: Sequence[str], output: Any, environment: dict[str, str] | None = None) -> subprocess.Popen:
    """Start ``command`` with its stdout and stderr to ``output`` (an open file); it ends with the runner
    (see :func:`_die_with_parent`)."""
    return subprocess.Popen(
        list(command), stdout=output, stderr=subprocess.STDOUT, env=environment, preexec_fn=_die_with_parent
    )


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, as Ctrl-C raises KeyboardInterrupt."""


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within ``with``, SIGTERM stops the program as SIGINT (Ctrl-C) does; in the main thread only."""

    def terminate(number: int, frame: object) -> None:
        raise Terminated

    try:
        previous = signal.signal(signal.SIGTERM, terminate)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Interruption:
    """Catches SIGINT and SIGTERM while a run trains (within ``with``, in the main thread): the
    first one is noted in ``received`` and the run stops after its current step with a
    checkpoint; a second one stops at once (KeyboardInterrupt)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.received: str | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Interruption:
        if threading.current_thread() is threading.main_thread():
            self._previous = {number: signal.signal(number, self._note) for number in self.SIGNALS}
        return self

    def __exit__(self, *exception: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}

    def raise_if_received(self) -> None:
        """Stop here if a signal came: :class:`Terminated` for SIGTERM, KeyboardInterrupt for SIGINT;
        for loops that stop between steps rather than inside one (a signal raised inside
        ``torch.func.vmap`` leaves torch's transform stack half unwound)."""
        if self.received == "SIGTERM":
            raise Terminated
        if self.received is not None:
            raise KeyboardInterrupt

    def _note(self, number: int, frame: object) -> None:
        if self.received is not None:
            self.__exit__()
            raise KeyboardInterrupt
        self.received = signal.Signals(number).name
