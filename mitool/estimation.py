"""The MI of your data in one call: ``estimate(x, y) -> Estimate``, no file I/O.

    import mitool
    result = mitool.estimate(x, y)               # x (n, dx), y (n, dy): row i of x goes with row i of y
    print(result)                                # the value, its interval, what was decided
    result.value, result.ci_low, result.ci_high, result.notes
    mitool.estimate(x, labels)                   # a discrete y (or string labels) is found as such
    mitool.estimate(x, y, z)                     # I(X; Y | Z)
    mitool.estimate(x, y, estimator="ksg", k=8)  # any estimator of mitool.estimators, with its settings

Before an estimator runs, the data are looked at, and what was decided is in ``result.notes``:

* a constant column carries no information and is left out (the MI is that of the other columns,
  exactly 0 when a side has no other column; a constant Z conditions on nothing);
* a variable is discrete when it holds labels (strings, categories), when ``discrete`` says so, or,
  with ``discrete="auto"``, when all its values are whole numbers and it takes at most
  max(2, sqrt(n)) distinct values (rows) in n pairs (:func:`is_discrete`); non-integer values
  declared discrete are an error;
* repeated values of a continuous variable are treated as ``ties`` says (:mod:`mitool.ties`): by
  default a point mass (a value far more frequent than its neighbours: zero inflation, a detection
  limit) is an atom, and every other repeated value (finite precision: float32, rounding,
  measurements to a few digits) is dequantised within the data's resolution, which leaves the MI
  unchanged;
* the kind of data (:data:`mitool.estimators.CASES`) follows: continuous; both discrete;
  continuous against discrete (the discrete side is made Y); continuous with atoms; conditional;
* with ``estimator`` None the estimator is the default for that kind
  (:data:`mitool.estimators.DEFAULTS`); an estimator given that does not take that kind of data is
  refused, naming those that do (except that atoms are then dequantised, with a note, for an
  estimator of continuous data);
* a discrete Z: I(X; Y | Z) = sum_z p(z) I(X; Y | Z = z), the MI within each group of Z estimated and
  weighted by the group's share (groups of fewer pairs than the estimator needs are left out, with a
  note); the interval combines the groups' standard errors;
* an estimate near its estimator's ceiling (InfoNCE's log(K + 1), KSG's psi(n) - psi(k):
  ``details["saturating"]``) is a lower bound, its interval open above; when the default chose that
  estimator, the pairs go to the uncapped :data:`UNCAPPED` estimator (normalizing flows to a joint
  Gaussian), whose estimate is reported where it agrees with the lower bound
  (:func:`beyond_the_ceiling`), and the lower bound, open above, where it does not or where it
  refuses the data;
* where the default's estimator is InfoNCE (:data:`THROUGH_THE_SCALE`), the MI between the two
  sides' scales, I(|X|; |Y|) <= I(X; Y), is estimated too, in one coordinate a side
  (:func:`scale_estimate`), and reported instead where it is higher (:func:`through_the_scale`):
  dependence through a shared scale (heavy tails, volatility, mixtures of scales) is what a critic
  learns slowest from few pairs;
* images (a side given as (n, H, W) or (n, C, H, W)) whose pixels lie near a surface of lower
  dimension (:func:`on_a_surface`) go to the flows, which encode such a side to the surface's
  dimension first (:mod:`mitool.estimators.encoding`); a table whose columns are nearly collinear
  does not (an encoder of its rows in their own units may lose the columns of small variance);
* a result that cannot be read at face value says so in its notes (:func:`trust_notes`): a
  negative estimate (MI is never negative), an interval of zero width, an interval wider than
  :data:`WIDE_INTERVAL` times the estimate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from mitool import checks, estimators
from mitool.estimators.base import (
    WIDE_INTERVAL,
    ArrayLike,
    DivergenceError,
    Estimate,
    Progress,
    holds_labels,
    image_note,
    one_by_one,
    rows_and_notes,
)
from mitool.estimators.rows import category_codes, distinct_rows
from mitool.ties import TIES_CHOICES, treat_ties
from mitool.trust import (
    THROUGH_THE_SCALE,
    at_least_zero,
    beyond_the_ceiling,
    bias_allowance_note,
    scale_estimate,
    through_the_scale,
    trust_notes,
)

__all__ = [
    "DefaultEstimator",
    "DivergenceError",
    "Estimate",
    "Prepared",
    "all_setting_names",
    "beyond_the_ceiling",
    "case_of",
    "estimate",
    "is_discrete",
    "on_a_surface",
    "prepare",
    "WIDE_INTERVAL",
    "trust_notes",
]

DISCRETE_CHOICES = ("auto", "none", "x", "y", "z", "both")
"""``discrete``: auto, none, or a comma-separated list of x, y, z ("both" is x,y)."""

LOW_DIMENSION = 3
"""Continuous X and Y of at most this many dimensions in all are estimated by k-NN (KSG's estimator
II on rank scores: ``DEFAULTS["low-dimension"]``), which is the more accurate there: on the 10 tasks
of bmi's benchmark of 1 + 1 and 2 + 1 dimensions it was within 0.04 nats of the truth on every one,
the neural estimate 0.19 nats under on one (docs/mi-benchmark.md)."""


CLASSIFIER_DIMENSION = 10
CLASSIFIER_PAIRS = 1000
"""A continuous X of more than :data:`CLASSIFIER_DIMENSION` dimensions against a discrete Y, in at
least this many pairs, is estimated by a held-out classifier: Ross's k-NN estimate falls with the
dimension (4 Gaussian classes, MI 0.634, n = 3000, 2 seeds: Ross -0.03 at 10 dimensions, -0.20 at
20, -0.36 at 40; the classifier -0.02, -0.06, -0.04; scikit-learn's digits, 64 pixels, n = 1797:
Ross 2.07, the classifier 2.15, a logistic regression's held-out bound 2.195), but the classifier
needs pairs to learn from (breast cancer, 30 features, n = 569: both 0.55; wine, 13 features,
n = 178: the classifier 0.11, Ross 0.94, the logistic bound 1.02)."""


UNCAPPED = "flow"
"""The estimator the default turns to when its estimate nears a ceiling (``details["saturating"]``:
InfoNCE's log(K + 1)): normalizing flows that make (X, Y) jointly Gaussian, whose estimate has no
ceiling (:mod:`mitool.estimators.flow`)."""


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


def _discrete_sides(
    discrete: str, parts: dict[str, np.ndarray | None], labelled: set[str]
) -> tuple[dict[str, bool], list[str]]:
    """Which of x, y, z are discrete (those in ``labelled``, which held labels, always), and the
    notes saying how that was decided."""
    declared = _declared(discrete)
    sides, notes = {}, []
    for name, rows in parts.items():
        if rows is None:
            continue
        if name in labelled:
            sides[name] = True
            notes.append(f"{name}: labels ({distinct_rows(rows)} distinct), discrete")
        elif declared is None:
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


def case_of(
    sides: dict[str, bool], x: np.ndarray, y: np.ndarray, conditional: bool, atoms: bool,
    images: frozenset[str] = frozenset(),
) -> str:  # fmt: skip
    """The kind of data (a key of :data:`mitool.estimators.CASES`); y is the discrete one of a
    continuous-discrete pair; ``atoms``: a continuous side has point masses (:mod:`mitool.ties`);
    ``images``: the sides given as images, (n, H, W) or (n, C, H, W)."""
    if conditional:
        return "conditional"
    if sides["x"] and sides["y"]:
        return "discrete"
    if atoms:
        return "ties"
    if sides["y"]:
        many = x.shape[1] > CLASSIFIER_DIMENSION and len(x) >= CLASSIFIER_PAIRS
        return "discrete-y-high-dimension" if many else "discrete-y"
    if x.shape[1] + y.shape[1] <= LOW_DIMENSION:
        return "low-dimension"
    given = [rows for name, rows in (("x", x), ("y", y)) if name in images]
    return "surface" if any(on_a_surface(rows) for rows in given) else "continuous"


def on_a_surface(rows: np.ndarray, most: int = 20_000) -> bool:
    """Whether the columns of ``rows`` (their first ``most`` rows) lie near a surface of lower
    dimension, as images do: :func:`mitool.estimators.rows.collinearity` below the flow
    estimator's :data:`~mitool.estimators.flow.COLLINEARITY`, which then encodes them."""
    from mitool.estimators.flow import COLLINEARITY
    from mitool.estimators.rows import collinearity

    return collinearity(rows[:most]) < COLLINEARITY


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
    estimator: str | None, case: str, settings: dict[str, Any], notes: list[str],
    defaults: Mapping[str, estimators.Default] | None = None, n: int = 0,
) -> estimators.Estimator:  # fmt: skip
    """The estimator asked for (refused when it does not take ``case``), or the default for it
    (``defaults``, :data:`mitool.estimators.DEFAULTS` when None; its settings for ``n`` pairs) with
    those of the given settings it has (the others, settings of other estimators, noted as unused)."""
    if estimator is None:
        default = (defaults or estimators.DEFAULTS)[case]
        name, known = default.name, estimators.estimator_class(default.name).Settings.names()
        unused = [key for key in settings if key not in known and key in all_setting_names()]
        for key in unused:  # a bad value is refused even where the estimator for the data has no use for it
            owner = next(
                other
                for other in estimators.names()
                if key in estimators.estimator_class(other).Settings.names()
            )
            estimators.estimator_class(owner).Settings(**{key: settings[key]})
        if unused:
            listed = ", ".join(unused)
            notes.append(f"{listed}: not settings of {name}, the estimator for this data, so unused")
        settings = {
            **default.settings_for(n),
            **{key: value for key, value in settings.items() if key not in unused},
        }
    else:
        name = estimator
    chosen = estimators.get(name, **settings)
    if case not in chosen.cases:
        takers = [other for other in estimators.names() if case in estimators.estimator_class(other).cases]
        raise checks.ParameterError(
            "estimator", f"{name!r} does not take {estimators.CASES[case]}, the data here; use one of "
            f"{', '.join(takers)}, or name the discrete variables with the {{=discrete}} option",
            ("discrete",),
        )  # fmt: skip
    return chosen


def all_setting_names() -> set[str]:
    """The names of every estimator's settings."""
    return {key for name in estimators.names() for key in estimators.estimator_class(name).Settings.names()}


@dataclass
class _Plan:
    """What :func:`estimate` will do with one data set: the rows (constant columns left out, the
    discrete side made Y, ties treated), the estimator, the notes so far; or the answer already
    (``done``)."""

    rows: tuple[np.ndarray, np.ndarray, np.ndarray | None]
    notes: list[str]
    chosen: estimators.Estimator | None = None
    done: Estimate | None = None
    sides: dict[str, bool] | None = None
    case: str | None = None

    @property
    def z_discrete(self) -> bool:
        """Z is given and discrete: the MI is estimated within each group of Z (no one estimator)."""
        return self.done is None and self.rows[2] is not None and bool(self.sides and self.sides.get("z"))


@dataclass(frozen=True)
class _Options:
    """The arguments of :func:`estimate` that say how, as opposed to which data."""

    estimator: str | None
    discrete: str
    ties: str
    seed: int
    settings: dict[str, Any]
    defaults: Mapping[str, estimators.Default] | None = None
    """The estimator for each kind of data when none is named (None: :data:`mitool.estimators.DEFAULTS`)."""
    missing: str = "drop"
    """What a missing value does (:data:`mitool.estimators.values.MISSING_CHOICES`)."""


def _plan(x: ArrayLike, y: ArrayLike, z: ArrayLike | None, options: _Options) -> _Plan:
    checks.choice("ties", options.ties, TIES_CHOICES)
    labelled = {
        name for name, data in (("x", x), ("y", y), ("z", z)) if data is not None and holds_labels(data)
    }
    (x_rows, y_rows, z_rows), notes = rows_and_notes(x, y, z, missing=options.missing)
    notes += [note for name, data in (("x", x), ("y", y), ("z", z)) if (note := image_note(name, data))]
    images = frozenset(name for name, data in (("x", x), ("y", y)) if image_note(name, data))
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
                done=_exactly_zero(side, options.estimator or "none", len(rows), notes),
            )
    sides, decided = _discrete_sides(options.discrete, {"x": x_rows, "y": y_rows, "z": z_rows}, labelled)
    notes += decided
    if z_rows is not None and sides["z"]:
        return _Plan((x_rows, y_rows, z_rows), notes, sides=sides)
    if sides["x"] and not sides["y"] and z_rows is None:  # the discrete side is y for the estimators
        x_rows, y_rows, sides = y_rows, x_rows, {"x": False, "y": True}
        notes.append("x is the discrete side: X and Y swapped (I is symmetric)")
    rows = {"x": x_rows, "y": y_rows, "z": z_rows}
    rows, atoms = _treated_ties(rows, sides, options, notes)
    case = case_of(sides, rows["x"], rows["y"], rows["z"] is not None, atoms, images)
    if case == "ties" and options.estimator is not None and options.ties == "auto":
        if case not in estimators.estimator_class(options.estimator).cases:  # it takes continuous data
            rows, atoms = _treated_ties(rows, sides, replace(options, ties="dequantise"), notes)
            notes.append(f"{options.estimator} takes no atoms: they were dequantised too (MI unchanged, "
                         "but k-NN estimators resolve such spikes badly; the estimator for atoms is "
                         "atoms)")  # fmt: skip
            case = case_of(sides, rows["x"], rows["y"], False, atoms, images)
    _refuse_too_wide(rows)
    route = case if options.estimator is not None else _case_for_the_pairs(case, rows, options, notes)
    default = (options.defaults or estimators.DEFAULTS)[route].name
    notes.append(f"{estimators.CASES[case]}: estimator {options.estimator or default}")
    chosen = _chosen(options.estimator, route, options.settings, notes, options.defaults, len(rows["x"]))
    return _Plan((rows["x"], rows["y"], rows["z"]), notes, chosen, sides=sides, case=route)


