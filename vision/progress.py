"""A small progress printer on stderr with an ETA (the library's; the CLI switches it off with --quiet).

    epoch 3/200  1210/5004  [02:41<08:26, 7.5 it/s]  loss 6.91

One line rewritten in place at most every ``interval`` seconds, finished with a newline.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


def _clock(seconds: float) -> str:
    seconds = int(max(0, seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


class Progress:
    """Count ``total`` steps of a task called ``label``; ``update(note=...)`` after each step."""

    def __init__(
        self,
        total: int,
        label: str,
        enabled: bool = True,
        interval: float = 0.5,
        stream: TextIO | None = None,
    ) -> None:
        self.total = max(total, 0)
        self.label = label
        self.enabled = enabled
        self.interval = interval
        self.stream = stream or sys.stderr
        self.done = 0
        self.start = time.perf_counter()
        self.last_print = 0.0

    def update(self, steps: int = 1, note: str = "") -> None:
        self.done += steps
        now = time.perf_counter()
        if self.enabled and (now - self.last_print >= self.interval or self.done >= self.total):
            self.last_print = now
            elapsed = now - self.start
            rate = self.done / elapsed if elapsed > 0 else 0.0
            remaining = (self.total - self.done) / rate if rate > 0 else 0.0
            timing = f"[{_clock(elapsed)}<{_clock(remaining)}, {rate:.1f} it/s]"
            line = f"{self.label}  {self.done}/{self.total}  {timing}"
            self.stream.write("\r" + line + (f"  {note}" if note else "") + "\x1b[K")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.done:
            self.stream.write("\n")
            self.stream.flush()
