"""The estimator protocol: an estimator of mitool is an object with

    estimate(x, y, z=None, seed=0, progress=None) -> Estimate

built from its settings (``KSG(k=5)``, ``get("ksg", k=5)``), which are a dataclass holding every
default and check in one place (:class:`EstimatorSettings`; a setting that several estimators have
is declared once: the interval's level by :func:`level_setting`, the training fields in
:class:`TrainingSettings`). Each estimator says what data it takes (:attr:`Estimator.cases`:
continuous pairs, discrete ones, discrete against continuous, pairs with ties, conditional on z)
and the fewest pairs it needs (:meth:`Estimator.minimum_pairs`). An :class:`Estimate` holds what
every estimator gives (the value, its interval and what the interval covers, the pairs, the time,
notes) and the estimator's own ``details``; ``float(result)`` is the value, so code written for
bmi's ``estimate(x, y) -> float`` can call it. An estimator makes its result with
:meth:`Estimate.from_stderr` and does not time itself: :meth:`Estimator.estimate` sets ``seconds``.

The registry of every estimator by name is :mod:`mitool.estimators`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar, Union

import numpy as np

from mitool import checks
from mitool.estimators.values import complete_rows, is_missing, safe_scale
from mitool.settings import Settings, setting, with_parameters

__all__ = [
    "CASES",
    "ArrayLike",
    "DivergenceError",
    "Estimate",
    "Estimator",
    "EstimatorSettings",
    "Progress",
    "TrainingSettings",
    "WIDE_INTERVAL",
    "as_rows",
    "holds_labels",
    "label_columns",
    "level_setting",
    "mean_and_stderr",
    "normal_interval",
    "one_by_one",
    "rows_and_notes",
    "setting",
    "satterthwaite",
    "standard_errors_above_zero",
    "student_interval",
]

CASES: dict[str, str] = {
    "continuous": "X and Y continuous",
    "low-dimension": "X and Y continuous, 3 dimensions or fewer in all",
    "surface": "X and Y continuous, a side given as images whose pixels lie near a lower-dimensional surface",
    "discrete": "X and Y discrete (class labels, counts with few values)",
    "discrete-y": "X continuous, Y discrete (features against class labels)",
    "discrete-y-high-dimension": "X continuous of more than 10 dimensions, Y discrete, 1000 pairs or more",
    "ties": "continuous data with atoms (point masses: zero inflation, a detection limit, repeated rows)",
    "conditional": "I(X; Y | Z), continuous X, Y and Z",
    "conditional-discrete-z": "I(X; Y | Z) with a discrete Z",
}
"""The kinds of data an estimator may take (:attr:`Estimator.cases`)."""

ArrayLike = Union[np.ndarray, Sequence[Any], "torch.Tensor"]  # noqa: F821 (torch is not imported here)
"""What the estimators take as x, y and z: a numpy array, a torch tensor or nested lists, (n, d) or
(n,); numbers of any type, or labels (strings, categories: discrete values)."""

Progress = Callable[[int, int, float], None]
"""``progress(done, total, latest value)``: the steps done of ``total`` (training steps, or stages
of a long computation), called by estimators as they go; the value is NaN where there is none."""


class DivergenceError(ValueError):
    """An estimate that ran away (not finite, or beyond any sensible value); the message names the
    cause and what to use instead."""


@dataclass(frozen=True)
class EstimatorSettings(Settings):
    """Base of every estimator's settings (:class:`mitool.settings.Settings`): frozen, each field
    made by :func:`~mitool.settings.setting`, each value checked when made."""


def level_setting() -> Any:
    """The confidence level of the interval, as every estimator's settings declare it."""
    return setting(0.95, "Confidence level of the interval.", checks.fraction)


_whole = partial(checks.whole_number, minimum=1)