MATRIX_COPIES = 8
"""The (d x d) matrices of all the columns that an estimate holds at once, at most (covariances, their
square roots and inverses, eigenvectors: the Gaussian base and the flows' whitening); the memory it
needs is taken as 8 bytes times this many times d^2, with the data's own copies."""


def _refuse_too_wide(rows: dict[str, np.ndarray | None]) -> None:
    """A one-line refusal, before any work, of columns so many that their (d x d) matrices exceed
    the free memory (10 000 columns a side: about 8 GiB; it once ran past 280 s and 4.2 GB unasked)."""
    from mitool.runtime import refuse_beyond_memory

    dims = sum(part.shape[1] for part in rows.values() if part is not None)
    needed = 8.0 * (MATRIX_COPIES * dims**2 + 4 * len(rows["x"]) * dims)
    refuse_beyond_memory(
        "x", needed, f"an estimate on {dims} columns in all ({len(rows['x'])} rows)",
        "reduce the columns first (principal components, a feature selection, an encoder)",
    )  # fmt: skip


FEW_PAIRS_CASE = "low-dimension"
"""Where the default for continuous data (a trained critic) needs more pairs than a table has, the
default takes the estimator of this case (KSG's estimator II on rank scores, k by Lepski's rule),
which trains nothing and needs 20 pairs: a small table is estimated, with a note, not refused."""


