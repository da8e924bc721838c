"""The MI of your data in one call: ``estimate(x, y) -> Estimate``, no file I/O.

    from mitool.estimate import estimate
    result = estimate(x, y)                      # x (n, dx), y (n, dy): row i of x goes with row i of y
    print(result.value, result.ci_low, result.ci_high, result.notes)
    estimate(x, labels)                          # a discrete y is found and estimated as such
    estimate(x, y, z=z)                          # I(X; Y | Z)
    estimate(x, y, "ksg", k=8)                   # any estimator of mitool.estimators, with its settings

Before an estimator runs, the data are looked at, and what was decided is in ``result.notes``:

* a constant column carries no information and is left out (the MI is that of the other columns,
  exactly 0 when a side has no other column; a constant Z conditions on nothing);
* a variable is discrete when ``discrete`` says so, or, with ``discrete="auto"``, when all its
  values are whole numbers and it takes at most max(2, sqrt(n)) distinct values (rows) in n pairs
  (:func:`is_discrete`); non-integer values declared discrete are an error;
* the kind of data (:data:`mitool.estimators.CASES`) follows: continuous; both discrete;
  continuous against discrete (the discrete side is made Y); continuous with ties (more than 1%
  of the rows of X or of Y repeat another's value: counts, zero inflation); conditional;
* with ``estimator`` None the estimator is the default for that kind
  (:data:`mitool.estimators.DEFAULTS`); an estimator given that does not take that kind of data is
  refused, naming those that do;
* a discrete Z: I(X; Y | Z) = sum_z p(z) I(X; Y | Z = z), the MI within each group of Z estimated and
  weighted by the group's share (groups of fewer pairs than the estimator needs are left out, with a
  note); the interval combines the groups' standard errors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from mitool import checks, estimators
from mitool.estimators.base import DivergenceError, Estimate, Progress, as_rows, normal_interval, one_by_one
from mitool.estimators.subsets import distinct_rows, tied_rows

__all__ = [
    "Automatic",
    "DivergenceError",
    "Estimate",
    "all_setting_names",
    "case_of",
    "estimate",
    "is_discrete",
]

DISCRETE_CHOICES = ("auto", "none", "x", "y", "z", "both")
"""``discrete``: auto, none, or a comma-separated list of x, y, z ("both" is x,y)."""

TIED_SHARE = 0.01
"""Continuous data whose X or Y repeats values in more than this share of the rows have ties."""

LOW_DIMENSION = 3
"""Continuous X and Y of at most this many dimensions in all are estimated by k-NN (KSG on rank
scores), which is the more accurate there: on the 10 tasks of bmi's benchmark of 1 + 1 and 2 + 1
dimensions it was within 0.04 nats of the truth on every one, the neural estimate 0.19 nats under
on one (docs/mi-benchmark.md)."""


def is_discrete(rows: np.ndarray) -> bool:
    """Whole numbers with at most max(2, floor(sqrt(n))) distinct rows: the ``auto`` rule."""
    if not np.all(rows == np.round(rows)):
        return False
    return distinct_rows(rows) <= max(2, math.isqrt(len(rows)))


def _declared(discrete: str) -> set[str] | None:
    """The variables declared discrete (None for auto)."""
    chosen = [item.strip() for item in str(discrete).split(",") if item.strip()]
    for item in chosen:
        checks.choice("discrete", item, DISCRETE_CHOICES)
    if chosen == ["auto"]:
        return None
    named = {"x", "y"} if "both" in chosen else set(chosen) - {"none"}
    return named


def _discrete_sides(discrete: str, parts: dict[str, np.ndarray | None]) -> tuple[dict[str, bool], list[str]]:
    """Which of x, y, z are discrete, and the notes saying how that was decided."""
    declared = _declared(discrete)
    sides, notes = {}, []
    for name, rows in parts.items():
        if rows is None:
            continue
        if declared is None:
            sides[name] = is_discrete(rows)
            distinct = distinct_rows(rows)
            kind = "discrete" if sides[name] else "continuous"
            notes.append(f"{name}: {kind} ({distinct} distinct values in {len(rows)} rows, by the auto rule)")
        else:
            sides[name] = name in declared
            if sides[name] and not np.all(rows == np.round(rows)):
                row = int(np.argwhere(rows != np.round(rows))[0][0])
                raise checks.ParameterError(
                    "discrete",
                    f"declares {name} discrete, but {name} holds non-integer values (first in row {row})",
                )
    return sides, notes


def case_of(sides: dict[str, bool], x: np.ndarray, y: np.ndarray, conditional: bool) -> str:
    """The kind of data (a key of :data:`mitool.estimators.CASES`); y is the discrete one of a
    continuous-discrete pair."""
    if conditional:
        return "conditional"
    if sides["x"] and sides["y"]:
        return "discrete"
    continuous = [rows for rows, discrete in ((x, sides["x"]), (y, sides["y"])) if not discrete]
    if any(tied_rows(rows) > TIED_SHARE * len(rows) for rows in continuous):
        return "ties"
    if sides["y"]:
        return "discrete-y"
    return "low-dimension" if x.shape[1] + y.shape[1] <= LOW_DIMENSION else "continuous"


def _without_constant_columns(name: str, rows: np.ndarray) -> tuple[np.ndarray, list[str]]:
    constant = np.flatnonzero(np.ptp(rows, axis=0) == 0)
    if not len(constant):
        return rows, []
    listed = ", ".join(str(column) for column in constant)
    return np.delete(rows, constant, axis=1), [
        f"{name}: column(s) {listed} are constant (no information), left out"
    ]


def _exactly_zero(name: str, estimator: str, n: int, notes: list[str]) -> Estimate:
    return Estimate(
        value=0.0, stderr=0.0, ci_low=0.0, ci_high=0.0, ci_level=math.nan,
        interval=f"exact: {name} is constant, so it shares no information", estimator=estimator,
        n_pairs=n, seconds=0.0, notes=(*notes, f"{name} is constant: I = 0 exactly, nothing was estimated"),
    )  # fmt: skip


def _chosen(
    estimator: str | None, case: str, settings: dict[str, Any], notes: list[str]
) -> estimators.Estimator:
    """The estimator asked for (refused when it does not take ``case``), or the default for it with
    those of the given settings it has (the others, settings of other estimators, noted as unused)."""
    if estimator is None:
        default = estimators.DEFAULTS[case]
        name, known = default.name, estimators.estimator_class(default.name).Settings.names()
        unused = [key for key in settings if key not in known and key in all_setting_names()]
        if unused:
            listed = ", ".join(unused)
            notes.append(f"{listed}: not settings of {name}, the estimator for this data, so unused")
        settings = {
            **default.settings,
            **{key: value for key, value in settings.items() if key not in unused},
        }
    else:
        name = estimator
    chosen = estimators.get(name, **settings)
    if case not in chosen.cases:
        takers = [other for other in estimators.names() if case in estimators.estimator_class(other).cases]
        raise checks.ParameterError(
            "estimator", f"{name!r} does not take {estimators.CASES[case]}, the data here; use one of "
            f"{', '.join(takers)}, or say which variables are discrete with {{=discrete}}", ("discrete",),
        )  # fmt: skip
    return chosen


def all_setting_names() -> set[str]:
    """The names of every estimator's settings."""
    return {key for name in estimators.names() for key in estimators.estimator_class(name).Settings.names()}


