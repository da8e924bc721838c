"""Equal rows: the categories of rows (equal rows, equal codes), how many rows are distinct, how
many repeat an earlier one, the refusal of repeated rows by the k-NN estimators of continuous data,
and of columns on a subspace by the Gaussian models. The discrete estimators, the chain rule over
atoms and the choice of an estimator (:mod:`mitool.estimation`) read them; how mitool treats ties
is :mod:`mitool.ties`.
"""

from __future__ import annotations

import numpy as np

from mitool import checks

__all__ = ["category_codes", "collinearity", "distinct_rows", "refuse_collinear", "refuse_ties", "tied_rows"]


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


def collinearity(rows: np.ndarray) -> float:
    """The smallest eigenvalue of the correlation matrix of the columns of ``rows`` over the largest
    (1 for a single column): near 0 where the columns lie near a subspace of lower dimension, as
    images and other data on a low-dimensional surface do (a 16 x 16 image of a bump at a point of
    the unit square, 1e-16; of a rectangle, 9e-6; correlated Gaussians of 64 dimensions, 0.74).
    Constant columns are left out (1 where fewer than two columns vary)."""
    rows = rows[:, np.ptp(rows, axis=0) > 0]
    if rows.shape[1] < 2:
        return 1.0
    eigenvalues = np.linalg.eigvalsh(np.corrcoef(rows, rowvar=False))
    return max(float(eigenvalues[0]), 0.0) / float(eigenvalues[-1])


def refuse_collinear(name: str, rows: np.ndarray, threshold: float) -> None:
    """ParameterError when the columns of ``rows`` lie near a subspace of lower dimension: their
    :func:`collinearity` below ``threshold``. A Gaussian model of such columns means nothing: its
    canonical correlations approach 1 whatever the dependence (bumps of 5 nats: the Gaussian MI 38
    nats, the flow's 78)."""
    ratio = collinearity(rows)
    if ratio < threshold:
        raise checks.ParameterError(
            name, f"has {rows.shape[1]} columns that lie near a subspace of lower dimension (the smallest "
            f"eigenvalue of their correlation matrix is {ratio:.1e} of the largest, below {threshold:g}), "
            "as images and other data on a low-dimensional surface do: a Gaussian model of them means "
            "nothing; estimate on a low-dimensional representation of them (PCA scores, an encoder's codes; "
            "estimator='flow' with encode=True encodes such sides)",
        )  # fmt: skip
