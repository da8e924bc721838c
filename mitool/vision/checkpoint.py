"""Checkpoint files: written atomically, read without running code, rejected clearly when damaged.

Writing (:func:`save`): through :func:`mitool.files.atomic_writer`, a temporary file in the same
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

import dataclasses
import io
import os
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor

from mitool.checks import ParameterError
from mitool.files import atomic_writer, previous_path
from mitool.vision import distributed

if TYPE_CHECKING:
    from mitool.vision.gpu_augment import GPUTwoViewAugment
    from mitool.vision.train import Run

__all__ = ["FORMAT", "load", "load_latest", "previous_path", "restore_rng_states", "rng_states", "save"]

FORMAT = "mitool.vision/1"
"""The value of the ``format`` entry of every checkpoint this tool writes."""


def save(path: str, state: dict[str, Any]) -> None:
    """Write ``state`` (plus the ``format`` marker) to ``path`` atomically; keep the old file as
    ``path.prev`` (:func:`mitool.files.previous_path`). Serialised in memory first, so that a
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


# ----------------------------------------------------------------------------------------------
# a pretraining run's checkpoint: what is saved, and how it is put back


def save_checkpoint(run: Run) -> None:
    """Write OUT/checkpoint.pt atomically (rank 0; every rank takes part in gathering the device
    augmentation's state): everything :func:`pretrain` needs to continue exactly."""
    augment_states = _gather_augment_states(run.augment)
    if not run.is_main:
        return
    schedule = run.schedule
    save(
        run.checkpoint_path,
        {
            "kind": "pretrain",
            "config": run.config.to_dict(),
            "dataset_info": dataclasses.asdict(run.info),
            "model": run.model.state_dict(),
            "optimizer": run.optimizer.state_dict(),
            "scaler": run.scaler.state_dict(),
            "schedule": {
                "peak_lr": schedule.peak_lr,
                "warmup_steps": schedule.warmup_steps,
                "total_steps": schedule.total_steps,
            },  # fmt: skip
            "epoch": run.epoch,
            "step": run.step,
            "data_order": {"seed": run.config.seed, "epoch": run.epoch, "batches_done": run.batches_done},
            "rng": rng_states(),
            "skipped_images": run.skipped.count,
            "metrics_interval": run.interval.state_dict(),  # the open interval of the metrics records
            **({"gpu_augment": augment_states} if augment_states is not None else {}),
        },
    )


def restore_run(run: Run, saved: dict[str, Any]) -> None:
    """Put the saved model, optimizer, scaler, position, open metrics interval and augmentation
    state into ``run``; the RNG states wait in ``run.pending_rng`` until the loader has replayed
    the epoch's batches."""
    run.model.load_state_dict(saved["model"])
    fused = [group.get("fused") for group in run.optimizer.param_groups]
    run.optimizer.load_state_dict(saved["optimizer"])
    for group, flag in zip(run.optimizer.param_groups, fused, strict=True):
        if flag is not None or "fused" in group:  # SGD: this run's kernels (an unfused SGD's state loads too)
            group["fused"] = flag
    run.scaler.load_state_dict(saved["scaler"])
    run.epoch, run.step = saved["epoch"], saved["step"]
    run.batches_done = saved["data_order"]["batches_done"]
    run.pending_rng = saved["rng"]
    from mitool.vision.loader import SkippedImages

    run.skipped = SkippedImages(earlier=saved.get("skipped_images", 0))
    run.interval.load_state_dict(saved.get("metrics_interval"))  # absent in older checkpoints: empty
    if run.augment is not None:
        run.augment.load_state_dict(_augment_state_of_rank(saved, run.rank, run.world, run.checkpoint_path))


def _gather_augment_states(augment: GPUTwoViewAugment | None) -> list[dict[str, Tensor]] | None:
    """The device augmentation's generator state of every rank, in rank order (None without it)."""
    if augment is None:
        return None
    state = augment.state_dict()
    if not distributed.is_distributed():
        return [state]
    states: list[Any] = [None] * distributed.world_size()
    dist.all_gather_object(states, state)
    return states


def _augment_state_of_rank(saved: dict[str, Any], rank: int, world: int, path: str) -> dict[str, Tensor]:
    states = saved.get("gpu_augment")
    if not isinstance(states, list) or len(states) != world:
        count = len(states) if isinstance(states, list) else 0
        raise ParameterError(
            "resume",
            f"needs as many processes as the run in {path} had, with the same gpu_augment: it holds the "
            f"device augmentation state of {count} process(es), this run has {world}",
        )
    return states[rank]


def saved_step(path: str) -> int | str:
    """The step of the checkpoint at ``path``, or "unreadable"."""
    try:
        return load(path, kind="pretrain")["step"]
    except (ValueError, FileNotFoundError):
        return "unreadable"
