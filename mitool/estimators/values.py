"""The values a user gives, checked before any estimator sees them: missing values and scales.

* Missing values (NaN, ``None``, pandas' ``NA`` and ``NaT``; in a CSV file an empty field, ``NA``,
  ``NaN``, ``null``, ...): under ``missing="drop"`` (the default of every command and function) a
  row with a missing value in any variable used is left out of that estimate or test, and a note
  gives the count, so row i of X always meets row i of Y; ``missing="refuse"`` makes a missing
  value an error naming its row. Dropping complete cases is unbiased where values are missing
  completely at random; otherwise the MI is that of the complete rows, which the note says.
* Scales: the MI is unchanged by a change of units of a column, but an estimator's distances and
  covariances are not computable at every scale: squares of 1e160 overflow and of 1e-160
  underflow. A column whose spread lies outside [2^-200, 2^200] is multiplied by a power of two
  that brings it near 1 (:func:`safe_scale`: exact in floating point, so ties and the order of the
  values are kept); every other column is left exactly as given. A value more than
  :data:`EXTREME` times the column's spread from its median (1e308 among values near 1) is refused
  in one line naming its row: no estimator resolves the other values' dependence beside it.
"""

from __future__ import annotations

import math

import numpy as np

from mitool import checks

__all__ = ["EXTREME", "MISSING_CHOICES", "MISSING_TEXT", "complete_rows", "is_missing", "safe_scale"]

MISSING_CHOICES: dict[str, str] = {
    "drop": "rows with a missing value in any variable used are left out, with a note giving the count",
    "refuse": "a missing value is an error naming its row",
}
"""``missing``: what a missing value does."""

MISSING_TEXT = frozenset({"", "na", "n/a", "nan", "null", "none", "<na>", "#n/a", "nat"})
"""Fields of a CSV file that are a missing value, compared in lower case: what pandas' ``to_csv``
(an empty field), R's ``write.csv`` (``NA``) and other writers put in the place of one."""

EXTREME = 1e100
"""A value farther than this many spreads (the median absolute deviation) from its column's median
is refused: its square beside the others' is beyond what floating point keeps."""

_SAFE_EXPONENTS = (-200, 200)
"""A column's spread within [2^-200, 2^200] is left as it is; outside, it is scaled by a power of two."""


def is_missing(value: object) -> bool:
    """Whether one value is a missing value: None, a float NaN, pandas' NA or NaT, numpy's NaT."""
    if value is None:
        return True
    if isinstance(value, float | np.floating):
        return math.isnan(value)
    if isinstance(value, np.datetime64 | np.timedelta64):
        return bool(np.isnat(value))
    return type(value).__name__ in ("NAType", "NaTType")


def complete_rows(
    arrays: dict[str, np.ndarray | None], missing: str
) -> tuple[dict[str, np.ndarray | None], list[str]]:
    """The arrays (float64, (n, d), NaN where a value is missing) with every row that has a missing
    value in any of them left out, and the note that says so; a ParameterError under
    ``missing="refuse"``, or where no complete row is left."""
    checks.choice("missing", missing, MISSING_CHOICES)
    gaps = {name: np.isnan(array).any(axis=1) for name, array in arrays.items() if array is not None}
    incomplete = np.logical_or.reduce(list(gaps.values()))
    if not incomplete.any():
        return arrays, []
    first = next(name for name, gap in gaps.items() if gap.any())
    if missing == "refuse":
        row = int(np.argmax(gaps[first]))
        raise checks.ParameterError(
            first, f"has a missing value (NaN, None or an empty field) in row {row}, "
            f"{int(gaps[first].sum())} rows in all; fill them, or leave those rows out with "
            "{=missing} drop",
            ("missing",),
        )  # fmt: skip
    n, kept = len(incomplete), ~incomplete
    if not kept.any():
        raise checks.ParameterError(
            first, f"and the other variables leave no row without a missing value (of {n})"
        )
    counts = ", ".join(f"{name}: {int(gap.sum())}" for name, gap in gaps.items() if gap.any())
    note = (
        f"missing values: {int(incomplete.sum())} of {n} rows left out ({counts}), the MI is that of the "
        f"{int(kept.sum())} complete rows"
    )
    return {name: None if array is None else array[kept] for name, array in arrays.items()}, [note]


def safe_scale(name: str, array: np.ndarray) -> np.ndarray:
    """``array`` (float64, (n, d), NaN for missing values) with each column whose spread is outside
    [2^-200, 2^200] multiplied by the power of two that brings its spread nearest 1; a
    ParameterError naming the row of a value farther than :data:`EXTREME` spreads from its column's
    median. The spread is the median absolute deviation from the median, or, where more than half
    the values equal the median, the median of the other deviations."""
    scaled = array
    for j in range(array.shape[1]):
        column = array[:, j]
        values = column[~np.isnan(column)]
        if len(values) < 2:
            continue
        centre = float(np.median(values))
        with np.errstate(over="ignore", invalid="ignore"):
            deviation = np.abs(values - centre)
        nonzero = deviation[deviation > 0]
        if not len(nonzero):
            continue  # a constant column
        spread = float(np.median(deviation)) or float(np.median(nonzero))
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            too_far = ~(deviation / spread <= EXTREME)
        if too_far.any():
            row = int(np.flatnonzero(~np.isnan(column))[np.argmax(too_far)])
            raise checks.ParameterError(
                name, f"holds {column[row]:.3g} in row {row} (column {j}), more than {EXTREME:.0e} times the "
                f"spread of the column's other values ({spread:.3g}) from their median: no estimate resolves "
                "the others beside it; leave the row out, or transform the column (its logarithm, its ranks)",
            )  # fmt: skip
        exponent = math.frexp(spread)[1]
        if not _SAFE_EXPONENTS[0] <= exponent <= _SAFE_EXPONENTS[1]:
            if scaled is array:
                scaled = array.copy()
            scaled[:, j] = np.ldexp(column, -exponent)
    return scaled
