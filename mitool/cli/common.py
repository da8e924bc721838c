"""Pieces the command-line modules share: comma-separated lists, the device check, one-line logs,
progress callbacks, and the shell of a resumable run (SIGTERM handled as Ctrl-C)."""

from __future__ import annotations

import contextlib
import json
import math
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence

import click

from mitool import checks
from mitool._infra.processes import Terminated, sigterm_as_interrupt
from mitool._infra.progress import Progress
from mitool._infra.runner import RanksMissing, SettingsDiffer
from mitool.checks import ParameterError

__all__ = [
    "EstimateProgress",
    "json_text",
    "check_device",
    "command_line",
    "program_words",
    "log_line",
    "parse_list",
    "PermutationProgress",
    "progress_reporter",
    "resumable_run",
]


def json_text(value: object) -> str:
    """``value`` as strict JSON (RFC 8259 has no NaN or Infinity): a float that is not finite becomes
    null, at any depth; the result's text (its ``interval``) says what an open or missing end means."""

    def finite(item: object) -> object:
        if isinstance(item, float) and not math.isfinite(item):
            return None
        if isinstance(item, dict):
            return {key: finite(inner) for key, inner in item.items()}
        if isinstance(item, list | tuple):
            return [finite(inner) for inner in item]
        return item

    return json.dumps(finite(value), allow_nan=False)


def parse_list(parameter: str, text: str, kind: type, unique: bool = True) -> list:
    """Split a comma-separated value into a list of ``kind`` (str, int or float). An empty item
    ("2,,4", a trailing comma) is an error, and with ``unique`` so is a repeated value (it would
    train the same runs twice and count them twice in the summary). Errors name ``parameter``."""
    items = [item.strip() for item in str(text).split(",")]
    if not any(items):
        raise checks.ParameterError(parameter, f"needs a comma-separated list, got {text!r}")
    if not all(items):
        raise checks.ParameterError(
            parameter, f"has an empty item in {text!r} (two commas, or one at an end)"
        )
    parsed = []
    for item in items:
        try:
            parsed.append(kind(item))
        except ValueError:
            name = "whole numbers" if kind is int else "numbers"
            raise checks.ParameterError(parameter, f"must be comma-separated {name}, got {item!r}") from None
    if unique:
        repeated = sorted({str(value) for value in parsed if parsed.count(value) > 1})
        if repeated:
            raise checks.ParameterError(
                parameter, f"may list each value once, got {', '.join(repeated)} twice or more"
            )
    return parsed


def progress_reporter(bar: Progress) -> Callable[..., None]:
    """The toy study's progress callback ``(steps done, latest mean estimate, note)`` drawn on ``bar``."""

    def report(done: int, estimate: float, note: str = "") -> None:
        text = f"{note} mean estimate {estimate:.3f} nats".strip() if math.isfinite(estimate) else note
        bar.set_done(done, text)

    return report