def _case_for_the_pairs(
    case: str, rows: dict[str, np.ndarray | None], options: _Options, notes: list[str]
) -> str:
    """The case whose default estimator takes these many pairs: ``case``, or :data:`FEW_PAIRS_CASE`
    where the default of ``case`` trains a network and needs more pairs than there are."""
    defaults = options.defaults or estimators.DEFAULTS
    n, dims = len(rows["x"]), [part.shape[1] for part in rows.values() if part is not None]
    default = defaults[case]
    if case not in ("continuous", "surface") or FEW_PAIRS_CASE not in defaults:
        return case
    needed = estimators.get(default.name, **default.settings_for(n)).minimum_pairs(*dims)
    if n >= needed:
        return case
    notes.append(f"{n} pairs are too few for the default's {default.name} (at least {needed}): "
                 f"{defaults[FEW_PAIRS_CASE].name} instead, which trains nothing")  # fmt: skip
    return FEW_PAIRS_CASE


@dataclass(frozen=True)
class Prepared:
    """The data as :func:`estimate` hands them to its estimator (:func:`prepare`).

    x, y, z: the rows, float64 (n, d): constant columns left out, the discrete side of a
    continuous-discrete pair made y, the ties of continuous sides treated; z None when not given or
    constant. estimator: the estimator chosen, with its settings; None when a side is constant
    (``exact`` holds the answer, 0) and for a discrete Z (``estimate`` estimates within each group
    of Z). sides: which of x, y, z are discrete (None when a side is constant). notes: what was
    decided, in words."""

    x: np.ndarray
    y: np.ndarray
    z: np.ndarray | None
    estimator: estimators.Estimator | None
    sides: dict[str, bool] | None
    notes: tuple[str, ...]
    exact: Estimate | None = None

    @property
    def z_discrete(self) -> bool:
        """Z is given and discrete: the MI is estimated within each group of Z (``estimator`` None)."""
        return self.exact is None and self.z is not None and bool(self.sides and self.sides.get("z"))