@dataclass
class _Plan:
    """What :func:`estimate` will do with one data set: the rows (constant columns left out, the
    discrete side made Y), the estimator, the notes so far; or the answer already (``done``)."""

    rows: tuple[np.ndarray, np.ndarray, np.ndarray | None]
    notes: list[str]
    chosen: estimators.Estimator | None = None
    done: Estimate | None = None
    sides: dict[str, bool] | None = None


def _plan(
    x: object, y: object, z: object | None, estimator: str | None, discrete: str, settings: dict
) -> _Plan:
    x_rows, y_rows, z_rows = as_rows(x, y, z)
    notes: list[str] = []
    x_rows, dropped_x = _without_constant_columns("x", x_rows)
    y_rows, dropped_y = _without_constant_columns("y", y_rows)
    notes += dropped_x + dropped_y
    if z_rows is not None:
        z_rows, dropped_z = _without_constant_columns("z", z_rows)
        notes += dropped_z
        if z_rows.shape[1] == 0:
            notes.append("z is constant: I(X; Y | Z) = I(X; Y)")
            z_rows = None
    for side, rows in (("x", x_rows), ("y", y_rows)):
        if rows.shape[1] == 0:
            return _Plan(
                (x_rows, y_rows, z_rows),
                notes,
                done=_exactly_zero(side, estimator or "none", len(rows), notes),
            )
    sides, decided = _discrete_sides(discrete, {"x": x_rows, "y": y_rows, "z": z_rows})
    notes += decided
    if z_rows is not None and sides["z"]:
        return _Plan((x_rows, y_rows, z_rows), notes, sides=sides)
    if sides["x"] and not sides["y"] and z_rows is None:  # the discrete side is y for the estimators
        x_rows, y_rows, sides = y_rows, x_rows, {"x": False, "y": True}
        notes.append("x is the discrete side: X and Y swapped (I is symmetric)")
    case = case_of(sides, x_rows, y_rows, z_rows is not None)
    notes.append(f"{estimators.CASES[case]}: estimator {estimator or estimators.DEFAULTS[case].name}")
    chosen = _chosen(estimator, case, settings, notes)
    return _Plan((x_rows, y_rows, z_rows), notes, chosen, sides=sides)


