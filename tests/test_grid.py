"""The grid search of k-th neighbour distances in the plane (:mod:`mitool.estimators.grid`, numba):
the same distances as scipy's k-d tree, to the bit, on the data a permutation test meets (spread,
strongly dependent, tied, tiny), and the same test statistic with it as without it."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial import cKDTree

from mitool.estimators import grid
from mitool.independence import ksg_statistic

pytestmark = pytest.mark.skipif(
    not grid.AVAILABLE, reason="numba is not installed (pip install mitool[fast])"
)


def tree_distances(points: np.ndarray, ks: list[int]) -> np.ndarray:
    return cKDTree(points).query(points, k=[k + 1 for k in ks], p=np.inf)[0]


def layouts(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    spread = rng.normal(size=(n, 2))
    return {
        "spread": spread,
        "dependent": np.c_[spread[:, 0], spread[:, 0] + 1e-3 * spread[:, 1]],
        "tied": np.round(spread, 1),
        "heavy tails": rng.standard_cauchy(size=(n, 2)),
        "a line": np.c_[spread[:, 0], np.zeros(n)],
        "one point repeated": np.zeros((n, 2)),
    }


@pytest.mark.parametrize(("n", "ks"), [(2, [1]), (6, [1, 5]), (300, [1, 3]), (2000, [5, 20])])
def test_the_grid_gives_the_trees_distances(n: int, ks: list[int]) -> None:
    rng = np.random.default_rng(n)
    for name, points in layouts(rng, n).items():
        found = grid.kth_distances_plane(points, ks)
        np.testing.assert_array_equal(found, tree_distances(points, ks), err_msg=name)


def test_the_ksg_statistic_is_the_same_with_and_without_the_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(1500, 1))
    y = x**2 + rng.normal(size=(1500, 1))
    orders = [np.arange(1500), rng.permutation(1500)]
    with_grid = [ksg_statistic(x, y, 20)(order) for order in orders]
    monkeypatch.setattr(grid, "AVAILABLE", False)
    without = [ksg_statistic(x, y, 20)(order) for order in orders]
    assert with_grid == without
