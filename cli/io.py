"""Reading paired samples from files for the command line: .npy, .npz (one array) or .csv."""

from __future__ import annotations

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


def _read(path: Path, suffix: str, name: str) -> np.ndarray:
    if suffix == ".npy":
        return np.load(path, allow_pickle=False)
    if suffix == ".npz":
        with np.load(path, allow_pickle=False) as archive:
            keys = list(archive.keys())
            if len(keys) != 1:
                held = f"{len(keys)} arrays ({', '.join(keys) or 'none'})"
                raise ValueError(f"{name}: {path} holds {held}; give one array per file")
            return archive[keys[0]]
    return _read_csv(path, name)


def _read_csv(path: Path, name: str) -> np.ndarray:
    with open(path) as stream:
        first = stream.readline()
    try:
        [float(field) for field in first.strip().split(",") if field.strip()]
        skip = 0
    except ValueError:
        skip = 1  # a header line
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # numpy's "input contained no data": said below
        data = np.loadtxt(path, delimiter=",", skiprows=skip, ndmin=1)
    if data.size == 0:
        raise ValueError(f"{name}: {path} holds no data rows")
    return data


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
