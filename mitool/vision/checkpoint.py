"""Checkpoint files: written atomically, read without running code, rejected clearly when damaged.

Writing (:func:`save`): through :func:`mitool._infra.files.atomic_writer`, a temporary file in the same
directory, flushed and fsync'ed; the current checkpoint (if any) gets the second name
``<name>.prev`` (a hard link) and the temporary file is renamed to the final name. A crash at any
point leaves the old or the new file whole under the final name, and the previous checkpoint
stays on disk next to the newest.

Reading (:func:`load`): ``torch.load(..., weights_only=True)``, which unpickles tensors and plain
containers only, so a checkpoint cannot run code. A truncated file, a file that is not a torch
checkpoint, or a torch file written by something else gives one ValueError line naming the file
and the previous checkpoint that is still there.

Everything stored must be tensors, numbers, strings, None, lists and dicts of those:
:func:`rng_states` and :func:`restore_rng_states` convert numpy's and Python's generator states
to that form.
"""

from __future__ import annotations

import io
import os
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from mitool._infra.files import atomic_writer, previous_path
from mitool.checks import ParameterError

__all__ = ["FORMAT", "load", "load_latest", "previous_path", "restore_rng_states", "rng_states", "save"]

FORMAT = "mitool.vision/1"
"""The value of the ``format`` entry of every checkpoint this tool writes."""


def save(path: str, state: dict[str, Any]) -> None:
    """Write ``state`` (plus the ``format`` marker) to ``path`` atomically; keep the old file as
    ``path.prev`` (:func:`mitool._infra.files.previous_path`). Serialised in memory first, so that a
    failing disk (full, read-only) raises its own OSError, not torch's wrapped RuntimeError."""
    buffer = io.BytesIO()
    torch.save({"format": FORMAT, **state}, buffer)
    with atomic_writer(path, keep_previous=True) as file:
        file.write(buffer.getbuffer())


def load(
    path: str,
    map_location: str | torch.device = "cpu",
    kind: str | None = None,
    parameter: str = "checkpoint",
) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save`; ``kind`` (e.g. "pretrain", "linear") must match
    the ``kind`` entry when given. :class:`mitool.checks.ParameterError` naming ``parameter`` (the
    argument that gave the path) when the file is missing, truncated, foreign or of another kind:
    one line saying what the file is and what is expected."""
    expected = (
        f"expected a {kind or 'mitool vision'} checkpoint such as {_EXAMPLES.get(kind, 'OUT/checkpoint.pt')}"
    )
    if not os.path.isfile(path):
        raise ParameterError(parameter, f"{path}: no such file ({expected})")
    previous = previous_path(path)
    kept = f"; the previous checkpoint {previous} is still there" if os.path.isfile(previous) else ""
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception:  # torch raises several types, with long messages, for truncated or foreign files
        raise ParameterError(parameter, f"{path} {_what_it_is(path)} ({expected}){kept}") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ParameterError(
            parameter,
            f"{path} is a torch file not written by mitool vision (no {FORMAT!r} marker; {expected}){kept}",
        )
    if kind is not None and state.get("kind") != kind:
        raise ParameterError(parameter, f"{path} is a {state.get('kind')!r} checkpoint ({expected})")
    return state


def load_latest(
    path: str, kind: str, parameter: str, note: Callable[[str], None], map_location: str = "cpu"
) -> dict[str, Any]:
    """The checkpoint at ``path``; when it is missing or damaged, the previous one (``path.prev``,
    which :func:`save` keeps) with a ``note`` saying so. ParameterError naming ``parameter`` when
    neither can be read."""
    previous = previous_path(path)
    try:
        return load(path, map_location, kind, parameter)
    except ParameterError:
        if not os.path.isfile(previous):
            if not os.path.exists(path):
                folder, name = os.path.dirname(path) or ".", os.path.basename(path)
                raise ParameterError(
                    parameter, f"finds no run in {folder} (no {name}); start it without --resume"
                ) from None
            raise
        problem = "is missing" if not os.path.exists(path) else "cannot be read"
        saved = load(previous, map_location, kind, parameter)
        note(f"{path} {problem}; resuming from the previous checkpoint {previous} (step {saved['step']})")
        return saved


_EXAMPLES = {
    "pretrain": "OUT/checkpoint.pt of mitool vision pretrain",
    "linear": "OUT/linear.pt of mitool vision linear",
}


def _what_it_is(path: str) -> str:
    """What a file that torch cannot load looks like: a damaged torch file, text, or other bytes."""
    with open(path, "rb") as file:
        start = file.read(200)
    if start.startswith(b"PK\x03\x04"):
        return (
            "is truncated or not a mitool checkpoint (a damaged torch file, or one holding more than tensors)"
        )
    if not start:
        return "is empty, not a mitool checkpoint"
    try:
        first_line = start.decode("utf-8").splitlines()[0]
    except (UnicodeDecodeError, IndexError):
        return "is not a mitool checkpoint (not a torch file)"
    shown = first_line if len(first_line) <= 40 else first_line[:40].rsplit(" ", 1)[0] + " ..."
    return f"is not a mitool checkpoint but a text file starting {shown!r}"


def rng_states() -> dict[str, Any]:
    """The states of torch's (CPU and the current CUDA device), numpy's and Python's global
    generators, as tensors and lists only (loadable with weights_only=True).

    Only the current device's CUDA generator is kept: each process of a run uses one GPU, and the
    processes draw the same device random numbers (all are seeded alike and SiMo relies on it), so
    rank 0's state restored on every rank's own device resumes them all, on any number of
    visible GPUs."""
    numpy_state = np.random.get_state()
    python_state = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "cuda": [torch.cuda.get_rng_state()] if torch.cuda.is_available() else [],
        "numpy": {
            "keys": torch.from_numpy(numpy_state[1].astype(np.int64)),
            "position": int(numpy_state[2]),
            "has_gauss": int(numpy_state[3]),
            "cached_gaussian": float(numpy_state[4]),
        },
        "python": [python_state[0], list(python_state[1]), python_state[2]],
    }


def restore_rng_states(states: dict[str, Any]) -> None:
    """Put back the generator states saved by :func:`rng_states`."""
    torch.set_rng_state(states["torch"].cpu())
    if states["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state(states["cuda"][0].cpu())  # the current device
    numpy_state = states["numpy"]
    np.random.set_state(
        (
            "MT19937",
            numpy_state["keys"].numpy().astype(np.uint32),
            numpy_state["position"],
            numpy_state["has_gauss"],
            numpy_state["cached_gaussian"],
        )
    )
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))


def saved_step(path: str) -> int | str:
    """The step of the checkpoint at ``path``, or "unreadable"."""
    try:
        return load(path, kind="pretrain")["step"]
    except (ValueError, FileNotFoundError):
        return "unreadable"
