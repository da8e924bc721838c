"""The MI of your data in one call: ``estimate(x, y) -> Estimate``, no file I/O.

    from mitool.estimate import estimate
    result = estimate(x, y)                      # x (n, dx), y (n, dy): row i of x goes with row i of y
    print(result.value, result.ci_low, result.ci_high, result.notes)
    estimate(x, y, "ksg", k=8)                   # any estimator of mitool.estimators, with its settings

Before the estimator runs, a constant column is dropped (it carries no information: the MI is
that of the other columns, and 0 when a side has no other column), with a note saying so. With
``estimator`` None the estimator is the default for the data (:data:`mitool.estimators.DEFAULTS`).
Everything else is the estimator's: :mod:`mitool.estimators` lists them, each with its settings.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mitool import estimators
from mitool.estimators.base import DivergenceError, Estimate, Progress, as_rows

__all__ = ["DivergenceError", "Estimate", "estimate"]


def _without_constant_columns(name: str, rows: np.ndarray) -> tuple[np.ndarray, list[str]]:
    constant = np.flatnonzero(np.ptp(rows, axis=0) == 0)
    if not len(constant):
        return rows, []
    listed = ", ".join(str(column) for column in constant)
    note = f"{name}: column(s) {listed} are constant (no information) and were left out"
    return np.delete(rows, constant, axis=1), [note]


def _no_information(name: str, estimator: str, n: int, notes: list[str]) -> Estimate:
    return Estimate(
        value=0.0, stderr=0.0, ci_low=0.0, ci_high=0.0, ci_level=math.nan,
        interval=f"exact: {name} is constant, so it shares no information", estimator=estimator,
        n_pairs=n, seconds=0.0, notes=(*notes, f"{name} is constant: I = 0 exactly, nothing was estimated"),
    )  # fmt: skip


def estimate(
    x: object,
    y: object,
    estimator: str | None = None,
    z: object | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    **settings: Any,
) -> Estimate:
    """I(X; Y) in nats (with ``z``: I(X; Y | Z)) from paired samples x (n, dx) and y (n, dy)
    (numpy arrays, tensors or nested lists; row i of each goes with row i of the others).

    estimator: a name of :data:`mitool.estimators.names` (default: the one for the data,
    :data:`mitool.estimators.DEFAULTS`); settings: its settings (``steps=500``, ``k=8``, ...);
    seed: its randomness (split, initial weights, subsets); ``progress(done, value)`` is called as a
    neural estimator trains. Raises ParameterError for bad input and DivergenceError when the
    estimate runs away.
    """
    x_rows, y_rows, z_rows = as_rows(x, y, z)
    name = estimator or estimators.DEFAULTS["continuous" if z_rows is None else "conditional"]
    chosen = estimators.get(name, **settings)
    notes: list[str] = []
    x_rows, dropped = _without_constant_columns("x", x_rows)
    notes += dropped
    y_rows, dropped = _without_constant_columns("y", y_rows)
    notes += dropped
    for side, rows in (("x", x_rows), ("y", y_rows)):
        if rows.shape[1] == 0:
            return _no_information(side, name, len(rows), notes)
    result = chosen.estimate(x_rows, y_rows, z_rows, seed=seed, progress=progress)
    return result.with_notes(*notes) if notes else result
