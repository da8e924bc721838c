"""Shared pieces of the benchmark scripts: interleaved timing, peak memory, JSON output, progress.

Timing on a shared machine: two candidates timed one after the other can differ by 30% from the
order alone (other processes, clocks, caches). Every figure here is therefore a ratio measured in
pairs: each round times the baseline and the candidate back to back (the order alternating between
rounds), and the reported figure is the median over rounds of the per-pair ratio
t_candidate / t_baseline.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import time
from collections.abc import Callable

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from mitool._infra.files import atomic_write_text
from mitool._infra.progress import Progress

__all__ = [
    "Progress",
    "argument_parser",
    "device_seconds",
    "environment",
    "interleaved_ratios",
    "peak_extra_bytes",
    "synchronize",
    "time_call",
    "write_json",
]


def argument_parser(doc: str) -> argparse.ArgumentParser:
    """The script's parser, its description the first paragraph of the script's docstring ``doc``
    (whose first line alone may stop mid-sentence)."""
    return argparse.ArgumentParser(description=" ".join(doc.strip().split("\n\n")[0].split()))


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_seconds(function: Callable[[], object], device: torch.device, repeat: int = 3) -> float | None:
    """Seconds the GPU spends in kernels during one call of ``function``: the smallest over
    ``repeat`` calls of the sum of the CUDA kernels' own times, from torch.profiler. It leaves out
    what the host spends issuing them, which is what wall-clock timing of short calls measures.
    None off CUDA, or where the profiler reports no device time."""
    if device.type != "cuda":
        return None
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    best = None
    for _ in range(repeat):
        synchronize(device)
        with profile(activities=[ProfilerActivity.CUDA]) as profiler:
            function()
            synchronize(device)
        total = sum(
            event.self_device_time_total
            for event in profiler.key_averages()
            if event.device_type == DeviceType.CUDA
        )
        if total > 0:
            best = total if best is None else min(best, total)
    return None if best is None else best / 1e6  # the profiler counts microseconds


def time_call(function: Callable[[], object], device: torch.device, repeat: int = 1) -> float:
    """Seconds per call of ``function`` (mean over ``repeat`` back-to-back calls, device-synchronised)."""
    synchronize(device)
    start = time.perf_counter()
    for _ in range(repeat):
        function()
    synchronize(device)
    return (time.perf_counter() - start) / repeat


def calls_per_sample(function: Callable[[], object], device: torch.device, target_seconds: float) -> int:
    """How many back-to-back calls make one timing sample of about ``target_seconds`` (>= 1)."""
    single = time_call(function, device)
    return max(1, min(1000, math.ceil(target_seconds / max(single, 1e-6))))


def interleaved_ratios(
    baseline: Callable[[], object],
    candidates: dict[str, Callable[[], object]],
    device: torch.device,
    rounds: int,
    target_seconds: float = 0.0,
    progress: Progress | None = None,
) -> dict[str, dict[str, float | list[float]]]:
    """Time each candidate against the baseline in ``rounds`` pairs (A, B, then B, A, ...).

    Returns, per candidate name (and "baseline"): ``seconds`` (median seconds per call),
    ``ratio`` (median over rounds of t_candidate / t_baseline of the same pair), ``ratio_low`` and
    ``ratio_high`` (the smallest and largest per-pair ratio), and ``ratios`` (all of them).
    ``target_seconds`` > 0 repeats fast calls back to back so that each sample lasts about that
    long (for GPU kernels of a fraction of a millisecond).
    """
    repeats = {name: 1 for name in candidates}
    baseline_repeat = 1
    if target_seconds > 0:
        baseline_repeat = calls_per_sample(baseline, device, target_seconds)
        repeats = {name: calls_per_sample(f, device, target_seconds) for name, f in candidates.items()}
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    baseline_samples: list[float] = []
    ratios: dict[str, list[float]] = {name: [] for name in candidates}
    for round_index in range(rounds):
        for name, function in candidates.items():
            if round_index % 2 == 0:
                base = time_call(baseline, device, baseline_repeat)
                mine = time_call(function, device, repeats[name])
            else:
                mine = time_call(function, device, repeats[name])
                base = time_call(baseline, device, baseline_repeat)
            baseline_samples.append(base)
            samples[name].append(mine)
            ratios[name].append(mine / base)
            if progress is not None:
                progress.update()
    result: dict[str, dict[str, float | list[float]]] = {
        "baseline": {"seconds": statistics.median(baseline_samples), "ratio": 1.0}
    }
    for name in candidates:
        result[name] = {
            "seconds": statistics.median(samples[name]),
            "ratio": statistics.median(ratios[name]),
            "ratio_low": min(ratios[name]),
            "ratio_high": max(ratios[name]),
            "ratios": [round(value, 4) for value in ratios[name]],
        }
    return result


# ----------------------------------------------------------------------------------------------
# peak memory


class _LiveTensorBytes(TorchDispatchMode):
    """Follows the storages that operators create: after each operator, the bytes of those still
    alive (the storage weak references not yet expired) and the largest such sum seen."""

    def __init__(self) -> None:
        super().__init__()
        self.storages: dict[int, tuple[StorageWeakRef, int]] = {}
        self.peak = 0

    def _live_bytes(self) -> int:
        expired = [key for key, (reference, _) in self.storages.items() if reference.expired()]
        for key in expired:
            del self.storages[key]
        return sum(size for _, size in self.storages.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        output = func(*args, **(kwargs or {}))
        # a view shares its input's storage: that memory was not allocated by this operator
        inputs = {
            leaf.untyped_storage().data_ptr()
            for leaf in tree_leaves((args, kwargs))
            if isinstance(leaf, torch.Tensor) and leaf.device.type == "cpu"
        }
        for tensor in tree_leaves(output):
            if isinstance(tensor, torch.Tensor) and tensor.device.type == "cpu":
                storage = tensor.untyped_storage()
                key = storage.data_ptr()
                if key and key not in inputs and key not in self.storages:
                    self.storages[key] = (StorageWeakRef(storage), storage.nbytes())
        self.peak = max(self.peak, self._live_bytes())
        return output


def peak_extra_bytes(function: Callable[[], object], device: torch.device) -> int | None:
    """Peak memory of the tensors allocated by one call of ``function`` beyond those alive before.

    CUDA: the caching allocator's peak of allocated bytes minus the bytes allocated before the call.
    CPU: the largest total size of the tensor storages created during the call and alive at the
    same time, checked after every operator (forward and backward); scratch memory that an operator
    frees before it returns is not seen.
    """
    if device.type == "cuda":
        synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        function()
        synchronize(device)
        return int(torch.cuda.max_memory_allocated(device) - before)
    tracker = _LiveTensorBytes()
    with tracker:
        function()
    return tracker.peak


# ----------------------------------------------------------------------------------------------
# output


def environment(device: torch.device) -> dict[str, object]:
    """Where the figures were measured."""
    info: dict[str, object] = {
        "device": str(device),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def made_by() -> dict[str, str]:
    """What made a result: the command as typed from the repository's root, and the versions with
    the git revision (:func:`mitool._infra.runner.versions`)."""
    import shlex
    import sys

    from mitool._infra.runner import versions

    script = os.path.relpath(os.path.abspath(sys.argv[0]))
    return {"command": shlex.join(["python", script, *sys.argv[1:]]), **versions()}


def write_json(path: str, data: object) -> None:
    """Write ``data`` as JSON atomically (:func:`mitool._infra.files.atomic_write_text`); a dict gets
    ``made_by`` (:func:`made_by`), so that every committed result says how to make it again."""
    if isinstance(data, dict):
        data = {**data, "made_by": made_by()}
    atomic_write_text(path, json.dumps(data, indent=1) + "\n")
