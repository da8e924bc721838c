"""Equal rows: the categories of rows (equal rows, equal codes), how many rows are distinct, how
many repeat an earlier one, and the refusal of repeated rows by the k-NN estimators of continuous
data. The discrete estimators, the chain rule over atoms and the choice of an estimator
(:mod:`mitool.estimation`) read them; how mitool treats ties is :mod:`mitool.ties`.
"""

from __future__ import annotations

import numpy as np

from mitool import checks

__all__ = ["category_codes", "distinct_rows", "refuse_ties", "tied_rows"]


def category_codes(rows: np.ndarray) -> np.ndarray:
    """Each row's category as an integer 0 .. m - 1 (equal rows, equal codes)."""
    if rows.shape[1] == 1:
        return np.unique(rows[:, 0], return_inverse=True)[1].reshape(-1)
    return np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1)


def distinct_rows(rows: np.ndarray) -> int:
    """The number of distinct rows of ``rows`` (n, d); one column by a sort of its values (numpy's
    unique over rows is five times slower)."""
    if rows.shape[1] == 1:
        return int(len(rows) and 1 + np.count_nonzero(np.diff(np.sort(rows[:, 0]))))
    return len(np.unique(rows, axis=0))


def tied_rows(*arrays: np.ndarray) -> int:
    """The most rows, over ``arrays`` (each (n, d)), that repeat an earlier row of the same array."""
    return max(len(array) - distinct_rows(array) for array in arrays)


def refuse_ties(estimator: str, **arrays: np.ndarray | None) -> None:
    """ParameterError naming the first of ``arrays`` (x, y, z) with rows that repeat another row:
    a k-NN estimator of continuous data cannot take them (their distances are 0)."""
    for name, array in arrays.items():
        tied = 0 if array is None else tied_rows(array)
        if tied:
            raise checks.ParameterError(
                name,
                f"has {tied} rows that repeat another row's value exactly; {estimator} assumes continuous "
                "data (its distances become 0 and its value meaningless): use estimator='mixed-ksg' for data "
                "with ties or atoms, or discrete='x'/'y'/'both' (for Z: discrete='z') for discrete variables",
            )
