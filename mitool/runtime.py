"""Run-time settings that every entry point shares: torch's thread count sized to the free cores.

On a 2-core machine with one core busy elsewhere, torch's default of one thread per core ran
5 to 10 times slower than one thread: oversubscribed cores make the threads wait for each other.

Every ``mitool`` command calls :func:`set_threads_to_free_cores` when it starts (and honours
``MITOOL_THREADS``). Importing the library changes nothing: torch keeps its own thread count
(one per core) until you call it yourself::

    import mitool.runtime
    mitool.runtime.set_threads_to_free_cores()   # or torch.set_num_threads(n)

Setting the count never imports torch (about 2 s, for a route that trains no network): where torch
is not imported yet, the count is kept and set the moment torch is first imported (a finder first on
``sys.meta_path`` wraps torch's loader, and steps aside once it has found torch).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

__all__ = [
    "available_memory",
    "chosen_threads",
    "threads_mapping",
    "free_cores",
    "refuse_beyond_memory",
    "set_threads_to_free_cores",
]

_chosen: int | None = None


_per_thread = threading.local()


def chosen_threads() -> int:
    """The thread count :func:`set_threads_to_free_cores` chose in this process (1 before it is
    called: a library caller who has not sized the threads gets one), for the work that is not
    torch's (scipy's neighbour searches); 1 inside the workers of :func:`threads_mapping`, which
    already share the cores out."""
    return getattr(_per_thread, "threads", None) or _chosen or 1


def _one_thread_each() -> None:
    _per_thread.threads = 1


Mapper = Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]
"""``mapper(function, items)``: ``[function(item) for item in items]``, in order."""


@contextlib.contextmanager
def threads_mapping(threads: int | None = None) -> Iterator[Mapper]:
    """A mapper that spreads its items over ``threads`` threads (default :func:`chosen_threads`;
    one pool for the whole ``with``), for work that leaves Python's lock while it computes (numpy,
    scipy's trees, the compiled grid: numba's ``nogil``). Inside the workers :func:`chosen_threads`
    is 1: they already share the cores out."""
    threads = chosen_threads() if threads is None else threads
    if threads <= 1:
        yield lambda function, items: [function(item) for item in items]
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(threads, initializer=_one_thread_each) as pool:
        yield lambda function, items: list(pool.map(function, items))


def _busy_and_total_jiffies() -> tuple[int, int] | None:
    try:
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def free_cores(sample_seconds: float = 0.1) -> int:
    """The number of cores this process may use that are not busy with other work (at least 1).

    Reads the whole machine's busy time over ``sample_seconds`` from /proc/stat (Linux); elsewhere
    falls back to the 1-minute load average. The cores counted are those of this process's
    affinity mask (what ``taskset`` or a container allows).
    """
    try:
        allowed = len(os.sched_getaffinity(0))
    except AttributeError:
        allowed = os.cpu_count() or 1
    total_cores = os.cpu_count() or allowed
    before = _busy_and_total_jiffies()
    if before is not None:
        time.sleep(sample_seconds)
        after = _busy_and_total_jiffies()
        if after is not None and after[1] > before[1]:
            busy = total_cores * (after[0] - before[0]) / (after[1] - before[1])
        else:
            busy = 0.0
    else:
        try:
            busy = os.getloadavg()[0]
        except OSError:
            busy = 0.0
    return max(1, min(allowed, int(allowed - busy + 0.5)))


def set_threads_to_free_cores(maximum: int | None = None) -> int:
    """Set torch's intra-op thread count to the free cores (or to $MITOOL_THREADS when set),
    divided among the $LOCAL_WORLD_SIZE processes a launcher such as torchrun starts on this
    machine, at most ``maximum``; returns the count. Set now where torch is imported, else when it
    is first imported (never imported here)."""
    forced = os.environ.get("MITOOL_THREADS")
    if forced:
        try:
            threads = int(forced)
        except ValueError:
            raise ValueError(f"MITOOL_THREADS must be a whole number >= 1, got {forced!r}") from None
        if threads < 1:
            raise ValueError(f"MITOOL_THREADS must be a whole number >= 1, got {forced!r}")
    else:
        # under a launcher (torchrun sets LOCAL_WORLD_SIZE) the processes of one machine share its
        # free cores; all of them sample the machine at the same moment, so divide, do not compete
        processes_here = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
        threads = max(1, free_cores() // max(1, processes_here))
    if maximum is not None:
        threads = max(1, min(threads, maximum))
    global _chosen
    _chosen = threads
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "set_num_threads"):  # imported (not importing): set now
        torch.set_num_threads(threads)
    else:
        _set_threads_when_torch_loads()
    return threads


class _ThenSetThreads:
    """torch's own loader, which sets torch's thread count to :data:`_chosen` once torch's code has
    run; every other attribute is the wrapped loader's."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        if _chosen is not None:
            module.set_num_threads(_chosen)


class _TorchThreadsFinder:
    """First on ``sys.meta_path`` until torch is imported: finds torch with the finders after it,
    gives the spec a :class:`_ThenSetThreads` loader and leaves ``sys.meta_path``."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name != "torch":
            return None
        _leave_meta_path()
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenSetThreads(spec.loader)
        return spec


_finder = _TorchThreadsFinder()
_finder_lock = threading.Lock()


def _leave_meta_path() -> None:
    with _finder_lock:
        if _finder in sys.meta_path:
            sys.meta_path.remove(_finder)


def _set_threads_when_torch_loads() -> None:
    with _finder_lock:
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)


def available_memory() -> int | None:
    """The bytes of memory the machine can give now without swapping (Linux's MemAvailable), or
    None where it cannot be read."""
    try:
        with open("/proc/meminfo") as stream:
            for line in stream:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def refuse_beyond_memory(parameter: str, needed: float, what: str, remedy: str) -> None:
    """A one-line ParameterError naming ``parameter`` where ``what`` needs about ``needed`` bytes,
    more than :func:`available_memory`: refused before the work starts, not killed in the middle."""
    from mitool.checks import ParameterError

    free = available_memory()
    if free is not None and needed > free:
        raise ParameterError(
            parameter, f"{what} needs about {needed / 2**30:.1f} GiB of memory, more than the "
            f"{free / 2**30:.1f} GiB free; {remedy}",
        )  # fmt: skip
