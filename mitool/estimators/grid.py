"""KSG's work in the plane, compiled by numba where it is installed (``pip install mitool[fast]``):
the max-norm distance from each point to its k-th nearest other point, and the marginal counts
within that distance, for the permutation tests' statistic with one coordinate a side
(:func:`mitool.independence.ksg_statistic`). At n = 10 000 and k = 20 a permutation costs about
7 ms of one core, where scipy's k-d tree and numpy's sorted searches took 33 ms
(``python bench/independence.py --timing-only --timing-no-peers``), and the numbers are the same:
the same distances as the tree's to the bit and the same counts as
:func:`~mitool.estimators.neighbours.counts_within`, so the same statistic (tests/test_grid.py).

**The grid.** The points are binned into G x G cells whose edges on each axis are the values of
rank c n / G (c = 1 .. G - 1), G = round(sqrt(4 n / k)): about k / 4 points a cell where the two
coordinates are independent, as they are on every permutation of a test. The points are listed
cell by cell (a counting sort), so the cells of one column of the grid lie next to each other.

**The k-th distance.** Point i takes the distances to every point of the 3 x 3 cells around its
own (three runs of memory), keeps the k smallest by a selection (quickselect with branch-free
partitions; a sorted insertion of each candidate took 9 ms a permutation where the distances
themselves take under 2), then widens ring by ring. After ring r, every point not yet seen lies
outside the box of cells within r, so at least

    gap_r = min(u_i - left edge, right edge - u_i, v_i - bottom edge, top edge - v_i)

away (an edge beyond the grid counts as infinitely far: no point lies there); the search stops at
the first ring where k distances are kept and the k-th is at most gap_r, and a ring adds only the
distances below the k-th so far. A distance equal to the k-th found later would not change it, so
the k-th distance is exact, as the tree's.

**The counts.** The number of values o_j of one coordinate with |o_j - v| <= r, by the float
tests o_j - v > r (past the right end) and v - o_j <= r (inside the left end), both monotone in j
over the sorted values: each end is guessed from a table of B = 2 n buckets of equal width over
the values' range (the first place at or above each bucket's lower bound), then moved by a
galloping search until the test changes there: about one step for normal scores, at worst
O(log n) (heavy tails, long runs of ties).

Without numba, :data:`AVAILABLE` is False and the callers use the tree and numpy's sorted
searches, with the same numbers. numba (about 0.25 s to import) is imported at the first question:
reading ``AVAILABLE`` (or calling :func:`available`) imports it and wraps the kernels for
compilation, once, so that importing this module (as the registry of estimators does) costs
nothing for the routes that never search the plane.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["AVAILABLE", "PlaneKSG", "SortedAxis", "available", "kth_distances_plane"]

numba: Any = None
"""numba once :func:`available` has imported it (an optional accelerator: the same results without)."""

_loading = threading.Lock()

CELL_POINTS = 4.0
"""G = round(sqrt(CELL_POINTS n / k)) cells a side: about k / CELL_POINTS points a cell."""

BUCKETS_PER_VALUE = 2
"""The count table's buckets per value (B = 2 n)."""


def grid_cells(n: int, k: int) -> int:
    """G, the cells on each side of the grid for n points and the k-th neighbour."""
    return max(1, round(math.sqrt(CELL_POINTS * n / k)))


