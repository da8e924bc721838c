"""The resumable folder of a matrix: its config (the data's fingerprint and the settings), and the
finished blocks, each written atomically and read back whole or not at all."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def _fingerprint(columns: Sequence[np.ndarray] | np.ndarray | None) -> str | None:
    """A short hash of the data, so that a folder is resumed only with the data that began it."""
    if columns is None:
        return None
    digest = hashlib.sha256()
    for array in [columns] if isinstance(columns, np.ndarray) else columns:
        digest.update(f"{array.shape}{array.dtype.kind}".encode())
        if array.dtype == object:
            digest.update("\x1f".join(map(repr, array.reshape(-1).tolist())).encode())
        else:
            digest.update(np.ascontiguousarray(array, dtype=np.float64).tobytes())
    return digest.hexdigest()[:24]


def _save(path: Path, result: Any) -> None:
    from mitool._infra.files import atomic_writer

    with atomic_writer(path) as stream:
        if isinstance(result, dict):
            arrays = {name: value for name, value in result.items() if name != "notes"}
            np.savez(stream, notes=np.array(json.dumps(result["notes"])), **arrays)
        else:
            np.save(stream, np.asarray(result))


def _load(path: Path, rows: int) -> Any:
    """A finished block of ``rows`` pairs or permutations, or None when it is not there, or not
    whole (a file cut short or emptied by a crash of the disk or its machine, damaged, of another
    length): then it is computed again, and written anew. Whatever a damaged file makes numpy,
    zipfile or json raise (OSError, ValueError, EOFError, BadZipFile, NotImplementedError for an
    unknown compression, a tokenizer error in the header, ...) means the same."""
    if not path.is_file():
        return None
    try:
        if path.suffix == ".npy":
            result = np.load(path, allow_pickle=False)
            return result if result.ndim >= 1 and len(result) == rows else None
        with np.load(path, allow_pickle=False) as stored:
            result = {name: stored[name] for name in stored.files if name != "notes"}
            result["notes"] = json.loads(str(stored["notes"]))
        whole = isinstance(result["notes"], list) and all(
            value.ndim == 1 and len(value) == rows for name, value in result.items() if name != "notes"
        )
        return result if whole else None
    except Exception:  # any failure to read it means that it is not a finished block
        return None


@contextlib.contextmanager
def _folder(out: str | Path | None, config: dict[str, Any]) -> Iterator[Path | None]:
    """The output folder, made, its lock held and its config checked (None: no folder)."""
    if out is None:
        yield None
        return
    from mitool._infra.locks import hold_folder
    from mitool._infra.runner import check_config, make_out

    path = make_out(out)
    with hold_folder(path):
        check_config(path / "config.json", config, write=True, compared=sorted(config))
        (path / "pairs").mkdir(exist_ok=True)
        (path / "null").mkdir(exist_ok=True)
        yield path
