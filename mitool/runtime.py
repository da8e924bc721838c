"""Run-time settings that every entry point shares: torch's thread count sized to the free cores.

On a 2-core machine with one core busy elsewhere, torch's default of one thread per core ran
5 to 10 times slower than one thread: oversubscribed cores make the threads wait for each other.

Every ``mitool`` command calls :func:`set_threads_to_free_cores` when it starts (and honours
``MITOOL_THREADS``). Importing the library changes nothing: torch keeps its own thread count
(one per core) until you call it yourself::

    import mitool.runtime
    mitool.runtime.set_threads_to_free_cores()   # or torch.set_num_threads(n)
"""

from __future__ import annotations

import os
import time

from mitool.lazy import lazy_import

torch = lazy_import("torch")  # loaded when the threads are set, not when a command's help is read

__all__ = [
    "available_memory",
    "chosen_threads",
    "free_cores",
    "refuse_beyond_memory",
    "set_threads_to_free_cores",
]

_chosen: int | None = None


def chosen_threads() -> int:
    """The thread count :func:`set_threads_to_free_cores` chose in this process (1 before it is
    called: a library caller who has not sized the threads gets one), for the work that is not
    torch's (scipy's neighbour searches)."""
    return _chosen or 1


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
    machine, at most ``maximum``; returns the count."""
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
    torch.set_num_threads(threads)
    global _chosen
    _chosen = threads
    return threads


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
