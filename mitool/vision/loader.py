"""The loader of vision batches: a seeded order, seeded augmentations per (seed, epoch, rank), and
batches that leave unreadable images out and say which.

Unreadable images (corrupt or truncated files in an image folder) never stop an epoch: the
dataset returns an :class:`~mitool.vision.datasets.UnreadableImage` marker instead of the image,
:func:`collate_skipping_unreadable` drops it from the batch and names it in the batch's third
element ``skipped``, and :class:`SkippedImages` counts those names (the training run writes the
count into its records) and issues one warning naming the first few.

A two-view transform returns a tuple ``(view_1, view_2)`` and the loader batches it as a tuple of
two tensors.
"""

from __future__ import annotations

import os
import signal
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler, default_collate

from mitool import checks
from mitool.checks import ParameterError
from mitool.runtime import free_cores
from mitool.vision.datasets import EncodedImage, UnreadableImage

__all__ = [
    "MAX_DEFAULT_WORKERS",
    "SeededSampler",
    "SkippedImages",
    "SkippingDataLoader",
    "UnreadableImagesWarning",
    "augmentation_seed",
    "collate_skipping_unreadable",
    "default_workers",
    "make_loader",
]


class UnreadableImagesWarning(UserWarning):
    """Some images could not be read and were left out of their batches."""


class SkippedImages:
    """Counts the images dropped from batches in the main process and warns once about them.

    Use: ``skipped_images.add(skipped)`` for every batch ``(inputs, labels, skipped)``, then
    ``skipped_images.report()`` at the end of an epoch or a run. ``earlier``: images skipped
    before (by the run being resumed), included in :attr:`count`.
    """

    def __init__(self, show: int = 5, earlier: int = 0) -> None:
        self.show = show
        self.earlier = earlier
        self.names: list[str] = []
        self._reported = 0

    @property
    def count(self) -> int:
        """How many images were skipped so far (earlier ones included)."""
        return self.earlier + len(self.names)

    def add(self, skipped: Sequence[str]) -> None:
        """Record the names of the images skipped from one batch."""
        self.names.extend(skipped)

    def report(self) -> str | None:
        """Issue one :class:`UnreadableImagesWarning` counting the images skipped since the last
        report and naming the first few; nothing when none. Returns the message (or None)."""
        new = self.names[self._reported :]
        if not new:
            return None
        self._reported = len(self.names)
        shown = ", ".join(new[: self.show])
        more = f" and {len(new) - self.show} more" if len(new) > self.show else ""
        message = f"skipped {len(new)} unreadable image{'s' if len(new) != 1 else ''}: {shown}{more}"
        warnings.warn(message, UnreadableImagesWarning, stacklevel=2)
        return message


def collate_skipping_unreadable(items: Sequence[tuple[Any, int]]) -> tuple[Any, torch.Tensor, list[str]]:
    """Batch ``(input, label)`` items into ``(inputs, labels, skipped)``, leaving out unreadable ones.

    inputs: a stacked tensor (N, ...), a tuple of stacked tensors for two-view items, a list of
        tensors when they differ in shape (decoded images for the device path), or the list
        of :class:`EncodedImage` items (sizes may differ; decode them with
        :func:`mitool.vision.gpu_augment.decode_on_device`); ``None`` when every item was unreadable.
    labels: int64 tensor (N,). skipped: the names of the unreadable items.
    """
    skipped = [item[0].name for item in items if isinstance(item[0], UnreadableImage)]
    kept = [item for item in items if not isinstance(item[0], UnreadableImage)]
    labels = torch.tensor([label for _, label in kept], dtype=torch.int64)
    if not kept:
        return None, labels, skipped
    first = kept[0][0]
    if isinstance(first, EncodedImage):
        return [item[0] for item in kept], labels, skipped
    if isinstance(first, torch.Tensor) and any(item[0].shape != first.shape for item in kept):
        return [item[0] for item in kept], labels, skipped  # decoded images of different sizes
    inputs = default_collate([item[0] for item in kept])
    if isinstance(first, tuple):
        inputs = tuple(inputs)
    return inputs, labels, skipped


class SeededSampler(Sampler[int]):
    """Indices in an order fixed by (seed, epoch): shuffled with a generator seeded from both, or
    0..n-1 when ``shuffle`` is False. A resumed run that sets the same epoch sees the same order."""

    def __init__(self, length: int, shuffle: bool, seed: int) -> None:
        self.length = length
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        if not self.shuffle:
            return iter(range(self.length))
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        return iter(torch.randperm(self.length, generator=generator).tolist())

    def __len__(self) -> int:
        return self.length