@dataclass(frozen=True)
class TrainingSettings(Settings):
    """The settings that the estimators which train a network on part of the pairs and score it on
    the others have (the neural estimators, the classifier): the split, the optimiser, early
    stopping, the interval's chunks. Declared here once; each estimator's settings list them with
    :meth:`~mitool.settings.Settings.shared`, in their own order, with their own defaults where
    they differ (the network's size and device: :class:`mitool.critics.NetworkSettings`)."""

    steps: int = setting(2000, "Most training steps.", _whole)
    lr: float = setting(5e-4, "AdamW's learning rate.", checks.positive)
    weight_decay: float = setting(0.0, "AdamW's weight decay.", partial(checks.number, minimum=0.0))
    test_fraction: float = setting(0.2, "Share of the pairs held out for the estimate.", checks.fraction)
    validation_fraction: float = setting(
        0.15,
        "Share of the training pairs scored for early stopping, at most 16384 pairs (the network is kept "
        "at its best value).",
        checks.fraction,
    )  # fmt: skip
    eval_every: int = setting(50, "Steps between validation scores.", _whole)
    patience: int = setting(10, "Stop after this many validation scores without improvement.", _whole)
    max_seconds: float = setting(
        math.inf,
        "Training ends at the first validation score after this many seconds, the best network so far "
        "kept (inf: no limit; the result says when the budget, not the held-out value, ended it).",
        checks.positive_or_unlimited,
    )  # fmt: skip
    chunk: int = setting(50, "Held-out pairs (anchors) per value of the interval.", _whole)


WIDE_INTERVAL = 2.0
"""An interval wider than this many times the estimate, and than 1 nat, says more than the estimate
does (:meth:`Estimate.interval_too_wide`). Where the default once chose z-scores on noise, the
highmi suite's Student-t 20 x 20 of 10 nats gave 1.36 [-4.67, 7.38]: the critics disagreed across
the test pairs."""


def interval_text(low: float, high: float, digits: int = 3) -> str:
    """ "[low, high]", or "[low, inf)" for an interval open above (a lower bound near a ceiling)."""
    upper = "inf)" if math.isinf(high) and high > 0 else f"{high:.{digits}f}]"
    return f"[{low:.{digits}f}, {upper}"


