"""Argument checks shared by the whole package.

Every check raises :class:`ParameterError`, a ``ValueError`` whose one-line message names the
parameter as the Python function spells it, what is allowed and the value given::

    batch_size must be a whole number >= 2, got 1

The command line (:mod:`mitool.cli.errors`) prints the same message with the parameter replaced by
the option the user typed (``--batch-size must be a whole number >= 2, got 1``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

__all__ = ["ParameterError", "TooFewSamples", "choice", "fraction", "number", "positive", "whole_number"]


class ParameterError(ValueError):
    """A bad argument. ``parameter``: its name (a Python parameter); ``problem``: the rest of the
    message, what is allowed and what was given. ``str(error)`` is ``f"{parameter} {problem}"``.

    ``listed``: other parameters the message names (the settings an estimator has, say), written in
    ``problem`` as ``{listed}`` (all of them) or ``{=name}`` (one); :meth:`render` spells them (and
    ``parameter``) as the interface that raised the error does: ``batch_size`` in Python,
    ``--batch-size`` on the command line."""

    def __init__(self, parameter: str, problem: str, listed: tuple[str, ...] = ()) -> None:
        self.parameter = parameter
        self.template = problem
        self.listed = tuple(listed)
        self.problem = self._filled(lambda name: name)
        super().__init__(f"{parameter} {self.problem}")

    def _filled(self, spell: Callable[[str], str]) -> str:
        text = self.template.replace("{listed}", ", ".join(spell(name) for name in self.listed))
        for name in self.listed:
            text = text.replace("{=" + name + "}", spell(name))
        return text

    def render(self, spell: Callable[[str], str]) -> str:
        """The message with every parameter spelled by ``spell`` (e.g. the command's flag)."""
        return f"{spell(self.parameter)} {self._filled(spell)}"


class TooFewSamples(ParameterError):
    """Fewer samples than an estimator or a test needs: ``parameter`` names the data ("x"), the
    message how many there are and how many are needed. Callers that can do without those data (a
    group of a discrete Z too small for the estimator within it) catch this class, not the words."""


def whole_number(
    parameter: str, value: object, minimum: int | None = None, maximum: int | None = None
) -> int:
    """``value`` as an int when it is a whole number (not a bool) within [minimum, maximum]."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or (minimum is not None and value < minimum)
        or (maximum is not None and value > maximum)
    ):
        raise ParameterError(parameter, f"must be a whole number{_range(minimum, maximum)}, got {value!r}")
    return int(value)


def number(
    parameter: str,
    value: object,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    below: float | None = None,
) -> float:
    """``value`` as a float when it is a finite real number with minimum <= value <= maximum,
    above < value < below (each bound optional)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:  # numpy and torch scalars
            value = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ParameterError(
                parameter, f"must be a number{_range(minimum, maximum, above, below)}, got {value!r}"
            ) from None
    value = float(value)
    if (
        not math.isfinite(value)
        or (minimum is not None and value < minimum)
        or (maximum is not None and value > maximum)
        or (above is not None and value <= above)
        or (below is not None and value >= below)
    ):
        raise ParameterError(
            parameter, f"must be a finite number{_range(minimum, maximum, above, below)}, got {value!r}"
        )
    return value


def positive(parameter: str, value: object) -> float:
    """``value`` as a float when it is a finite number > 0."""
    return number(parameter, value, above=0.0)


def positive_or_unlimited(parameter: str, value: object) -> float:
    """``value`` as a float when it is a number > 0, infinity included (no limit: ``inf``)."""
    try:
        unlimited = not isinstance(value, bool) and float(value) == math.inf  # type: ignore[arg-type]
    except (TypeError, ValueError):
        unlimited = False
    if unlimited:
        return math.inf
    try:
        return positive(parameter, value)
    except ParameterError:
        raise ParameterError(parameter, f"must be a number > 0, or inf for no limit, got {value!r}") from None


def fraction(parameter: str, value: object) -> float:
    """``value`` as a float strictly between 0 and 1."""
    return number(parameter, value, above=0.0, below=1.0)


def choice(parameter: str, value: object, allowed: Iterable[str]) -> str:
    """``value`` when it is one of ``allowed``."""
    allowed = tuple(allowed)
    if value not in allowed:
        raise ParameterError(parameter, f"must be one of {', '.join(allowed)}, got {value!r}")
    return value  # type: ignore[return-value]


def _range(
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    below: float | None = None,
) -> str:
    low = f">= {minimum:g}" if minimum is not None else (f"> {above:g}" if above is not None else None)
    high = f"<= {maximum:g}" if maximum is not None else (f"< {below:g}" if below is not None else None)
    if low and high:
        if minimum is not None and maximum is not None:
            return f" from {minimum:g} to {maximum:g}"
        return f" {low} and {high}"
    return f" {low or high}" if (low or high) else ""
