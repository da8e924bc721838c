"""Atomic file writes (the one implementation in mitool) and small CSV helpers.

Every file is written to a temporary file in the same folder, flushed and fsync'ed, then moved
into place with ``os.replace`` (atomic on POSIX) and the folder fsync'ed: a reader, a resumed run
or a crash sees the old complete file or the new complete file, never half of one. On any error,
Ctrl-C included, the temporary file is removed and the old file is left as it was. Files get the
mode that ``open()`` would give them: 0666 less the process's umask (and a folder's default ACL),
so a umask of 077 keeps results private and one of 022 shares them.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import secrets
import shutil
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO

__all__ = [
    "appending",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "atomic_writer",
    "naming_the_file",
    "previous_path",
    "read_csv",
    "remove_leftovers",
    "write_csv",
]


TEMPORARY_SUFFIX = ".mitool-tmp"
"""The end of the name of :func:`atomic_writer`'s temporary files: ``.<name>.<pid>.<random>.mitool-tmp``."""


def remove_leftovers(folder: str | os.PathLike) -> list[Path]:
    """Remove the temporary files that :func:`atomic_writer` left in ``folder`` and its subfolders
    when its process was killed mid-write (the writer's PID, in the name, no longer runs); returns
    them. A living writer's files are left alone."""
    removed = []
    for path in Path(folder).rglob(f".*{TEMPORARY_SUFFIX}*"):
        writer = re.search(rf"\.(\d+)\.[^.]+{re.escape(TEMPORARY_SUFFIX)}(\.prev)?$", path.name)
        if writer is not None and not _running(int(writer.group(1))):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def previous_path(path: str | os.PathLike) -> str:
    """Where :func:`atomic_writer` with ``keep_previous`` keeps the file that ``path`` replaced."""
    return os.fspath(path) + ".prev"


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike, mode: str = "wb", keep_previous: bool = False) -> Iterator[IO]:
    """``with atomic_writer(path) as file: file.write(...)``: ``file`` is a temporary file in the
    folder of ``path`` (created if needed), opened with ``mode`` ("wb" or "w"); when the block ends
    without an error it is flushed, fsync'ed and renamed to ``path``. With ``keep_previous`` the
    file it replaces stays on disk as :func:`previous_path` (a hard link, or a copy)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = _temporary_file(path)
    staging = temporary + ".prev"
    try:
        with os.fdopen(handle, mode) as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        if keep_previous and path.exists():
            try:
                os.link(path, staging)
            except OSError:  # no hard links on this file system
                shutil.copyfile(path, staging)
            os.replace(staging, previous_path(path))
        os.replace(temporary, path)
    except BaseException as error:
        for leftover in (temporary, staging):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)
        if isinstance(error, OSError):
            raise naming_the_file(error, path) from error
        raise
    _fsync_folder(path.parent)


def _temporary_file(path: Path) -> tuple[int, str]:
    """A new file beside ``path``, named ``.<name>.<pid>.<random>.mitool-tmp``, opened for writing
    with mode 0666 less the umask (``tempfile.mkstemp`` makes 0600 whatever the umask)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        temporary = os.fspath(
            path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{TEMPORARY_SUFFIX}"
        )
        try:
            return os.open(temporary, flags, 0o666), temporary
        except FileExistsError:  # pragma: no cover - 2**32 names
            continue


def naming_the_file(error: OSError, path: str | os.PathLike) -> OSError:
    """``error`` with ``path`` as its file when it names none (write() and fsync() do not), so that
    the message says which file a full or read-only disk refused."""
    return error if error.filename is not None else OSError(error.errno, error.strerror, os.fspath(path))


@contextlib.contextmanager
def appending(path: str | os.PathLike) -> Iterator[IO]:
    """``path`` opened to append text; an OSError while writing names ``path``."""
    try:
        with open(path, "a") as stream:
            yield stream
    except OSError as error:
        raise naming_the_file(error, path) from error


def _fsync_folder(folder: Path) -> None:
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - folders that cannot be opened (some platforms)
        return
    try:
        os.fsync(handle)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(handle)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_writer(path) as stream:
        stream.write(data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, value: object) -> None:
    """Write ``value`` as indented JSON with sorted keys to ``path`` atomically."""
    atomic_write_text(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


def write_csv(path: str | os.PathLike, columns: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    """Write a CSV with a header row, atomically."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    atomic_write_text(path, buffer.getvalue())


def read_csv(path: str | os.PathLike) -> list[dict[str, str]]:
    """Rows of a CSV with a header, as dicts of strings."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    with open(path, newline="") as stream:
        return list(csv.DictReader(stream))
