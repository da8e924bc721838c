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
(:func:`mitool.files.remove_leftovers`).
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

from mitool.checks import ParameterError
from mitool.files import remove_leftovers

__all__ = ["FolderInUse", "hold_folder", "lock_path"]


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
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        os.close(handle)


def _locked(path: Path, out: Path, parameter: str) -> int:
    """An open handle of ``path`` holding its exclusive flock, the file still the one at the path."""
    while True:
        handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _owner_text(os.pread(handle, 4096, 0).decode(errors="replace"))
            os.close(handle)
            raise FolderInUse(
                parameter, f"{out} is being written by {owner}; wait for it to end, or use another folder"
            ) from None
        try:
            same = os.fstat(handle).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return handle
        os.close(handle)  # its owner removed it as we opened it: take the new one