def prepare(
    x: ArrayLike,
    y: ArrayLike,
    z: ArrayLike | None = None,
    *,
    estimator: str | None = None,
    discrete: str = "auto",
    ties: str = "auto",
    seed: int = 0,
    defaults: Mapping[str, estimators.Default] | None = None,
    missing: str = "drop",
    **settings: Any,
) -> Prepared:
    """What :func:`estimate` does before it estimates, as data: the rows it hands its estimator and
    the estimator it chooses (:class:`Prepared`), for code that computes on the same rows
    (:mod:`mitool.independence` recomputes the estimator's value on permuted rows). The arguments
    are :func:`estimate`'s; ``defaults`` replaces :data:`mitool.estimators.DEFAULTS`, the estimator
    for each kind of data when none is named.

    Examples
    --------
    >>> import numpy as np
    >>> from mitool.estimation import prepare
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 3, size=500)
    >>> prepared = prepare(labels, rng.normal(size=(500, 2)))  # the discrete side becomes y
    >>> prepared.estimator.name, prepared.x.shape, prepared.y.shape
    ('ross', (500, 2), (500, 1))
    """
    plan = _plan(x, y, z, _Options(estimator, discrete, ties, seed, settings, defaults, missing))
    return Prepared(*plan.rows, plan.chosen, plan.sides, tuple(plan.notes), plan.done)


