"""One writer per output folder.

``with hold_folder(out): ...`` takes ``OUT/.mitool-lock`` (under a launcher, one per rank:
``.mitool-lock-rank<r>``) for the time of the block: an exclusive ``flock`` on the file, which the
kernel releases when the process ends however it ends (SIGKILL included), and in the file the
owner's PID, host and command. A second writer of the same folder is refused with
:class:`FolderInUse`, one line naming the owner. A lock file left by a process that is gone (its
``flock`` released, its record still there) is taken over, and the note says whose it was. When the
block ends the file is removed (a process that opened it just before finds, once it holds the lock,
that the file is no longer the one at the path, and starts again). Once the lock is held, the
temporary files of writes that a killed process left in the folder are removed
(:func:`mitool._infra.files.remove_leftovers`).

Only the process that took the lock holds it. A process forked from it (a worker of a local pool)
would share the ``flock`` through the inherited descriptor and keep it after the owner died, so
the handles of the locks held are closed in every forked child (``os.register_at_fork``): the lock
goes with its owner, and the next run takes it over. (Closing a copy of the descriptor leaves the
owner's lock as it is; an ``exec`` closes them anyway, the handles being non-inheritable.) If
processes that a dead owner left still hold a lock (forked by other code), the next run waits a
few seconds for them to end, then is refused with their PIDs.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from mitool._infra.files import _running, remove_leftovers
from mitool.checks import ParameterError

__all__ = ["FolderInUse", "hold_folder", "lock_path"]

_HELD: set[int] = set()
"""The handles of the locks this process holds."""


def _close_in_child() -> None:
    for handle in _HELD:
        with contextlib.suppress(OSError):
            os.close(handle)
    _HELD.clear()


os.register_at_fork(after_in_child=_close_in_child)

ORPHANS_WAIT = 5.0
"""Seconds a run waits for processes that a dead owner left holding a lock to end."""


class FolderInUse(ParameterError):
    """Another process writes the folder now; the message names it."""


def lock_path(out: Path, rank: int | None = None) -> Path:
    """The lock file of ``out`` (of rank ``rank`` under a launcher)."""
    return Path(out) / (".mitool-lock" if rank is None else f".mitool-lock-rank{rank}")


def _owner_text(text: str) -> str:
    try:
        owner = json.loads(text)
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(owner["started"]))
        return f"process {owner['pid']} on {owner['host']} (since {started}: {owner['command']})"
    except (ValueError, KeyError, TypeError):
        return "another process"


def _dead_owner(text: str) -> int | None:
    """The PID of the record's owner when it ran on this host and runs no more; else None."""
    try:
        owner = json.loads(text)
        pid, host = int(owner["pid"]), owner["host"]
    except (ValueError, KeyError, TypeError):
        return None
    return pid if host == socket.gethostname() and not _running(pid) else None


def _holders(path: Path) -> list[int]:
    """The PIDs of the processes with ``path`` open (Linux /proc; those we may look at)."""
    found, target = [], str(path.resolve())
    for process in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if any(os.path.realpath(fd) == target for fd in process.joinpath("fd").iterdir()):
                found.append(int(process.name))
    return sorted(set(found) - {os.getpid()})


@contextlib.contextmanager
def hold_folder(
    out: Path, rank: int | None = None, note: Callable[[str], None] | None = None, parameter: str = "out"
) -> Iterator[Path]:
    """Hold the lock of folder ``out`` (created if needed) within the block; FolderInUse (a
    ParameterError naming ``parameter``) when another living process holds it. ``note`` gets one
    line when a dead owner's lock is taken over."""
    path = lock_path(out, rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = _locked(path, out, parameter)
    _HELD.add(handle)
    try:
        previous = os.pread(handle, 4096, 0).decode(errors="replace")
        if previous.strip() and note is not None:
            note(f"took over the lock of {out} left by {_owner_text(previous)}, which is no longer running")
        record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.time(),
            "command": " ".join(sys.argv),
        }
        os.ftruncate(handle, 0)
        os.pwrite(handle, json.dumps(record).encode(), 0)
        removed = remove_leftovers(out)
        if removed and note is not None:
            note(f"removed {len(removed)} temporary file(s) of an interrupted write in {out}")
        yield path
    finally:
        if handle in _HELD:  # not in a forked child, whose copy was closed at the fork
            _HELD.discard(handle)
            with contextlib.suppress(OSError):
                path.unlink()
            os.close(handle)


def _locked(path: Path, out: Path, parameter: str) -> int:
    """An open handle of ``path`` holding its exclusive flock, the file still the one at the path.
    The flock of a dead owner still held (by processes it left) is waited for, :data:`ORPHANS_WAIT`
    seconds at most."""
    deadline = None
    while True:
        handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(handle, 4096, 0).decode(errors="replace")
            dead = _dead_owner(text)
            deadline = deadline or time.monotonic() + ORPHANS_WAIT
            if dead is not None and time.monotonic() < deadline:
                os.close(handle)
                time.sleep(0.1)
                continue
            os.close(handle)
            if dead is None:
                owner = _owner_text(text)
                raise FolderInUse(
                    parameter, f"{out} is being written by {owner}; wait for it to end, or use another folder"
                ) from None
            holders = " ".join(map(str, _holders(path))) or "that this user cannot see"
            raise FolderInUse(
                parameter,
                f"{out} is still locked by process(es) {holders}, left by process {dead}, which is no "
                "longer running; end them, or use another folder",
            ) from None
        try:
            same = os.fstat(handle).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return handle
        os.close(handle)  # its owner removed it as we opened it: take the new one
