"""The table's columns as a matrix reads them (numbers or labels, Z, the refusals before any work),
and which pairs of them take the fast path (KSG on rank scores) or a discrete column's null."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mitool import checks
from mitool.independence.features import feature_columns
from mitool.independence.permutation_test import check_size
from mitool.independence.shared_null import discrete_column
from mitool.independence.statistics import TEST_DEFAULTS
from mitool.matrix.blocks import Columns, Job


def _columns_of(data: Any, columns: Sequence[str] | None) -> tuple[list[np.ndarray], tuple[str, ...]]:
    """The table's columns, each float64 numbers (NaN where missing) or an object array of labels
    (None where missing), and their names."""
    from mitool.estimators.base import FEWEST_PAIRS, holds_labels
    from mitool.estimators.values import safe_scale
    from mitool.independence.features import column_names

    parts = feature_columns(data)
    names = column_names(data, len(parts), columns)
    table = []
    for name, part in zip(names, parts, strict=True):
        if holds_labels(part):
            table.append(np.asarray(part, dtype=object))
            continue
        try:
            column = np.asarray(part, dtype=np.float64)
        except (TypeError, ValueError):
            raise checks.ParameterError(
                "data", f"column {name} must hold numbers or labels (strings), got {np.asarray(part).dtype}"
            ) from None
        if np.isinf(column).any():
            row = int(np.argmax(np.isinf(column)))
            raise checks.ParameterError("data", f"holds infinite values (first in column {name}, row {row})")
        safe_scale(f"column {name}", column[:, None])  # an extreme value is refused naming its column
        table.append(column)  # NaN: a missing value, left out of each pair it is in
    if len(table) and len(table[0]) < FEWEST_PAIRS:
        raise checks.TooFewSamples("data", f"has {len(table[0])} row(s); an MI needs at least {FEWEST_PAIRS}")
    if len(table) < 2:
        raise checks.ParameterError("data", f"needs at least two columns, got {len(table)}")
    if len(set(names)) != len(names):
        repeated = sorted({name for name in names if names.count(name) > 1})
        raise checks.ParameterError("columns", f"must name each column once; repeated: {', '.join(repeated)}")
    return table, names


def _given_rows(given: Any, n: int) -> np.ndarray:
    """Z as an array of n rows (checked as :func:`mitool.estimate` checks it; labels kept); its
    errors name ``given``."""
    from mitool.estimators.base import as_rows

    try:
        rows = len(given)
    except TypeError:
        rows = None
    if rows is not None and rows != n:
        raise checks.ParameterError(
            "given", f"must have one row per row of {{=data}}: {rows} rows against {n}", listed=("data",)
        )
    try:
        as_rows(np.zeros(n), given, None)
    except checks.ParameterError as error:
        if error.parameter != "y":
            raise
        raise checks.ParameterError("given", error.template, error.listed) from None
    if hasattr(given, "to_numpy"):
        given = given.to_numpy()
    if hasattr(given, "detach"):
        given = given.detach().cpu().numpy()
    return np.asarray(given)


def _rank_column(column: np.ndarray) -> bool:
    """Whether the shared null may serve the column: numbers without ties (so not constant, not
    discrete, nothing to dequantise) and without missing values (a pair with them has its own rows)."""
    return column.dtype != object and not np.isnan(column).any() and len(np.unique(column)) == len(column)


def _fast_job(table: Columns, candidates: np.ndarray, estimator: str | None, permutations: int, seed: int,
              settings: dict[str, Any]) -> Job | None:  # fmt: skip
    """The job of the fast path (KSG on rank scores, 1 + 1 columns), or None when the statistic for
    two tie-free columns is another one (an estimator named, normalise="standard")."""
    from mitool.estimation import prepare

    first, second = (int(index) for index in candidates[:2])
    options = {"estimator": estimator, "seed": seed, **settings}
    prepared = prepare(table[first], table[second], defaults=TEST_DEFAULTS, **options)
    chosen = prepared.estimator
    if chosen is None or chosen.name != "ksg" or chosen.settings.normalise != "rank":
        return None
    check_size(chosen, prepared)
    ks = tuple(range(chosen.settings.k, max(chosen.settings.k, chosen.settings.k_max) + 1))
    return Job(estimator, permutations, seed, dict(settings), len(table[0]), ks, chosen.settings.subsets,
                chosen.settings.level, chosen.minimum_pairs(1, 1), chosen)  # fmt: skip


def _labelled_pairs(
    table: Columns, pairs: np.ndarray, ranked: np.ndarray, job: Job, allowed: bool
) -> np.ndarray:
    """For each pair of a discrete column and a continuous one without ties (on the fast path's
    rank scores), the discrete column; -1 for the others."""
    labelled = np.full(len(pairs), -1, dtype=np.intp)
    if not allowed or not job.ks:
        return labelled
    discrete = np.array([discrete_column(column) for column in table])
    for row, (a, b) in enumerate(pairs.tolist()):
        if discrete[a] and ranked[b]:
            labelled[row] = a
        elif discrete[b] and ranked[a]:
            labelled[row] = b
    return labelled


def _labelled_estimator(table: Columns, labelled: np.ndarray, pairs: np.ndarray, estimator: str | None,
                        seed: int, settings: dict[str, Any]) -> Any:  # fmt: skip
    """Ross's estimator as the test takes it for a discrete column against a numeric one, or None
    where its statistic is another (an estimator named)."""
    from mitool.estimation import prepare

    row = int(np.flatnonzero(labelled >= 0)[0])
    a, b = (int(index) for index in pairs[row])
    options = {"estimator": estimator, "seed": seed, **settings}
    prepared = prepare(table[a], table[b], defaults=TEST_DEFAULTS, **options)
    chosen = prepared.estimator
    if chosen is None or chosen.name != "ross":
        return None
    check_size(chosen, prepared)
    return chosen


def _dequantised_notes(names: tuple[str, ...], moved: list[int]) -> list[str]:
    if not moved:
        return []
    listed = ", ".join(names[index] for index in moved[:8]) + (", ..." if len(moved) > 8 else "")
    return [
        f"{len(moved)} column(s) with repeated values ({listed}) were dequantised once each (uniform noise "
        "within their resolution, which leaves the MI unchanged; mitool.ties) so that their pairs share a "
        "null; point masses then blur the k-NN statistics (mitool estimate takes their chain rule), and "
        "null='pair' (--null pair) tests each pair as mitool test does"
    ]


PAIR_BYTES = 150
"""Memory a pair of columns takes while a matrix is made (its indices, flags, five results and
their q-value), beside the (p x p) matrices of the result, for :func:`_refuse_too_many_pairs`."""


def _refuse_too_many_pairs(width: int) -> None:
    """A one-line refusal, before any work, of a matrix whose pairs would not fit in the free memory
    (10 000 columns: 50 million pairs, once 6.7 GB before a word was said)."""
    from mitool.runtime import refuse_beyond_memory

    pairs = width * (width - 1) // 2
    refuse_beyond_memory(
        "data", PAIR_BYTES * pairs + 6 * 8.0 * width**2, f"a matrix of {width} columns ({pairs} pairs)",
        "pair fewer columns (--columns), or reduce them first (clusters, principal components)",
    )  # fmt: skip
