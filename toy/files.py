"""Atomic file writes and small CSV helpers.

Every file is written to a temporary file in the same directory and moved into place with
``os.replace``, which is atomic on POSIX: a reader (or a resumed sweep) sees the old complete file
or the new complete file, never half of one.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["atomic_write_bytes", "atomic_write_json", "atomic_write_text", "read_csv", "write_csv"]


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(handle, 0o644)  # mkstemp makes 0600; results are meant to be shared
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, value: object) -> None:
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