def augmentation_seed(seed: int, epoch: int, rank: int = 0) -> int:
    """The seed of the augmentation stream of one rank in one epoch.

    Rank 0 (and a single process): seed * 1_000_003 + epoch. Rank r > 0: a 63-bit number mixed
    from (seed, epoch, r) by numpy's ``SeedSequence``, so that under DDP every rank augments its
    share of the images with its own random draws (one shared stream would give every rank the
    same crops and colours for different images). A function of (seed, epoch, rank) only: a
    resumed run replays the same draws.
    """
    if rank == 0:
        return seed * 1_000_003 + epoch
    state = np.random.SeedSequence([seed, epoch, rank]).generate_state(2, dtype=np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


class SkippingDataLoader(DataLoader):
    """A DataLoader of ``(inputs, labels, skipped)`` batches. In one process it never yields an
    empty batch: the names skipped from a batch whose items were all unreadable are carried into
    the next batch (or yielded with ``inputs`` None at the very end). Under DDP (``own_stream``)
    such a batch is yielded in place with ``inputs`` None, so that every rank yields the same
    number of batches and the ranks' collective calls stay paired. ``set_epoch(e)`` fixes the
    order and the augmentation seeds for epoch e.

    Augmentations are drawn from :func:`augmentation_seed` (seed, epoch, rank): in worker
    processes through the DataLoader's generator (worker w gets that seed's base + w, as
    torch's DataLoader does); with ``num_workers=0`` and ``own_stream`` (used under DDP), the
    main process fetches each batch with torch's global generator switched to the loader's own
    stream and back, so that the training's random draws (which must agree across ranks, e.g.
    SiMo's negatives) are not consumed by the augmentation. Without ``own_stream`` and workers,
    the transforms draw from the global generator as usual (single-process behaviour).
    """

    def __init__(
        self, *args: Any, seed: int = 0, rank: int = 0, own_stream: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.seed = seed
        self.rank = rank
        self.own_stream = own_stream
        self._stream_state = torch.Generator().manual_seed(augmentation_seed(seed, 0, rank)).get_state()

    def set_epoch(self, epoch: int) -> None:
        """Order and augmentation seeds of epoch ``epoch``."""
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)
        seed = augmentation_seed(self.seed, epoch, self.rank)
        if self.generator is not None:
            self.generator.manual_seed(seed)
        self._stream_state = torch.Generator().manual_seed(seed).get_state()

    def _batches(self) -> Iterator[tuple[Any, torch.Tensor, list[str]]]:
        if not (self.own_stream and self.num_workers == 0):
            yield from super().__iter__()
            return
        # the stream restarts at each iteration (as workers' seeds do), so a replay is exact
        stream_state = self._stream_state
        batches = super().__iter__()
        while True:
            outside_state = torch.get_rng_state()
            torch.set_rng_state(stream_state)
            try:
                batch = next(batches, None)
            finally:
                stream_state = torch.get_rng_state()
                torch.set_rng_state(outside_state)
            if batch is None:
                return
            yield batch

    def __iter__(self) -> Iterator[tuple[Any, torch.Tensor, list[str]]]:  # type: ignore[override]
        carried: list[str] = []
        for inputs, labels, skipped in self._batches():
            if inputs is None and self.own_stream:  # under DDP: one batch out for one batch in
                yield None, labels, skipped
                continue
            if inputs is None:
                carried.extend(skipped)
                continue
            yield inputs, labels, carried + skipped
            carried = []
        if carried:
            yield None, torch.zeros(0, dtype=torch.int64), carried


MAX_DEFAULT_WORKERS = 8


def default_workers() -> int:
    """Loader worker processes per training process when the number is not given: the free cores
    (:func:`mitool.runtime.free_cores`) shared among the $LOCAL_WORLD_SIZE processes a launcher
    such as torchrun starts on this machine, one core left to each training process itself, at
    most :data:`MAX_DEFAULT_WORKERS` (0: batches are made in the training process)."""
    processes_here = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1))
    return max(0, min(MAX_DEFAULT_WORKERS, free_cores() // processes_here - 1))


def _leave_interrupts_to_the_main_process(worker_id: int) -> None:
    """In a loader worker: ignore SIGINT. A Ctrl-C on a terminal reaches every process of the
    foreground group; the training process stops cleanly (with a checkpoint) and ends its workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def make_loader(
    dataset: Dataset,
    batch_size: int,
    shuffle: bool,
    workers: int | None,
    seed: int,
    drop_last: bool,
    distributed: bool = False,
    epoch: int = 0,
    rank: int | None = None,
    world_size: int | None = None,
) -> SkippingDataLoader:
    """A loader of ``(inputs, labels, skipped)`` batches over ``dataset``.

    The order is fixed by (seed, epoch): a :class:`SeededSampler`, or a ``DistributedSampler``
    (this rank's share, shuffled by the same seed on every rank) when ``distributed``; call
    ``loader.set_epoch(e)`` to move on to epoch e. Augmentations are drawn from seeds fixed by
    (seed, epoch, rank) (:func:`augmentation_seed`): every rank has its own stream, a single
    process draws as rank 0. ``rank`` and ``world_size`` default to the process group's when
    ``distributed`` (give them to build one rank's loader without a process group). Batches
    hold fewer than ``batch_size`` items when images were unreadable; ``skipped`` names them
    (feed it to :class:`SkippedImages`). ``workers`` None: :func:`default_workers`.
    """
    checks.whole_number("batch_size", batch_size, minimum=1)
    workers = default_workers() if workers is None else checks.whole_number("workers", workers, minimum=0)
    if distributed:
        sampler: Sampler[int] = DistributedSampler(
            dataset, num_replicas=world_size, rank=rank, shuffle=shuffle, seed=seed, drop_last=drop_last
        )
        rank = sampler.rank
    else:
        if rank not in (None, 0) or world_size not in (None, 1):
            raise ParameterError(
                "rank",
                f"and world_size are for distributed=True only, got rank={rank}, world_size={world_size}",
            )
        sampler = SeededSampler(len(dataset), shuffle, seed)
        rank = 0
    generator = torch.Generator()
    loader = SkippingDataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=workers,
        collate_fn=collate_skipping_unreadable,
        drop_last=drop_last,
        pin_memory=torch.cuda.is_available(),
        persistent_workers=False,
        generator=generator,
        worker_init_fn=_leave_interrupts_to_the_main_process,
        seed=seed,
        rank=rank,
        own_stream=distributed,
    )
    loader.set_epoch(epoch)
    return loader
