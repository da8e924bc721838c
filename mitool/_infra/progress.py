"""The one progress display of mitool, on stderr (the library's; command lines turn it off with
--quiet).

On a terminal, one line rewritten in place at most every ``interval`` seconds::

    toy sweep  1210/5004  24%  [02:41<08:26, 7.5 it/s]  separable K=64: mean estimate 3.912 nats

Elsewhere (a log file, a pipe, a CI job) no carriage returns: a plain line each time another
``every_percent`` percent is done, and one at the end. The rate and the time left count only the
steps made since the display started, so a resumed run that starts at step 900 of 1000 shows its
own speed, not 900 steps in no time.
"""

from __future__ import annotations

import math
import sys
import time
from typing import TextIO

__all__ = ["Progress"]


def _clock(seconds: float) -> str:
    seconds = int(max(0.0, seconds)) if math.isfinite(seconds) else 0
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


class Progress:
    """``total`` steps of a task called ``label``; ``update(steps, note)`` after each step (or
    ``set_done(done, note)``), ``close()`` at the end (or use it as a context manager).

    done: steps already done when the display starts (a resumed run). enabled: False draws
    nothing. stream: default sys.stderr. terminal: draw in place; default: whether ``stream`` is a
    terminal. every_percent: off a terminal, print a line each time this much more is done.
    """

    def __init__(
        self,
        total: int,
        label: str,
        enabled: bool = True,
        done: int = 0,
        stream: TextIO | None = None,
        terminal: bool | None = None,
        every_percent: float = 10.0,
        interval: float = 0.5,
    ) -> None:
        self.total = max(int(total), 0)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and self.total > 0
        self.terminal = (
            terminal if terminal is not None else bool(getattr(self.stream, "isatty", lambda: False)())
        )
        self.every_percent = every_percent
        self.interval = interval
        self.done = self.first = min(int(done), self.total)
        self.started = time.perf_counter()
        self.last_drawn = -math.inf
        self.last_percent_line = self._percent() if self.first else -math.inf
        self.drawn = False
        self.closed = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exception: object) -> None:
        self.close()

    def _percent(self) -> float:
        return 100.0 * self.done / self.total if self.total else 100.0

    def update(self, steps: int = 1, note: str = "") -> None:
        """``steps`` more steps are done; ``note`` is shown after the timing."""
        self.set_done(self.done + steps, note)

    def set_done(self, done: int, note: str = "") -> None:
        """``done`` steps of ``total`` are done (never goes back)."""
        self.done = min(max(self.done, int(done)), self.total)
        if not self.enabled or self.closed:
            return
        now = time.perf_counter()
        finished = self.done >= self.total
        if self.terminal:
            if now - self.last_drawn >= self.interval or finished:
                self.last_drawn = now
                self.stream.write("\r" + self.line(note) + "\x1b[K")
                self.stream.flush()
                self.drawn = True
        elif self._percent() >= self.last_percent_line + self.every_percent or finished:
            self.last_percent_line = math.floor(self._percent() / self.every_percent) * self.every_percent
            self.stream.write(self.line(note) + "\n")
            self.stream.flush()
            self.drawn = not finished

    def line(self, note: str = "") -> str:
        """The text of the display at this moment."""
        elapsed = time.perf_counter() - self.started
        made = self.done - self.first
        rate = made / elapsed if elapsed > 0 else 0.0
        remaining = (self.total - self.done) / rate if rate > 0 else math.nan
        timing = f"[{_clock(elapsed)}<{_clock(remaining) if math.isfinite(remaining) else '?'}, "
        timing += f"{rate:.3g} it/s]" if rate < 1000 else f"{rate:.0f} it/s]"
        percent = f"{self._percent():3.0f}%"
        return f"{self.label}  {self.done}/{self.total}  {percent}  {timing}" + (f"  {note}" if note else "")

    def close(self) -> None:
        """End the display (a newline after an in-place line; a last line off a terminal)."""
        if self.closed:
            return
        self.closed = True
        if not self.enabled:
            return
        if self.terminal and self.drawn:
            self.stream.write("\n")
        elif not self.terminal and self.drawn and self.done < self.total:
            self.stream.write(self.line("stopped") + "\n")
        self.stream.flush()
