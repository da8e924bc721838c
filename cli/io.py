"""Reading paired samples from files for the command line: .npy, .npz (one array) or .csv."""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

import numpy as np

__all__ = ["SUFFIXES", "load_samples"]

SUFFIXES = (".npy", ".npz", ".csv")


def load_samples(path: str | Path, name: str) -> np.ndarray:
    """A (n, d) float64 array from a .npy, .npz (one array) or .csv file (comma-separated numbers,
    an optional header line); 1-D data become (n, 1). ``name`` ("X" or "Y") starts every error
    message: ValueError (or FileNotFoundError) with one line naming the file and the problem."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{name}: no such file: {path}")
    if not path.is_file():
        raise ValueError(f"{name}: not a file: {path}")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(
            f"{name}: unsupported file type {suffix or '(none)'!r}; allowed: {', '.join(SUFFIXES)}"
        )
    try:
        data = _read(path, suffix, name)
    except ValueError as error:
        if str(error).startswith(f"{name}:"):
            raise
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(f"{name}: cannot read {path} as {suffix} numbers: {first_line}") from None
    except (OSError, EOFError) as error:
        raise ValueError(f"{name}: cannot read {path}: {error}") from None
    return _checked(np.asarray(data), path, name)


NPY_MAGIC = b"\x93NUMPY"
"""How every .npy file starts (numpy's format)."""


def _read(path: Path, suffix: str, name: str) -> np.ndarray:
    if suffix == ".npy":
        with open(path, "rb") as stream:
            if stream.read(len(NPY_MAGIC)) != NPY_MAGIC:
                raise ValueError(f"{name}: {path} is not a numpy array file (no .npy header)")
        return np.load(path, allow_pickle=False)
    if suffix == ".npz":
        with np.load(path, allow_pickle=False) as archive:
            keys = list(archive.keys())
            if len(keys) != 1:
                held = f"{len(keys)} arrays ({', '.join(keys) or 'none'})"
                raise ValueError(f"{name}: {path} holds {held}; give one array per file")
            return archive[keys[0]]
    return _read_csv(path, name)


def _is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def _read_csv(path: Path, name: str) -> np.ndarray:
    """The numbers of a CSV file; its first line is a header only when none of its fields is a number.
    A field that is not a number is named by its line and column as an editor counts them (from 1)."""
    with open(path, newline="") as stream:
        first = next(csv.reader(stream), [])
    header = bool(first) and not any(_is_number(field) for field in first)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # numpy's "input contained no data": said below
            data = np.loadtxt(path, delimiter=",", skiprows=int(header), ndmin=1)
    except ValueError:
        _raise_first_bad_field(path, name, header)
        raise
    if data.size == 0:
        raise ValueError(f"{name}: {path} holds no data rows")
    return data


def _raise_first_bad_field(path: Path, name: str, header: bool) -> None:
    """ValueError naming the first field of ``path`` that is not a number, or the first line whose
    number of fields differs from the first data line's."""
    width = None
    with open(path, newline="") as stream:
        for line, row in enumerate(csv.reader(stream), start=1):
            if (header and line == 1) or not any(field.strip() for field in row):
                continue
            for column, field in enumerate(row, start=1):
                if not _is_number(field):
                    raise ValueError(
                        f"{name}: {path} line {line}, column {column}: {field.strip()!r} is not a number "
                        "(a header is a first line of names only)"
                    )
            if width is not None and len(row) != width:
                raise ValueError(
                    f"{name}: {path} line {line} has {len(row)} fields, the first data line {width}"
                )
            width = len(row) if width is None else width


def _checked(data: np.ndarray, path: Path, name: str) -> np.ndarray:
    if data.dtype.kind not in "biuf":
        raise ValueError(f"{name}: {path} must hold numbers, got dtype {data.dtype}")
    if data.ndim == 1:
        data = data[:, None]
    if data.ndim != 2 or data.shape[0] < 1 or data.shape[1] < 1:
        raise ValueError(f"{name}: expected one row per sample (a 1-D or 2-D array), got shape {data.shape}")
    data = data.astype(np.float64)
    bad = ~np.isfinite(data)
    if bad.any():
        row = int(np.argwhere(bad)[0][0])
        raise ValueError(
            f"{name}: {path} holds NaN or infinite values (first in row {row}); remove or fill them"
        )
    return data