@dataclass(frozen=True, repr=False)
class Estimate:
    """An estimate of I(X; Y) (or I(X; Y | Z)) in nats.

    value: the estimate (``float(result)`` is the same). stderr: its standard error. ci_low,
    ci_high: the confidence interval at ``ci_level``; ``interval`` says how both were made and what
    they cover. estimator: the estimator's name. n_pairs: the pairs given. seconds: wall time (of
    :meth:`Estimator.estimate`, which sets it).
    notes: what the estimator decided or noticed, in words (a constant column, the case it took,
    the ceiling it sits at). details: what only this estimator has (a neural one: the critic, the
    pairs that trained it, its step, its ceiling; KSG: k), as plain values.
    """

    value: float
    stderr: float
    ci_low: float
    ci_high: float
    ci_level: float
    interval: str
    estimator: str
    n_pairs: int
    seconds: float
    notes: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_stderr(
        cls,
        value: float,
        stderr: float,
        level: float,
        degrees: float = math.inf,
        *,
        interval: str,
        estimator: str,
        n_pairs: int,
        seconds: float = 0.0,
        notes: tuple[str, ...] = (),
        details: Mapping[str, Any] | None = None,
    ) -> Estimate:
        """The estimate ``value`` with its standard error and the interval value +- q stderr at
        ``level`` (:func:`normal_interval`: q of Student's t with ``degrees`` degrees of freedom,
        the normal's when infinite; NaN where ``stderr`` is). ``seconds``: 0 for an estimator's
        result, which :meth:`Estimator.estimate` times."""
        low, high = normal_interval(value, stderr, level, degrees)
        return cls(
            value=value, stderr=stderr, ci_low=low, ci_high=high, ci_level=level, interval=interval,
            estimator=estimator, n_pairs=n_pairs, seconds=seconds, notes=tuple(notes),
            details=dict(details or {}),
        )  # fmt: skip

    def __float__(self) -> float:
        return float(self.value)

    def __format__(self, spec: str) -> str:
        """``format(result, ".3f")``: the value formatted (``f"{result:.3f}"``)."""
        return format(self.value, spec)

    def __repr__(self) -> str:
        return (f"Estimate(value={self.value:.4g}, ci=[{self.ci_low:.4g}, {self.ci_high:.4g}], "
                f"estimator={self.estimator!r}, n_pairs={self.n_pairs})")  # fmt: skip

    def __str__(self) -> str:
        """The estimate in one line (what ``mitool estimate`` prints): :meth:`summary`."""
        return self.summary()

    def _head(self) -> str:
        level = f"{100 * self.ci_level:g}%" if math.isfinite(self.ci_level) else "exact"
        conditional = any(note.startswith(("z ", "z:")) for note in self.notes)
        quantity = "I(X; Y | Z)" if conditional else "I(X; Y)"
        interval = interval_text(self.ci_low, self.ci_high, 4)
        if math.isinf(self.ci_high):
            return (f"{quantity} is at least {self.value:.4f} nats (a lower bound; +- {self.stderr:.4f}), "
                    f"{level} interval {interval}")  # fmt: skip
        return f"{quantity} = {self.value:.4f} +- {self.stderr:.4f} nats, {level} interval {interval}"

    def summary(self) -> str:
        """One line: the value, its interval, the estimator and pairs, and in a few words what must
        be read with it (a value below 0 reported as 0, rows left out, an estimate below one
        column's MI, a wide interval); :meth:`explain` says all of it."""
        details, flags = self.details, []
        if "raw_value" in details:
            flags.append(f"raw {details['raw_value']:.4f} reported as 0")
        if "rows_left_out" in details:
            given = self.n_pairs + details["rows_left_out"]
            flags.append(f"{details['rows_left_out']} of {given} rows left out (missing values)")
        if "column_bound" in details:
            flags.append("below one column's MI")
        if self.interval_too_wide():
            flags.append("a wide interval")
        if "capped" in details:
            flags.append(f"past a capped estimate of {details['capped']:.4f}")
        extra = "".join(f"; {flag}" for flag in flags)
        return f"{self._head()} ({self.estimator} on {self.n_pairs} pairs{extra})."

    def interval_too_wide(self) -> bool:
        """Whether the interval is wider than :data:`WIDE_INTERVAL` times the estimate and than 1 nat."""
        width = self.ci_high - self.ci_low
        return math.isfinite(width) and width > max(1.0, WIDE_INTERVAL * abs(self.value))

    def explain(self) -> str:
        """The estimate as a paragraph (``mitool estimate --explain``): the value, its standard
        error and interval and what they cover, what was trained and evaluated, and the notes."""
        head = self._head()
        details = self.details
        if "critic" in details:
            evaluator = details["evaluator"]
            scored = "" if evaluator == self.estimator else f", scored with {evaluator}"
            extrapolated = (
                ", the value carried to infinitely many negatives (extrapolate_negatives)"
                if details.get("negatives_extrapolated")
                else ""
            )
            what = (
                f"({self.estimator}, {details['critic']} critic{scored}; trained on "
                f"{details['n_fit'] + details['n_validation']} pairs, kept at step {details['best_step']} of "
                f"{details['steps']}; evaluated on {details['n_test']} held-out pairs, "
                f"K = {details['negatives_test']}{extrapolated})"
            )
        else:
            what = f"({self.estimator} on all {self.n_pairs} pairs)"
        text = f"{head} {what}. The +- and the interval: {self.interval}."
        for note in self.notes:
            text += f" {note[0].upper()}{note[1:]}."
        return text

    def as_dict(self) -> dict[str, Any]:
        """Every field; the value also under ``estimate`` (the name older JSON used); the one line
        under ``summary``."""
        values = dataclasses.asdict(self)
        values["notes"] = list(self.notes)
        values["details"] = dict(self.details)
        return {"value": self.value, "estimate": self.value, **values, "summary": self.summary()}

    def as_lower_bound(self, why: str) -> Estimate:
        """A copy whose interval is open above (``ci_high`` = inf): the value is a lower bound of
        the MI, which may be far larger, for the reason ``why`` (added to what the interval covers)."""
        return dataclasses.replace(
            self,
            ci_high=math.inf,
            interval=f"{self.interval}; open above, as the value is a lower bound: {why}",
        )

    def with_notes(self, *notes: str, **details: Any) -> Estimate:
        """A copy with ``notes`` added and ``details`` updated."""
        return dataclasses.replace(self, notes=(*self.notes, *notes), details={**self.details, **details})