def _atoms_unsupported(rows: dict[str, np.ndarray | None], sides: dict[str, bool], name: str) -> str:
    """Why the atoms of side ``name`` cannot go to the estimator for atoms (which takes one
    continuous column against another), or "" when they can."""
    if rows["z"] is not None:
        return "no conditional estimator takes atoms"
    if any(sides.values()):
        return "the other variable is discrete, and its estimator takes the atoms as tight clusters"
    if rows[name].shape[1] > 1:
        return "the estimator for atoms takes one column against another"
    if rows["x"].shape[1] + rows["y"].shape[1] > LOW_DIMENSION:
        return (
            f"the estimator for atoms is a k-NN estimate, which falls short of the MI beyond "
            f"{LOW_DIMENSION} dimensions in all, as the default for continuous data leaves k-NN there"
        )
    return ""


def _treated_ties(
    rows: dict[str, np.ndarray | None], sides: dict[str, bool], options: _Options, notes: list[str]
) -> tuple[dict[str, np.ndarray | None], bool]:
    """The rows with the ties of each continuous side treated as ``options.ties`` says (the notes
    added to ``notes``), and whether atoms remain. With ``auto``, atoms that the estimator for
    atoms cannot take (:func:`_atoms_unsupported`) are dequantised too, which keeps the MI."""
    rng = np.random.default_rng([options.seed, 0x7135])  # apart from the estimator's own streams
    treated, atoms = dict(rows), False
    for name, side_rows in rows.items():
        if side_rows is None or sides.get(name, False):
            continue
        result = treat_ties(name, side_rows, options.ties, rng)
        unsupported = _atoms_unsupported(rows, sides, name) if result.atoms else ""
        if unsupported and options.ties == "auto":
            result = treat_ties(name, side_rows, "dequantise", rng)
            notes.append(f"{name}: its point masses dequantised as well ({unsupported}; the MI is unchanged)")
        elif unsupported and rows["z"] is not None:
            raise checks.ParameterError(
                "ties", f"is {options.ties!r}, but {unsupported}; use ties='auto' or 'dequantise', or name "
                "the discrete variables with the {=discrete} option", ("discrete",),
            )  # fmt: skip
        treated[name], atoms = result.rows, atoms or result.atoms
        notes += result.notes
    return treated, atoms


