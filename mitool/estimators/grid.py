"""The max-norm distance from each point of the plane to its k-th nearest other point, on a grid of
cells, compiled by numba where it is installed (``pip install mitool[fast]``): the permutation
tests' joint search for one coordinate a side: at n = 10 000 and k = 20, on points in the order
of x as the test has them, 2.5 times less CPU than scipy's k-d tree (built and queried; median of
10 permutations, 2.4 to 2.9, the other core busy), and the same distances to the bit
(tests/test_grid.py checks them against the tree's).

**The search.** The points are binned into G x G cells whose edges on each axis are the values of
rank c n / G (c = 1 .. G - 1), G = round(sqrt(4 n / k)): about k / 4 points a cell where the two
coordinates are independent, as they are on every permutation of a test. The points are listed
cell by cell (a counting sort). Point i looks at the cells at Chebyshev cell-distance r = 0, 1,
2, ... from its own, keeping the k smallest distances max(|u_j - u_i|, |v_j - v_i|) seen, in
order. After ring r, every point not yet seen lies outside the box of cells within r, so at least

    gap_r = min(u_i - left edge, right edge - u_i, v_i - bottom edge, top edge - v_i)

away (an edge beyond the grid counts as infinitely far: no point lies there); the search stops at
the first ring where k distances are kept and the k-th is at most gap_r. A distance equal to the
k-th found later would not change it, so the k-th distance is exact, as the tree's.

Without numba, :func:`kth_distances_plane` is not used (:data:`AVAILABLE` is False) and the
tree answers, with the same distances.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["AVAILABLE", "kth_distances_plane"]

try:  # an optional accelerator: the results are the same without it
    import numba

    AVAILABLE = True
except ImportError:  # pragma: no cover - exercised where numba is absent
    numba = None
    AVAILABLE = False


def _edges(values, cells):  # pragma: no cover - compiled
    """The cells' lower edges on one axis: edge c (c = 1 .. cells - 1) the value of rank c n / cells,
    so that each column of cells holds about n / cells points; edge 0 is -inf."""
    ordered = np.sort(values)
    edges = np.empty(cells)
    edges[0] = -np.inf
    for c in range(1, cells):
        edges[c] = ordered[(c * values.shape[0]) // cells]
    return edges


def _cell(edges, value):  # pragma: no cover - compiled
    """The number of edges at or below ``value``, less one: the cell whose range [edge_c, edge_c+1)
    holds it."""
    low, high = 0, edges.shape[0]
    while high - low > 1:
        middle = (low + high) // 2
        if edges[middle] <= value:
            low = middle
        else:
            high = middle
    return low


def _search(u, v, k_max, cells):  # pragma: no cover - compiled
    """(n, k_max): the distances to the 1st .. k_max-th nearest other point (see the module)."""
    n = u.shape[0]
    edges_u, edges_v = _edges(u, cells), _edges(v, cells)
    upper_u, upper_v = np.empty(cells), np.empty(cells)  # each cell's upper edge (+inf for the last)
    upper_u[:-1], upper_v[:-1] = edges_u[1:], edges_v[1:]
    upper_u[-1], upper_v[-1] = np.inf, np.inf
    cell = np.empty(n, np.int64)
    starts = np.zeros(cells * cells + 1, np.int64)
    for i in range(n):
        cell[i] = _cell(edges_u, u[i]) * cells + _cell(edges_v, v[i])
        starts[cell[i] + 1] += 1
    for c in range(cells * cells):
        starts[c + 1] += starts[c]
    filled = starts[:-1].copy()
    members = np.empty(n, np.int64)  # the points cell by cell, their coordinates alongside
    near_u, near_v = np.empty(n), np.empty(n)
    for i in range(n):
        place = filled[cell[i]]
        members[place], near_u[place], near_v[place] = i, u[i], v[i]
        filled[cell[i]] += 1
    kept = np.empty((n, k_max))
    best = np.empty(k_max)
    for own in range(n):  # cell by cell: the cells a point searches are those its neighbours searched
        i, ui, vi = members[own], near_u[own], near_v[own]
        cu, cv = cell[i] // cells, cell[i] % cells
        found = 0
        ring = 0
        while True:
            for a in range(max(cu - ring, 0), min(cu + ring, cells - 1) + 1):
                across = max(edges_u[a] - ui, ui - upper_u[a], 0.0)
                step = 1 if (ring == 0 or abs(a - cu) == ring) else 2 * ring
                for b in range(cv - ring, cv + ring + 1, step):
                    if b < 0 or b >= cells:
                        continue
                    if found == k_max:  # a cell wholly beyond the k-th distance has nothing to give
                        if max(across, edges_v[b] - vi, vi - upper_v[b]) >= best[k_max - 1]:
                            continue
                    c = a * cells + b
                    for place in range(starts[c], starts[c + 1]):
                        if place == own:
                            continue
                        distance = max(abs(near_u[place] - ui), abs(near_v[place] - vi))
                        if found < k_max:
                            at = found
                            found += 1
                        elif distance < best[k_max - 1]:
                            at = k_max - 1
                        else:
                            continue
                        while at > 0 and best[at - 1] > distance:
                            best[at] = best[at - 1]
                            at -= 1
                        best[at] = distance
            gap = np.inf  # every point not seen lies beyond one of the box's four edges
            if cu - ring > 0:
                gap = min(gap, ui - edges_u[cu - ring])
            if cu + ring < cells - 1:
                gap = min(gap, edges_u[cu + ring + 1] - ui)
            if cv - ring > 0:
                gap = min(gap, vi - edges_v[cv - ring])
            if cv + ring < cells - 1:
                gap = min(gap, edges_v[cv + ring + 1] - vi)
            if gap == np.inf or (found == k_max and best[k_max - 1] <= gap):
                break
            ring += 1
        for m in range(k_max):
            kept[i, m] = best[m]
    return kept


def _jit(function):  # pragma: no cover - depends on numba and the file system
    """Compiled by numba, the machine code cached beside the module (or in the user's cache)
    where a cache folder is writable; compiled afresh in each process where none is."""
    try:
        return numba.njit(cache=True, nogil=True)(function)
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        return numba.njit(nogil=True)(function)


if AVAILABLE:
    _edges, _cell, _compiled = _jit(_edges), _jit(_cell), _jit(_search)


def kth_distances_plane(points: np.ndarray, ks: Sequence[int]) -> np.ndarray:
    """(n, len(ks)): the max-norm distance from each point of ``points`` (n, 2) to its k-th
    nearest other point, for each k of ``ks`` (each below n); needs numba (:data:`AVAILABLE`).

    Examples
    --------
    >>> from scipy.spatial import cKDTree
    >>> points = np.random.default_rng(0).normal(size=(500, 2))
    >>> tree = cKDTree(points).query(points, k=[6, 21], p=np.inf)[0]
    >>> bool(not AVAILABLE or np.array_equal(kth_distances_plane(points, [5, 20]), tree))
    True
    """
    points = np.ascontiguousarray(points, dtype=np.float64)
    n, k_max = len(points), max(ks)
    if not AVAILABLE:
        raise RuntimeError("kth_distances_plane needs numba (pip install mitool[fast])")
    cells = max(1, round(math.sqrt(4 * n / k_max)))
    found = _compiled(np.ascontiguousarray(points[:, 0]), np.ascontiguousarray(points[:, 1]), k_max, cells)
    return found[:, [k - 1 for k in ks]]