class Estimator:
    """Base of mitool's estimators. A subclass sets the class attributes and implements
    :meth:`_estimate`; ``Estimator(**settings)`` checks the settings (ParameterError naming an
    unknown one and the estimator's own).

    name: the registry's name. summary: one line. value_is: what the value is (a bound or an
    estimate, its ceiling), to follow "its value is". cases: the keys of :data:`CASES` it takes.
    Settings: its settings dataclass. A subclass's docstring gets the Parameters section of its
    Settings before its Examples (:func:`mitool.settings.with_parameters`): the settings are
    described where they are declared, once.

    Examples
    --------
    >>> import numpy as np
    >>> from mitool import estimators
    >>> estimator = estimators.get("gaussian", subsets=5)      # an Estimator, by name
    >>> estimator.name, estimator.settings.subsets, "continuous" in estimator.cases
    ('gaussian', 5, True)
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    value_is: ClassVar[str]
    cases: ClassVar[frozenset[str]] = frozenset({"continuous", "surface"})
    Settings: ClassVar[type[EstimatorSettings]] = EstimatorSettings
    rank: ClassVar[int] = 50
    """The estimator's place in listings, lower first (the registry's order: ``mitool estimate
    --help``, :func:`mitool.estimators.names`). Only an order: not a measure of quality, and
    unrelated to rank scores (``normalise="rank"``) and to a process's rank under torchrun."""
    trains_together: ClassVar[bool] = False
    """Whether :meth:`estimate_many` hands the data sets to :meth:`_estimate_many` together (the
    neural estimators train their critics as one model); otherwise it estimates them one by one."""

    def __init_subclass__(cls, **options: Any) -> None:
        super().__init_subclass__(**options)
        if cls.__doc__ and "    Parameters\n" not in cls.__doc__:
            cls.__doc__ = with_parameters(cls.__doc__, cls.Settings)

    def __init__(self, **settings: object) -> None:
        known = self.Settings.names()
        for key in settings:
            if key not in known:
                raise checks.ParameterError(
                    key, f"is not a setting of {self.name} (its settings: {{listed}})", known
                )
        self.settings = self.Settings(**settings)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.settings})"

    def minimum_pairs(self, dim_x: int, dim_y: int, dim_z: int = 0) -> int:
        """The fewest pairs this estimator can work with at these dimensions."""
        return 2

    def estimate(
        self, x: object, y: object, z: object | None = None, seed: int = 0, progress: Progress | None = None
    ) -> Estimate:
        """The estimate of I(X; Y), or I(X; Y | Z), in nats from paired rows.

        Parameters
        ----------
        x, y : array_like, shape (n, dx) and (n, dy), or (n,)
            Numpy arrays, tensors or lists (1-D: one column), row i of each belonging together.
        z : array_like, shape (n, dz), optional
            The variables to condition on (the estimators whose :attr:`cases` hold "conditional").
        seed : int
            The estimate's randomness (split, initial weights, subsets).
        progress : callable, optional
            ``progress(done, total, value)``, called as the estimator goes.

        Returns
        -------
        Estimate
            The value, its standard error and interval, what the interval covers, the time
            (``seconds``) and the estimator's ``details``.

        Examples
        --------
        >>> import numpy as np
        >>> from mitool import estimators
        >>> x, noise = np.random.default_rng(3).normal(size=(2, 1000))
        >>> result = estimators.get("gaussian").estimate(x, noise - x)       # I = log(2) / 2 = 0.35 nats
        >>> bool(result.ci_low < 0.35 < result.ci_high), result.n_pairs
        (True, 1000)
        """
        rows = as_rows(x, y, z)
        self._check_size(rows)
        start = time.perf_counter()
        result = self._estimate(*rows, seed=seed, progress=progress)
        return dataclasses.replace(result, seconds=time.perf_counter() - start)

    def estimate_many(
        self, datasets: Sequence[tuple[object, ...]], seeds: Sequence[int], progress: Progress | None = None
    ) -> list[Estimate | DivergenceError]:
        """:meth:`estimate` of several data sets (a benchmark cell's seeds); an estimate that ran
        away gives its DivergenceError in its place. An estimator that :attr:`trains_together`
        takes data sets of one shape at once; each estimate's ``seconds`` is then the time of all."""
        if not self.trains_together:
            return one_by_one(self.estimate, datasets, seeds)
        rows = [as_rows(*data) for data in datasets]
        shapes = {tuple(None if part is None else part.shape for part in parts) for parts in rows}
        if not rows or len(shapes) != 1 or len(seeds) != len(rows):
            raise checks.ParameterError(
                "datasets", "must be one or more (x, y) of one shape, with one seed each"
            )
        self._check_size(rows[0])
        start = time.perf_counter()
        results = self._estimate_many(rows, list(seeds), progress)
        seconds = time.perf_counter() - start
        return [
            result if isinstance(result, DivergenceError) else dataclasses.replace(result, seconds=seconds)
            for result in results
        ]

    def _check_size(self, rows: tuple[np.ndarray, ...]) -> None:
        dims = [part.shape[1] for part in rows if part is not None]
        needed = self.minimum_pairs(*dims)
        if len(rows[0]) < needed:
            raise checks.TooFewSamples(
                "x", f"has too few samples ({len(rows[0])}; {self.name} needs at least {needed})"
            )

    def _estimate(
        self, x: np.ndarray, y: np.ndarray, z: np.ndarray | None, seed: int, progress: Progress | None
    ) -> Estimate:
        raise NotImplementedError

    def _estimate_many(
        self, rows: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]], seeds: list[int],
        progress: Progress | None,
    ) -> list[Estimate | DivergenceError]:  # fmt: skip
        """The estimates of data sets of one shape at once (an estimator that :attr:`trains_together`)."""
        raise NotImplementedError