class EstimateProgress:
    """An estimator's progress callback ``(done, total, value)`` drawn as a bar made at the first
    call (an estimator that reports nothing shows none); ``close()`` at the end. Without the bar
    (--quiet), a run that will take more than :data:`LONG_RUN_SECONDS` says so in one line on
    stderr at its second report: the time so far plus what is left at the rate between the first
    two reports (KSG reports after each subset; a neural estimate gives its most, as early stopping
    may end it sooner).

    The note says what the value is. Only critic training reports values before the end: the
    bound on the validation pairs (``validation value 6.397 nats after 650 steps``: the steps of
    training so far, those of critics trained before it included, as ``normalise="auto"`` trains
    twice); at its end it reports the last or the best of them (the critic is kept at its best),
    said with the word that the estimate is scored on the held-out pairs, so differs. Any other
    last value (a k-NN estimate on all pairs) is left out: the result printed next is the estimate."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.label, self.enabled, self.bar = label, enabled, None
        self.started, self.stated, self.first = time.perf_counter(), enabled, None
        self.validated = False  # critic training reported a validation value

    def __call__(self, done: int, total: int, value: float) -> None:
        if self.bar is None:
            self.bar = Progress(total, self.label, enabled=self.enabled)
        self.bar.set_done(min(done, total), self.note(done, total, value))
        if not self.stated and 0 < done < total:
            self._state_the_time(done, total)

    def note(self, done: int, total: int, value: float) -> str:
        """The text after the bar: what ``value`` is (see the class), or nothing."""
        if not math.isfinite(value):
            return ""
        if done < total:
            self.validated = True
            return f"validation value {value:.3f} nats after {done} steps"
        if self.validated:
            return f"validation value {value:.3f} nats; the estimate is scored on the held-out pairs"
        return ""

    def _state_the_time(self, done: int, total: int) -> None:
        now = time.perf_counter()
        if self.first is None or done <= self.first[1]:
            self.first = (now, done)
            return
        self.stated = True
        seconds_per_unit = (now - self.first[0]) / (done - self.first[1])
        elapsed = now - self.started
        expected = elapsed + seconds_per_unit * (total - done)
        if expected > LONG_RUN_SECONDS:
            # critic training's units are its cap of steps, which early stopping rarely reaches
            cap = "; that is at the cap of steps, and early stopping usually ends training sooner"
            log_line(f"{self.label}: expected to take up to about {expected:.0f} s ({done} of {total} units "
                     f"done in {elapsed:.0f} s{cap if self.validated else ''})")  # fmt: skip

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


LONG_RUN_SECONDS = 10.0
"""An estimate expected to take longer says so even under --quiet."""

QUIET_SECONDS = 2.0
"""Work that ends sooner draws no bar (:class:`PermutationProgress`)."""


class PermutationProgress:
    """A progress callback ``(done, total)`` (a test's permutations) drawn as a bar with the time
    left once the work has run :data:`QUIET_SECONDS`, so that a quick test prints only its result;
    ``close()`` at the end."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.label, self.enabled, self.bar = label, enabled, None
        self.started = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            if not self.enabled or time.perf_counter() - self.started < QUIET_SECONDS:
                return
            self.bar = Progress(total, f"{self.label} permutations", done=done)
        self.bar.set_done(min(done, total))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def program_words() -> list[str]:
    """The words that run this program again: the path that ran it (a virtual environment need not
    be active), or ``python -m mitool.cli.main`` as it was run."""
    import os

    program = sys.argv[0]
    if os.path.basename(program) == "main.py" or program.endswith("-m"):  # python -m mitool.cli.main
        return [sys.executable, "-m", "mitool.cli.main"]
    return [os.path.abspath(program) if os.sep in program or os.path.exists(program) else program]


def command_line(*extra: str) -> str:
    """The command that ran, to type again (:func:`program_words`, then its arguments and ``extra``),
    quoted for the shell."""
    import shlex

    return shlex.join([*program_words(), *sys.argv[1:], *extra])


def log_line(message: str) -> None:
    """One line on stderr."""
    click.echo(message, err=True)


def check_device(device: str) -> None:
    """ParameterError("device", ...) unless ``device`` is cpu, or a CUDA device this machine has."""
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        parsed = None
    if parsed is None or parsed.type not in ("cpu", "cuda"):
        raise ParameterError("device", f"must be cpu, cuda or cuda:N, got {device!r}")
    count = torch.cuda.device_count() if parsed.type == "cuda" else 0
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ParameterError("device", f"{device!r} needs CUDA, which is not available here; use cpu")
    if parsed.type == "cuda" and parsed.index is not None and parsed.index >= count:
        raise ParameterError(
            "device", f"{device!r} asked for, but this machine has {count} GPU(s): cuda:0 to cuda:{count - 1}"
        )


@contextlib.contextmanager
def resumable_run(label: str, note: Callable[[], str], bars: Sequence[Progress]) -> Iterator[None]:
    """The shell of a resumable command (``toy sweep``, ``benchmark``) around its work: SIGTERM acts
    as Ctrl-C, and on either the progress ``bars`` are closed, one line ``<label> stopped by
    SIGINT: <note()>`` (what is saved, how to resume) goes to stderr and the program exits with
    128 + the signal's number. A :class:`mitool._infra.runner.SettingsDiffer` is re-raised with the
    settings named by the command's options (``--seeds`` for ``seeds``); ranks that never came
    (:class:`mitool._infra.runner.RanksMissing`) are one line, exit 1."""
    from mitool.cli.errors import flag_of

    try:
        with sigterm_as_interrupt():
            yield
    except SettingsDiffer as error:
        command = click.get_current_context().command
        named = [(flag_of(command, name) or name, there, now) for name, there, now in error.differences]
        raise SettingsDiffer(error.out, named) from None
    except RanksMissing as error:
        raise click.ClickException(str(error)) from None
    except Exception as error:
        stop = _interruption_behind(error)
        if stop is None:
            raise
        _report_stop(label, note, bars, stop)
    except KeyboardInterrupt as stop:
        _report_stop(label, note, bars, stop)
    finally:
        for bar in bars:
            bar.close()


def _interruption_behind(error: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM that ``error`` was raised while handling, if any: a signal that lands
    inside torch.func's vmap can surface as torch's RuntimeError with the interrupt as its context."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def _report_stop(
    label: str, note: Callable[[], str], bars: Sequence[Progress], stop: KeyboardInterrupt
) -> None:
    for bar in bars:
        bar.close()
    number = signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT
    log_line(f"{label} stopped by {number.name}: {note()}")
    sys.exit(128 + int(number))