def estimate(
    x: object,
    y: object,
    estimator: str | None = None,
    z: object | None = None,
    discrete: str = "auto",
    seed: int = 0,
    progress: Progress | None = None,
    **settings: Any,
) -> Estimate:
    """I(X; Y) in nats (with ``z``: I(X; Y | Z)) from paired samples x (n, dx) and y (n, dy)
    (numpy arrays, tensors or nested lists; row i of each goes with row i of the others).

    estimator: a name of :func:`mitool.estimators.names` (default: the one for the data, see the
    module); discrete: "auto", "none", or which of x, y, z are discrete ("y", "x,z", "both");
    settings: the estimator's own (``steps=500``, ``k=8``, ...); seed: its randomness (split,
    initial weights, subsets); ``progress(done, total, value)`` is called as the estimator goes.
    Raises ParameterError for bad input and DivergenceError when the estimate runs away.
    """
    plan = _plan(x, y, z, estimator, discrete, settings)
    if plan.done is not None:
        return plan.done
    if plan.chosen is None:
        return _within_groups(*plan.rows, estimator, plan.sides, seed, settings, plan.notes)
    return plan.chosen.estimate(*plan.rows, seed=seed, progress=progress).with_notes(*plan.notes)


class Automatic:
    """:func:`estimate` as an estimator object (the benchmark's ``default``): the estimator and the
    settings that the data call for; several data sets of one kind (a benchmark cell's seeds) go to
    the estimator's ``estimate_many`` together (a neural estimator trains them as one model)."""

    name = "default"

    def __init__(self, estimator: str | None = None, discrete: str = "auto", **settings: Any) -> None:
        self.estimator, self.discrete, self.settings = estimator, discrete, settings

    def estimate(self, x: object, y: object, z: object | None = None, seed: int = 0,
                 progress: Progress | None = None) -> Estimate:  # fmt: skip
        return estimate(x, y, self.estimator, z, self.discrete, seed, progress, **self.settings)

    def estimate_many(
        self, datasets: list[tuple[object, ...]], seeds: list[int], progress: Progress | None = None
    ) -> list[Estimate | DivergenceError]:
        plans = [_plan(*data, *(None,) * (3 - len(data)), self.estimator, self.discrete, self.settings)
                 for data in datasets]  # fmt: skip
        names = {plan.chosen.name if plan.chosen else None for plan in plans}
        shapes = {tuple(None if rows is None else rows.shape for rows in plan.rows) for plan in plans}
        if len(names) == 1 and None not in names and len(shapes) == 1:
            results = plans[0].chosen.estimate_many([plan.rows for plan in plans], seeds, progress)
            return [
                r if isinstance(r, Exception) else r.with_notes(*p.notes)
                for r, p in zip(results, plans, strict=True)
            ]
        return one_by_one(self.estimate, datasets, seeds)


def _within_groups(
    x: np.ndarray, y: np.ndarray, z: np.ndarray, estimator: str | None, sides: dict[str, bool], seed: int,
    settings: dict[str, Any], notes: list[str],
) -> Estimate:  # fmt: skip
    """I(X; Y | Z) for a discrete Z: the weighted MI within each group of Z (see the module)."""
    from mitool.estimators.discrete import category_codes

    groups = category_codes(z)
    discrete = ",".join(name for name in ("x", "y") if sides[name]) or "none"
    parts, skipped = [], []
    for group in range(int(groups.max()) + 1):
        rows = groups == group
        try:
            parts.append(
                (rows.mean(), estimate(x[rows], y[rows], estimator, discrete=discrete, seed=seed, **settings))
            )
        except checks.ParameterError as error:
            if "too few samples" not in str(error):
                raise
            skipped.append(int(rows.sum()))
    if not parts:
        raise checks.ParameterError("z", "has no group of Z with enough pairs for the estimator within it")
    weight = sum(share for share, _ in parts)
    value = sum(share * part.value for share, part in parts) / weight
    stderr = math.sqrt(sum((share * part.stderr) ** 2 for share, part in parts)) / weight
    level = parts[0][1].ci_level
    low, high = normal_interval(value, stderr, level)
    if skipped:
        notes.append(
            f"{len(skipped)} group(s) of Z with too few pairs ({', '.join(map(str, skipped))}) left out"
        )
    notes.append(f"z discrete: the MI within each of its {len(parts)} groups, weighted by their shares")
    return Estimate(
        value=value, stderr=stderr, ci_low=low, ci_high=high, ci_level=level,
        interval="normal interval from the groups' standard errors", estimator=parts[0][1].estimator,
        n_pairs=len(x), seconds=sum(part.seconds for _, part in parts), notes=tuple(notes),
        details={"groups": [{"share": share, "value": part.value} for share, part in parts]},
    )  # fmt: skip