def one_by_one(
    estimate: Callable[..., Estimate], datasets: Sequence[tuple[object, ...]], seeds: Sequence[int]
) -> list[Estimate | DivergenceError]:
    """``estimate(*data, seed=seed)`` of each data set, a DivergenceError in the place of one that
    ran away."""
    results: list[Estimate | DivergenceError] = []
    for data, seed in zip(datasets, seeds, strict=True):
        try:
            results.append(estimate(*data, seed=seed))
        except DivergenceError as error:
            results.append(error)
    return results


def holds_labels(data: object) -> bool:
    """Whether ``data`` holds labels in every column: strings, or a pandas categorical."""
    if hasattr(data, "detach"):
        return False
    if str(getattr(data, "dtype", "")) == "category":
        return True
    array = np.asarray(data)
    if array.dtype.kind not in "USO" or array.ndim == 0 or not array.size:
        return False
    return len(label_columns(array)) == (1 if array.ndim == 1 else array.reshape(len(array), -1).shape[1])


def _is_label(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        float(value)
    except ValueError:
        return True
    return False


def label_columns(array: np.ndarray) -> list[int]:
    """The columns of ``array`` (strings or objects, (n,) or (n, d)) that hold labels: a string
    that is not a number in some row."""
    if array.dtype.kind not in "USO":
        return []
    columns = array.reshape(len(array), -1)
    return [j for j in range(columns.shape[1]) if any(_is_label(value) for value in columns[:, j])]


def _coded(name: str, array: np.ndarray) -> np.ndarray:
    """``array`` of strings or objects as numbers: each label column as whole-number codes (the
    labels' sorted order), the other columns as numbers (ParameterError where one is not); a
    missing value (:func:`mitool.estimators.values.is_missing`) is NaN."""
    columns = array.reshape(len(array), -1)
    labels = set(label_columns(array))
    coded = np.empty(columns.shape, dtype=np.float64)
    for j in range(columns.shape[1]):
        gaps = np.array([is_missing(value) for value in columns[:, j]], dtype=bool)
        present = columns[~gaps, j]
        coded[gaps, j] = np.nan
        if j in labels:
            if not all(isinstance(value, str) for value in present):
                raise checks.ParameterError(name, f"column {j} mixes labels (strings) with other values")
            coded[~gaps, j] = np.unique(present.astype(str), return_inverse=True)[1].reshape(-1)
            continue
        try:
            coded[~gaps, j] = present.astype(np.float64)
        except (TypeError, ValueError):
            raise checks.ParameterError(
                name, f"must hold numbers or labels (strings), got {type(present[0]).__name__} values in "
                f"column {j}",
            ) from None  # fmt: skip
    return coded.reshape(array.shape) if array.ndim == 1 else coded


UNCAPPED_ADVICE = (
    "use estimator flow (normalizing flows to a joint Gaussian, not capped) or, for Gaussian-like data, "
    "gaussian"
)
"""What a note of an estimate near its ceiling advises."""

IMAGE_DIMENSIONS = (3, 4)
"""The array dimensions read as images, (n, H, W) or (n, C, H, W): each image is one row of its
pixels (a flattening is a fixed invertible map, so the MI is the images')."""


def image_note(name: str, data: object) -> str | None:
    """The note saying that ``data`` holds images and was flattened, or None when it does not."""
    shape = getattr(data, "shape", None)
    if shape is None or len(shape) not in IMAGE_DIMENSIONS:
        return None
    size = " x ".join(str(side) for side in shape[1:])
    return f"{name}: {shape[0]} images of {size}, each flattened to a row of {math.prod(shape[1:])} pixels"


def _as_array(name: str, data: object) -> np.ndarray:
    if isinstance(data, str):
        raise checks.ParameterError(
            name, f"must be samples (an array), got the text {data!r}; an estimator is chosen by name with "
            f"estimator={data!r}",
        )  # fmt: skip
    if hasattr(data, "detach"):  # a torch tensor
        data = data.detach().cpu().numpy()  # type: ignore[union-attr]
    array = np.asarray(data)
    if array.ndim == 0:
        raise checks.ParameterError(
            name, f"must have one row per sample (n, d), got a single {type(data).__name__}"
        )
    if array.dtype.kind in "USO":
        array = _coded(name, array)
    elif array.dtype.kind not in "biuf":
        raise checks.ParameterError(name, f"must hold numbers or labels (strings), got dtype {array.dtype}")
    array = array.astype(np.float64)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim in IMAGE_DIMENSIONS:  # images (n, H, W) or (n, C, H, W): one row of pixels each
        array = array.reshape(len(array), -1)
    if array.ndim != 2 or array.shape[0] < 1 or array.shape[1] < 1:
        raise checks.ParameterError(
            name, f"must have one row per sample: (n, d), or images (n, H, W) or (n, C, H, W); got shape "
            f"{array.shape}",
        )  # fmt: skip
    bad = np.isinf(array)
    if bad.any():
        row = int(np.argwhere(bad)[0][0])
        raise checks.ParameterError(name, f"holds infinite values (first in row {row}); remove or fill them")
    return safe_scale(name, array)


FEWEST_PAIRS = 2
"""No MI is estimated, and no test run, from fewer pairs: every estimator says how many more it
needs (:meth:`Estimator.minimum_pairs`); this is the floor below which even a constant side says
nothing (one pair is constant in every column)."""


def as_rows(
    x: ArrayLike, y: ArrayLike, z: ArrayLike | None = None, *, missing: str = "refuse"
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """x, y (and z) as float64 arrays of shape (n, d) (1-D data become one column), checked:
    numbers, no infinity, the same number of rows, at least :data:`FEWEST_PAIRS`; labels (strings)
    become whole-number codes; a column at an extreme scale is rescaled by a power of two
    (:func:`mitool.estimators.values.safe_scale`). Missing values (NaN, None, pandas' NA) are
    refused, or their rows left out with ``missing="drop"`` (:func:`rows_and_notes` gives the note)."""
    return rows_and_notes(x, y, z, missing=missing)[0]


def rows_and_notes(
    x: ArrayLike, y: ArrayLike, z: ArrayLike | None = None, *, missing: str = "refuse"
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray | None], list[str]]:
    """:func:`as_rows` and the notes on what it did (rows with missing values left out)."""
    arrays = {"x": _as_array("x", x), "y": _as_array("y", y), "z": None if z is None else _as_array("z", z)}
    for name in ("y", "z"):
        array = arrays[name]
        if array is not None and len(array) != len(arrays["x"]):
            raise checks.ParameterError(
                name,
                f"must have the same number of rows (samples) as x: {len(array)} against {len(arrays['x'])}",
            )
    arrays, notes = complete_rows(arrays, missing)
    if len(arrays["x"]) < FEWEST_PAIRS:
        raise checks.TooFewSamples(
            "x", f"has too few samples ({len(arrays['x'])}{' without a missing value' * bool(notes)}; an MI "
            f"needs at least {FEWEST_PAIRS} pairs, and each estimator its minimum_pairs)",
        )  # fmt: skip
    return (arrays["x"], arrays["y"], arrays["z"]), notes


def mean_and_stderr(values: np.ndarray) -> tuple[float, float]:
    """The mean of the C ``values`` and its standard error std / sqrt(C) (NaN for one value)."""
    mean = float(np.mean(values))
    if len(values) < 2:
        return mean, math.nan
    return mean, float(np.std(values, ddof=1) / math.sqrt(len(values)))


def standard_errors_above_zero(differences: np.ndarray) -> np.ndarray:
    """The mean of paired ``differences`` over the last axis in standard errors of that mean
    (:func:`mean_and_stderr`): how far one of two paired estimates exceeds the other, in its noise
    (+-inf where the differences are one constant other than 0; 0 where all are 0, or where there is
    one difference: no measure of its noise, so no evidence).

    >>> standard_errors_above_zero(np.array([[0.1, 0.3, 0.2], [0.0, 0.0, 0.0]])).round(2).tolist()
    [3.46, 0.0]
    """

    def in_standard_errors(values: np.ndarray) -> float:
        mean, stderr = mean_and_stderr(values)
        if stderr > 0:
            return mean / stderr
        return 0.0 if math.isnan(stderr) or mean == 0 else math.copysign(math.inf, mean)

    return np.apply_along_axis(in_standard_errors, -1, np.asarray(differences, dtype=float))


def student_interval(values: np.ndarray, level: float) -> tuple[float, float, float, float]:
    """(mean, standard error, low, high): the mean of ``values`` with the Student-t interval
    mean +- t_{C-1, (1+level)/2} * std / sqrt(C) over the C values (NaN spread for one value)."""
    mean, stderr = mean_and_stderr(values)
    if len(values) < 2:
        return mean, math.nan, math.nan, math.nan
    return (mean, stderr, *normal_interval(mean, stderr, level, len(values) - 1))


def normal_interval(
    value: float, stderr: float, level: float, degrees: float = math.inf
) -> tuple[float, float]:
    """value +- q * stderr, q the (1 + level)/2 quantile of Student's t with ``degrees`` degrees
    of freedom (those of the variance estimate behind ``stderr``; infinite: the normal's)."""
    from scipy.special import ndtri, stdtrit  # scipy.stats's own quantiles, without its import

    quantile = ndtri(0.5 + level / 2) if math.isinf(degrees) else stdtrit(degrees, 0.5 + level / 2)
    half = float(quantile) * stderr
    return float(value - half), float(value + half)


def satterthwaite(variances: Sequence[float], degrees: Sequence[float]) -> float:
    """The degrees of freedom of a sum of independent variance estimates v_j with d_j degrees each
    (Welch-Satterthwaite): (sum v_j)^2 / sum (v_j^2 / d_j)."""
    total = sum(variances)
    spread = sum(v**2 / d for v, d in zip(variances, degrees, strict=True))
    return total**2 / spread if spread > 0 else math.inf