@dataclass(frozen=True)
class SortedAxis:
    """One coordinate's values, made once: sorted (``ordered``), the grid's cell edges on it
    (``edges``: -inf, then the values of rank c n / G), and the count table (``table``: for each of
    B buckets of width 1 / ``scale`` from ``low``, the first place in ``ordered`` at or above the
    bucket's lower bound)."""

    ordered: np.ndarray
    edges: np.ndarray
    table: np.ndarray
    low: float
    scale: float

    @classmethod
    def of(cls, values: np.ndarray, cells: int) -> SortedAxis:
        ordered = np.ascontiguousarray(np.sort(np.asarray(values, dtype=np.float64)))
        n = len(ordered)
        edges = np.concatenate([[-np.inf], ordered[(np.arange(1, cells) * n) // cells]])
        low, span = float(ordered[0]), float(ordered[-1] - ordered[0])
        buckets = BUCKETS_PER_VALUE * n
        scale = buckets / span if span > 0 else 0.0
        bounds = low + np.arange(buckets + 1) / scale if scale else np.array([low])
        table = np.searchsorted(ordered, bounds, "left").astype(np.int64)
        return cls(ordered, edges, table, low, scale)

    def cells_of(self, values: np.ndarray) -> np.ndarray:
        """The cell (0 .. G - 1) of each value: the number of edges at or below it, less one."""
        return (np.searchsorted(self.edges, values, "right") - 1).astype(np.int64)


# --- the compiled kernels (plain Python where numba is absent; never called then) ------------------


def _select(buffer, size, rank):  # pragma: no cover - compiled
    """The rank-th smallest (from 0) of buffer[:size]; buffer[:rank] end up at or below it. Hoare's
    quickselect, the pivot a median of three, each partition a branch-free pass (a swap every
    step, the boundary moved by the comparison's 0 or 1), then the values equal to the pivot."""
    low, high = 0, size - 1
    while low < high:
        a, b, c = buffer[low], buffer[(low + high) >> 1], buffer[high]
        pivot = max(min(a, b), min(max(a, b), c))
        below = low
        for j in range(low, high + 1):
            value = buffer[j]
            buffer[j] = buffer[below]
            buffer[below] = value
            below += value < pivot
        if rank < below:
            high = below - 1
            continue
        equal = below
        for j in range(below, high + 1):
            value = buffer[j]
            buffer[j] = buffer[equal]
            buffer[equal] = value
            equal += value == pivot
        if rank < equal:
            return pivot
        low = equal
    return buffer[low]


def _layout(cell_u, cell_v, u, v, cells):  # pragma: no cover - compiled
    """The points listed cell by cell: (starts, members, near_u, near_v), cell c's points at places
    starts[c] .. starts[c + 1] - 1, members[place] the point's index, near_u/near_v its coordinates."""
    n = u.shape[0]
    starts = np.zeros(cells * cells + 1, np.int64)
    for i in range(n):
        starts[cell_u[i] * cells + cell_v[i] + 1] += 1
    for c in range(cells * cells):
        starts[c + 1] += starts[c]
    filled = starts[:-1].copy()
    members = np.empty(n, np.int64)
    near_u, near_v = np.empty(n), np.empty(n)
    for i in range(n):
        c = cell_u[i] * cells + cell_v[i]
        place = filled[c]
        members[place], near_u[place], near_v[place] = i, u[i], v[i]
        filled[c] += 1
    return starts, members, near_u, near_v


def _kth_around(own, cu, cv, starts, near_u, near_v, edges_u, edges_v, cells, k, buffer):  # pragma: no cover
    """The k-th smallest max-norm distance from the point at place ``own`` (in cell (cu, cv)) to the
    other points; buffer[:k] holds the k smallest, in no order (see the module)."""
    ui, vi = near_u[own], near_v[own]
    size = 0
    for a in range(max(cu - 1, 0), min(cu + 1, cells - 1) + 1):  # rings 0 and 1: three runs
        first = starts[a * cells + max(cv - 1, 0)]
        last = starts[a * cells + min(cv + 1, cells - 1) + 1]
        for place in range(first, last):
            buffer[size] = max(abs(near_u[place] - ui), abs(near_v[place] - vi))
            size += place != own
    kth = np.inf
    ring = 1
    while True:
        if size >= k:
            kth = _select(buffer, size, k - 1)
            size = k
        gap = np.inf  # every point not seen lies beyond one of the box's four edges
        if cu - ring > 0:
            gap = min(gap, ui - edges_u[cu - ring])
        if cu + ring < cells - 1:
            gap = min(gap, edges_u[cu + ring + 1] - ui)
        if cv - ring > 0:
            gap = min(gap, vi - edges_v[cv - ring])
        if cv + ring < cells - 1:
            gap = min(gap, edges_v[cv + ring + 1] - vi)
        if gap == np.inf or kth <= gap:
            return kth
        ring += 1
        for a in range(max(cu - ring, 0), min(cu + ring, cells - 1) + 1):
            right = edges_u[a + 1] if a + 1 < cells else np.inf
            if max(edges_u[a] - ui, ui - right) >= kth:  # the column lies wholly beyond the k-th
                continue
            if abs(a - cu) == ring:  # a whole column of the ring: one run
                first = starts[a * cells + max(cv - ring, 0)]
                last = starts[a * cells + min(cv + ring, cells - 1) + 1]
                for place in range(first, last):
                    distance = max(abs(near_u[place] - ui), abs(near_v[place] - vi))
                    buffer[size] = distance
                    size += distance < kth
            else:  # its two ends
                for b in (cv - ring, cv + ring):
                    if b < 0 or b >= cells:
                        continue
                    for place in range(starts[a * cells + b], starts[a * cells + b + 1]):
                        distance = max(abs(near_u[place] - ui), abs(near_v[place] - vi))
                        buffer[size] = distance
                        size += distance < kth


def _each_k(buffer, kth, ks, descending, out, row):  # pragma: no cover - compiled
    """out[row, j] = the ks[j]-th smallest distance, for each j, from ``kth`` (the largest k's, with
    buffer[:max(ks)] the max(ks) smallest): a selection for each other k from the largest down
    (``descending``: the places of ks from the largest), each within the part the one before left
    at or below its value, O(k) each (sorting the k smallest took O(k^2))."""
    out[row, descending[0]] = kth
    size = ks[descending[0]]
    for j in descending[1:]:
        out[row, j] = _select(buffer, size, ks[j] - 1)
        size = ks[j]


def _search(u, v, cell_u, cell_v, edges_u, edges_v, cells, ks):  # pragma: no cover - compiled
    """(n, len(ks)): the distances to the ks[j]-th nearest other point (see the module)."""
    n = u.shape[0]
    k = ks.max()
    starts, members, near_u, near_v = _layout(cell_u, cell_v, u, v, cells)
    buffer = np.empty(n + 1)
    descending = np.argsort(ks)[::-1]
    out = np.empty((n, ks.shape[0]))
    for own in range(n):  # cell by cell: the cells a point searches are those its neighbours searched
        i = members[own]
        kth = _kth_around(own, cell_u[i], cell_v[i], starts, near_u, near_v, edges_u, edges_v, cells, k,
                          buffer)  # fmt: skip
        _each_k(buffer, kth, ks, descending, out, i)
    return out


def _end(ordered, table, low, scale, value, reach):  # pragma: no cover - compiled
    """The first place j of the sorted values with ordered[j] - value > reach (n if none), from
    the table's guess by a galloping search (see the module)."""
    return _first_true(ordered, table, low, scale, value + reach, value, reach, True)


def _begin(ordered, table, low, scale, value, reach):  # pragma: no cover - compiled
    """The first place j with value - ordered[j] <= reach."""
    return _first_true(ordered, table, low, scale, value - reach, value, reach, False)


def _test(ordered, j, value, reach, past):  # pragma: no cover - compiled
    if past:
        return ordered[j] - value > reach
    return value - ordered[j] <= reach


def _first_true(ordered, table, low, scale, near, value, reach, past):  # pragma: no cover - compiled
    """The first place at which the test (monotone: false, then true) holds, n if none, starting
    from the bucket of ``near``: back while the place before holds it, doubling the step, then
    forward, doubling, then halving."""
    n = ordered.shape[0]
    bucket = (near - low) * scale
    last = table.shape[0] - 1
    place = table[0] if bucket <= 0.0 else (table[last] if bucket >= last else table[int(bucket)])
    step = 1
    while place > 0 and _test(ordered, place - 1, value, reach, past):
        place = max(place - step, 0)
        step *= 2
    low_end, high_end, step = place, place, 1  # every place before low_end fails the test
    while high_end < n and not _test(ordered, high_end, value, reach, past):
        low_end = high_end + 1
        high_end = low_end + step
        step *= 2
    high_end = min(high_end, n)
    while low_end < high_end:
        middle = (low_end + high_end) >> 1
        if _test(ordered, middle, value, reach, past):
            high_end = middle
        else:
            low_end = middle + 1
    return low_end


def _ksg_terms(v, cell_u, cell_v, ordered_u, edges_u, table_u, low_u, scale_u, ordered_v, edges_v, table_v,
               low_v, scale_v, cells, ks, psi):  # fmt: skip  # pragma: no cover - compiled
    """(n, len(ks)): psi(n_x(i) + 1) + psi(n_y(i) + 1) for each point i = (ordered_u[i], v[i]), n_x and
    n_y the other points strictly within the ks[j]-th neighbour distance eps_i in each coordinate
    (within the float below eps_i, as :func:`~mitool.estimators.neighbours.counts_within`)."""
    n = v.shape[0]
    k = ks.max()
    starts, members, near_u, near_v = _layout(cell_u, cell_v, ordered_u, v, cells)
    buffer = np.empty(n + 1)
    descending = np.argsort(ks)[::-1]
    distances = np.empty((n, ks.shape[0]))
    terms = np.empty((n, ks.shape[0]))
    for own in range(n):
        i = members[own]
        kth = _kth_around(own, cell_u[i], cell_v[i], starts, near_u, near_v, edges_u, edges_v, cells, k,
                          buffer)  # fmt: skip
        _each_k(buffer, kth, ks, descending, distances, i)
        ui, vi = near_u[own], near_v[own]
        for j in range(ks.shape[0]):
            reach = max(np.nextafter(distances[i, j], 0.0), 0.0)
            inside_u = _end(ordered_u, table_u, low_u, scale_u, ui, reach) - _begin(
                ordered_u, table_u, low_u, scale_u, ui, reach)  # fmt: skip
            inside_v = _end(ordered_v, table_v, low_v, scale_v, vi, reach) - _begin(
                ordered_v, table_v, low_v, scale_v, vi, reach)  # fmt: skip
            terms[i, j] = psi[inside_u] + psi[inside_v]  # each count includes the point itself
    return terms


def _jit(function):  # pragma: no cover - depends on numba and the file system
    """Compiled by numba, the machine code cached beside the module (or in the user's cache)
    where a cache folder is writable; compiled afresh in each process where none is."""
    try:
        return numba.njit(cache=True, nogil=True)(function)
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        return numba.njit(nogil=True)(function)


def available() -> bool:
    """Whether numba imports; the first call imports it and wraps the kernels (compiled at their
    first call), and keeps the answer as :data:`AVAILABLE`."""
    global numba, AVAILABLE, _select, _layout, _kth_around, _each_k
    global _test, _first_true, _end, _begin, _search, _ksg_terms
    with _loading:
        if "AVAILABLE" not in globals():
            try:
                import numba as module
            except ImportError:  # pragma: no cover - exercised where numba is absent
                AVAILABLE = False
            else:
                numba = module
                _select, _layout, _kth_around, _each_k = map(_jit, (_select, _layout, _kth_around, _each_k))
                _test, _first_true, _end, _begin = map(_jit, (_test, _first_true, _end, _begin))
                _search, _ksg_terms = _jit(_search), _jit(_ksg_terms)
                AVAILABLE = True
    return AVAILABLE


def __getattr__(name: str) -> Any:  # AVAILABLE before the first question: ask it
    if name == "AVAILABLE":
        return available()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _needs_numba() -> None:
    if not available():
        raise RuntimeError("the compiled search needs numba (pip install mitool[fast])")


def kth_distances_plane(points: np.ndarray, ks: Sequence[int]) -> np.ndarray:
    """(n, len(ks)): the max-norm distance from each point of ``points`` (n, 2) to its k-th
    nearest other point, for each k of ``ks`` (each below n); needs numba (:data:`AVAILABLE`).

    Examples
    --------
    >>> from scipy.spatial import cKDTree
    >>> points = np.random.default_rng(0).normal(size=(500, 2))
    >>> tree = cKDTree(points).query(points, k=[6, 21], p=np.inf)[0]
    >>> bool(not available() or np.array_equal(kth_distances_plane(points, [5, 20]), tree))
    True
    """
    _needs_numba()
    points = np.asarray(points, dtype=np.float64)
    cells = grid_cells(len(points), max(ks))
    u, v = (np.ascontiguousarray(points[:, axis]) for axis in (0, 1))
    axis_u, axis_v = SortedAxis.of(u, cells), SortedAxis.of(v, cells)
    return _search(u, v, axis_u.cells_of(u), axis_v.cells_of(v), axis_u.edges, axis_v.edges, cells,
                   np.asarray(ks, dtype=np.int64))  # fmt: skip


class PlaneKSG:
    """KSG's per-point terms psi(n_x(i) + 1) + psi(n_y(i) + 1) for pairings of two fixed sets of
    values, one coordinate each: x's values in sorted order, y's in any order; ``terms(rows)``
    pairs x's i-th smallest value with y's value rows[i]. What the pairings do not change is made
    once (each axis's sorted values, cell edges and count table; each y value's cell), so a call
    is the layout, the search and the counts (:func:`mitool.independence.ksg_statistic`).

    Examples
    --------
    >>> from scipy.special import digamma
    >>> from mitool.estimators.ksg import ksg
    >>> from mitool.estimators.preparation import normal_scores
    >>> rng = np.random.default_rng(0)
    >>> x = np.sort(rng.normal(size=400)); y = x + rng.normal(size=400)
    >>> (u,), (v,) = normal_scores(x[:, None])[0].T, normal_scores(y[:, None])[0].T
    >>> psi = digamma(np.arange(402.0))
    >>> if available():
    ...     terms = PlaneKSG(u, v, [5], psi).terms(np.arange(400))[:, 0]
    ...     value = digamma(5) + digamma(400) - terms.mean()
    ...     print(bool(abs(value - ksg(x[:, None], y[:, None], k=5, normalise="rank")) < 1e-12))
    ... else:
    ...     print(True)
    True
    """

    def __init__(self, x_sorted: np.ndarray, y: np.ndarray, ks: Sequence[int], psi: np.ndarray) -> None:
        _needs_numba()
        self.ks = np.asarray(ks, dtype=np.int64)
        self.cells = grid_cells(len(x_sorted), int(self.ks.max()))
        self.x = SortedAxis.of(x_sorted, self.cells)
        if not np.array_equal(self.x.ordered, x_sorted):
            raise ValueError("x_sorted must be sorted")
        self.y_values = np.ascontiguousarray(y, dtype=np.float64)
        self.y = SortedAxis.of(self.y_values, self.cells)
        self.x_cells = self.x.cells_of(self.x.ordered)
        self.y_cells = self.y.cells_of(self.y_values)
        self.psi = np.ascontiguousarray(psi, dtype=np.float64)

    def terms(self, rows: np.ndarray) -> np.ndarray:
        """(n, len(ks)) in x's order, for the pairing of x's i-th value with y's value rows[i]."""
        x, y = self.x, self.y
        return _ksg_terms(self.y_values[rows], self.x_cells, self.y_cells[rows], x.ordered, x.edges, x.table,
                          x.low, x.scale, y.ordered, y.edges, y.table, y.low, y.scale, self.cells, self.ks,
                          self.psi)  # fmt: skip
