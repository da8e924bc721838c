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


@pytest.mark.parametrize("normalise", ["rank", "standard"])
@pytest.mark.parametrize(("k", "k_max"), [(20, 0), (3, 6)])
def test_the_ksg_statistic_is_the_same_with_and_without_the_grid(
    monkeypatch: pytest.MonkeyPatch, normalise: str, k: int, k_max: int
) -> None:
    """The compiled search and counts (grid.PlaneKSG) against the k-d tree and numpy's sorted
    searches, to the bit: the same distances, the same counts, the same mean in the same order; on
    standardised values the heavy tails and ties reach the counts' galloping search."""
    rng = np.random.default_rng(3)
    n = 1500
    x = rng.normal(size=(n, 1))
    data = {
        "dependent": (x, x**2 + rng.normal(size=(n, 1))),
        "ties": (np.round(x, 1), np.round(rng.normal(size=(n, 1)), 1)),
        "heavy tails": (rng.standard_cauchy(size=(n, 1)), rng.standard_cauchy(size=(n, 1))),
        "one value repeated": (np.r_[np.zeros((n - 40, 1)), x[:40]], x),
    }
    orders = [np.arange(n), rng.permutation(n), rng.permutation(n)]
    for name, (a, b) in data.items():
        with_grid = [ksg_statistic(a, b, k, k_max, normalise)(order) for order in orders]
        with monkeypatch.context() as patch:
            patch.setattr(grid, "AVAILABLE", False)
            without = [ksg_statistic(a, b, k, k_max, normalise)(order) for order in orders]
        assert with_grid == without, name


def test_the_counts_match_sorted_searches_where_the_table_guesses_badly() -> None:
    """The per-point terms psi(n_x + 1) + psi(n_y + 1) against a plain count of every pair, on
    values the count table serves worst: one huge outlier (every other value in its first bucket)
    and long runs of equal values."""
    rng = np.random.default_rng(5)
    n = 400
    x = np.sort(np.r_[np.round(rng.normal(size=n - 1), 1), 1e9])
    y = np.round(rng.normal(size=n), 1)
    psi = np.arange(n + 2, dtype=np.float64)  # psi(m) = m: the terms are the counts themselves
    rows = rng.permutation(n)
    terms = grid.PlaneKSG(x, y, [4], psi).terms(rows)[:, 0]
    points = np.c_[x, y[rows]]
    kth = tree_distances(points, [4])[:, 0]
    reach = np.maximum(np.nextafter(kth, 0.0), 0.0)
    plain = [
        np.sum(np.abs(x - x[i]) <= reach[i]) + np.sum(np.abs(y - y[rows][i]) <= reach[i]) for i in range(n)
    ]
    np.testing.assert_array_equal(terms, plain)


def test_the_k_nn_searches_route_to_the_grid_only_where_it_pays_and_agree_with_the_tree() -> None:
    """neighbours.kth_neighbour_distances, the one entry of the k-th neighbour searches: the grid
    from PLANE_MIN_POINTS points with comparable spreads, the tree otherwise; the same distances."""
    from scipy.spatial import cKDTree

    from mitool.estimators import neighbours

    rng = np.random.default_rng(3)
    points = rng.normal(size=(neighbours.PLANE_MIN_POINTS, 2))
    points[:, 1] = np.round(points[:, 1] + points[:, 0], 1)  # ties: k-th distances of 0 among them
    tree = cKDTree(points).query(points, k=[4, 21], p=np.inf)[0]
    assert np.array_equal(neighbours.kth_neighbour_distances(points, [3, 20]), tree)
    assert np.array_equal(neighbours.kth_distances(points, 20), tree[:, 1])
    assert neighbours._plane_pays(points)
    assert not neighbours._plane_pays(points[:100])  # too few to repay numba's start
    assert not neighbours._plane_pays(points * [1.0, 1000.0])  # scales a thousand apart


def test_coincident_counts_are_the_counts_at_distance_zero() -> None:
    from mitool.estimators.neighbours import coincident_counts, counts_within

    points = np.random.default_rng(4).integers(0, 3, size=(500, 2)).astype(float)
    assert np.array_equal(coincident_counts(points), counts_within(points, np.zeros(500), strict=False))


@pytest.mark.parametrize("n, ks", [(6, [3, 5, 6]), (400, [1, 20]), (2000, [7])])
def test_on_a_line_the_windows_of_sorted_points_give_the_trees_distances(n: int, ks: list[int]) -> None:
    """One coordinate: the k-th distance is the narrowest window of k + 1 consecutive sorted points
    around the point, to the bit the tree's (with ties, heavy tails, and k = n - 1 or more, where
    the tree's missing neighbours are infinitely far)."""
    from scipy.spatial import cKDTree

    from mitool.estimators import neighbours

    rng = np.random.default_rng(n)
    for values in (rng.normal(size=n), np.round(rng.standard_t(1, size=n), 1)):
        tree = cKDTree(values[:, None]).query(values[:, None], k=[k + 1 for k in ks], p=np.inf)[0]
        found = neighbours.kth_neighbour_distances(values[:, None], ks)
        assert np.array_equal(found, tree.reshape(n, len(ks)))