def estimate(
    x: ArrayLike,
    y: ArrayLike,
    z: ArrayLike | None = None,
    *,
    estimator: str | None = None,
    discrete: str = "auto",
    ties: str = "auto",
    seed: int = 0,
    missing: str = "drop",
    progress: Progress | None = None,
    **settings: Any,
) -> Estimate:
    """The mutual information I(X; Y) in nats, or with ``z`` the conditional I(X; Y | Z), of your
    paired samples.

    Parameters
    ----------
    x, y : array_like, shape (n, dx) and (n, dy), or (n,)
        Row i of ``x`` goes with row i of ``y``: numpy arrays of any number type (float32 too),
        torch tensors, nested lists; labels (strings, categories) are discrete values.
    z : array_like, shape (n, dz), optional
        The variables to condition on.
    estimator : str, optional
        A name of :func:`mitool.estimators.names`; default: the one for the data (the module says
        how it is chosen, and the result's notes what was decided).
    discrete : str
        "auto", "none", or which of x, y, z are discrete: "y", "x,z", "both".
    ties : str
        How repeated values of continuous data are read (:data:`mitool.ties.TIES_CHOICES`): "auto"
        (point masses are atoms, finite precision is dequantised), "dequantise", "atoms", "refuse".
    seed : int
        The estimate's randomness (dequantisation, split, initial weights, subsets).
    missing : str
        "drop" (default): rows with a missing value (NaN, None, pandas' NA) in x, y or z are left
        out, with a note giving the count; "refuse": a missing value is an error naming its row.
    progress : callable, optional
        ``progress(done, total, value)``, called as the estimator goes.
    **settings
        The estimator's own settings (``steps=500``, ``k=8``, ...).

    Returns
    -------
    Estimate
        ``.value`` (also ``float(result)`` and ``format(result, ".3f")``), ``.ci_low``,
        ``.ci_high`` and what the interval covers, ``.notes``; ``print(result)`` says it in a
        sentence.

    Raises
    ------
    ParameterError
        Bad input, in one line naming the parameter and what is allowed.
    DivergenceError
        The estimate ran away (a neural bound that is not capped).

    Examples
    --------
    >>> import numpy as np, mitool
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=2000)
    >>> y = x + rng.normal(size=2000)            # I(X; Y) = log(2) / 2 = 0.347 nats
    >>> result = mitool.estimate(x, y)
    >>> f"{result:.1f}"
    '0.3'
    >>> bool(result.ci_low < 0.347 < result.ci_high)
    True
    """
    options = _Options(estimator, discrete, ties, seed, settings, missing=missing)
    return at_least_zero(_raw_estimate(x, y, z, options, progress))


def _raw_estimate(
    x: ArrayLike, y: ArrayLike, z: ArrayLike | None, options: _Options, progress: Progress | None
) -> Estimate:
    """:func:`estimate` before a value below 0 is reported as 0 (the groups of a discrete Z add
    their raw values: clipped ones would bias the sum upward)."""
    plan = _plan(x, y, z, options)
    if plan.done is not None:
        result = plan.done
    elif plan.z_discrete:
        result = _within_groups(*plan.rows, plan.sides, options, plan.notes)
        result = result.with_notes(*trust_notes(result))
    else:
        result = plan.chosen.estimate(*plan.rows, seed=options.seed, progress=progress)
        result = _finished(result, plan, options, progress)
    left_out = len(x) - len(plan.rows[0])  # rows with a missing value (the note says which)
    return result.with_notes(rows_left_out=left_out) if left_out else result


def _finished(result: Estimate, plan: _Plan, options: _Options, progress: Progress | None) -> Estimate:
    """The estimator's result with the plan's notes, past its ceiling when it saturates and the
    estimator was the default's choice (:func:`beyond_the_ceiling`), and the notes of trust."""
    if options.estimator is None and result.details.get("saturating"):
        try:
            uncapped = estimators.get(UNCAPPED).estimate(*plan.rows, seed=options.seed, progress=progress)
        except checks.ParameterError as refusal:
            result = result.with_notes(f"{UNCAPPED} (not capped) does not take these data: {refusal}; so the "
                                       "MI is known only to be at least this much")  # fmt: skip
        else:
            result = beyond_the_ceiling(result, uncapped)
    elif options.estimator is None and plan.case in THROUGH_THE_SCALE:
        result = through_the_scale(result, scale_estimate(*plan.rows[:2], seed=options.seed))
    if options.estimator is None:
        result = bias_allowance_note(result)
    result = result.with_notes(*plan.notes)
    return below_a_column(result.with_notes(*trust_notes(result)), plan)


def below_a_column(result: Estimate, plan: _Plan) -> Estimate:
    """The result, with a note and ``details["column_bound"]`` where the whole interval of an
    estimate of I(X; Y), X and Y continuous, lies below the Gaussian-copula lower bound of a single
    pair of columns (:func:`mitool.estimators.copula.copula_bound`): I(X; Y) >= I(x_j; y_l) by the
    chain rule, so the estimate falls short of the MI. An interval open above is below nothing."""
    from mitool.estimators.copula import copula_bound

    x, y, z = plan.rows
    if z is not None or plan.sides is None or plan.sides["x"] or plan.sides["y"]:
        return result
    if not math.isfinite(result.ci_high):
        return result
    bound, j, l = copula_bound(x, y)
    if not result.ci_high < bound:
        return result
    return result.with_notes(
        f"below a lower bound of the MI: column {j} of X and column {l} of Y alone have a Gaussian-copula MI "
        f"of at least {bound:.4f} nats (95% confidence; their rank normal scores' correlation), and I(X; Y) "
        "is at least the MI of any of its columns (the chain rule), so this estimate falls short; try "
        "another estimator, or those columns alone",
        column_bound=bound,
    )  # fmt: skip


class DefaultEstimator:
    """:func:`estimate` as an estimator object (the benchmark's ``default``): the estimator and the
    settings that the data call for; several data sets of one kind (a benchmark cell's seeds) go to
    the estimator's ``estimate_many`` together (a neural estimator trains them as one model)."""

    name = "default"

    def __init__(
        self, estimator: str | None = None, discrete: str = "auto", ties: str = "auto", **settings: Any
    ) -> None:
        self.estimator, self.discrete, self.ties, self.settings = estimator, discrete, ties, settings

    def _options(self, seed: int) -> _Options:
        return _Options(self.estimator, self.discrete, self.ties, seed, self.settings)

    def estimate(self, x: ArrayLike, y: ArrayLike, z: ArrayLike | None = None, seed: int = 0,
                 progress: Progress | None = None) -> Estimate:  # fmt: skip
        return estimate(
            x, y, z, estimator=self.estimator, discrete=self.discrete, ties=self.ties, seed=seed,
            progress=progress, **self.settings,
        )  # fmt: skip

    def estimate_many(
        self, datasets: list[tuple[ArrayLike, ...]], seeds: list[int], progress: Progress | None = None
    ) -> list[Estimate | DivergenceError]:
        plans = [_plan(*data, *(None,) * (3 - len(data)), self._options(seed))
                 for data, seed in zip(datasets, seeds, strict=True)]  # fmt: skip
        names = {plan.chosen.name if plan.chosen else None for plan in plans}
        shapes = {tuple(None if rows is None else rows.shape for rows in plan.rows) for plan in plans}
        if len(names) == 1 and None not in names and len(shapes) == 1:
            results = plans[0].chosen.estimate_many([plan.rows for plan in plans], seeds, progress)
            return [
                r if isinstance(r, Exception) else _finished(r, p, self._options(seed), progress)
                for r, p, seed in zip(results, plans, seeds, strict=True)
            ]
        return one_by_one(self.estimate, datasets, seeds)


def _within_groups(
    x: np.ndarray, y: np.ndarray, z: np.ndarray, sides: dict[str, bool], options: _Options, notes: list[str]
) -> Estimate:
    """I(X; Y | Z) for a discrete Z: the weighted MI within each group of Z (see the module)."""
    groups = category_codes(z)
    discrete = ",".join(name for name in ("x", "y") if sides[name]) or "none"
    within = replace(options, discrete=discrete)
    parts, skipped = [], []
    for group in range(int(groups.max()) + 1):
        rows = groups == group
        try:
            parts.append((rows.mean(), _raw_estimate(x[rows], y[rows], None, within, None)))
        except checks.TooFewSamples:
            skipped.append(int(rows.sum()))
    if not parts:
        raise checks.ParameterError("z", "has no group of Z with enough pairs for the estimator within it")
    weight = sum(share for share, _ in parts)
    value = sum(share * part.value for share, part in parts) / weight
    stderr = math.sqrt(sum((share * part.stderr) ** 2 for share, part in parts)) / weight
    level = parts[0][1].ci_level
    if skipped:
        notes.append(
            f"{len(skipped)} group(s) of Z with too few pairs ({', '.join(map(str, skipped))}) left out"
        )
    notes.append(f"z discrete: the MI within each of its {len(parts)} groups, weighted by their shares")
    return Estimate.from_stderr(
        value, stderr, level, interval="normal interval from the groups' standard errors",
        estimator=parts[0][1].estimator, n_pairs=len(x), seconds=sum(part.seconds for _, part in parts),
        notes=tuple(notes),
        details={"groups": [{"share": share, "value": part.value} for share, part in parts]},
    )  # fmt: skip
