"""Nearest-neighbour counts in the max-norm, shared by the k-NN estimators (KSG, and those for
discrete, mixed and conditional data).

For points w_i = (x_i, y_i) of a joint space and eps_i the max-norm distance from w_i to its k-th
nearest other point, :func:`joint_neighbour_counts` gives, for each marginal space, the number of
other points strictly within eps_i of point i there (KSG's estimator I); with ``rectangles``, the
number within (or at) eps_i^j, the distance in marginal space j from point i to the farthest of its
k nearest joint neighbours: the sides of the smallest hyper-rectangle centred on point i that holds
them (KSG's estimator II). The distances come from scipy's ``cKDTree``
(one query for the k-th neighbours, one batched radius count per marginal space) when the joint
dimension is small, and from an exact chunked all-pairs computation in torch when it is large, where
k-d trees visit nearly every point anyway (n = 5000 at 25 + 25 dimensions: about 5 s with the trees
on a 2-core CPU, about 1 s all-pairs). Both give the same counts (tested). The trees' queries use
the threads the command line sized to the free cores (:func:`mitool.runtime.chosen_threads`).

The one home of the k-NN searches: the k-th neighbour distances (a k-d tree, or in the plane the
compiled grid of :mod:`mitool.estimators.grid`), counts within a radius (of any points, or of
points that stay fixed while their pairing changes: :func:`fixed_points_counter`, the form the
permutation tests need), used by the estimators, the tests and the MI matrix alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mitool import checks
from mitool.runtime import chosen_threads

__all__ = [
    "DISTANCE_TABLE_MAX",
    "PLANE_MIN_POINTS",
    "PLANE_SPREAD_RATIO",
    "TREE_MAX_DIM",
    "coincident_counts",
    "counts_within",
    "joint_neighbour_counts",
    "joint_neighbours",
    "fixed_points_counter",
    "kth_distances",
    "kth_neighbour_distances",
    "sorted_counts",
    "strict_reach",
]

TREE_MAX_DIM = 12
"""Joint dimensions up to this use k-d trees for the neighbour counts, larger ones all pairs."""


class _TreeNeighbours:
    """Each point's ``k_max`` nearest other points in the joint space (one k-d tree query; the
    point itself comes first), from which the counts of any k <= k_max follow, of either kind."""

    def __init__(self, parts: Sequence[np.ndarray], k_max: int) -> None:
        from scipy.spatial import cKDTree

        self.parts = parts
        joint = np.hstack(parts)
        self.distances, self.index = cKDTree(joint).query(
            joint, k=k_max + 1, p=np.inf, workers=chosen_threads()
        )

    def counts(self, ks: Sequence[int], rectangles: bool = False) -> list[list[np.ndarray]]:
        if not rectangles:
            return [[counts_within(part, self.distances[:, k]) for part in self.parts] for k in ks]

        # per space, the distance to the farthest of the first m joint neighbours, m = 1 .. k_max
        sides = [
            np.maximum.accumulate(np.abs(part[self.index[:, 1:]] - part[:, None, :]).max(axis=2), axis=1)
            for part in self.parts
        ]
        return [
            [
                counts_within(part, side[:, k - 1], strict=False)
                for part, side in zip(self.parts, sides, strict=True)
            ]
            for k in ks
        ]


class _AllPairsNeighbours:
    """The all-pairs counts (:func:`_all_pairs_counts`), computed when asked for."""

    def __init__(self, parts: Sequence[np.ndarray], k_max: int) -> None:
        self.parts = parts

    def counts(self, ks: Sequence[int], rectangles: bool = False) -> list[list[np.ndarray]]:
        return _all_pairs_counts(self.parts, ks, rectangles)


def _max_norm_distances(rows, points):
    """(r, n) max-norm distances, one coordinate at a time (no (r, n, d) temporary)."""
    import torch

    distance = (rows[:, None, 0] - points[None, :, 0]).abs()
    for column in range(1, rows.shape[1]):
        torch.maximum(distance, (rows[:, None, column] - points[None, :, column]).abs(), out=distance)
    return distance


def _all_pairs_counts(
    parts: Sequence[np.ndarray], ks: Sequence[int], rectangles: bool = False, chunk: int = 256
) -> list[list[np.ndarray]]:
    import torch

    tensors = [torch.from_numpy(np.ascontiguousarray(part)) for part in parts]
    counts: list[list[list]] = [[[] for _ in parts] for _ in ks]
    for start in range(0, len(parts[0]), chunk):
        distances = [_max_norm_distances(t[start : start + chunk], t) for t in tensors]
        joint = distances[0]
        for other in distances[1:]:
            joint = torch.maximum(joint, other)
        # the k-th neighbour in the joint space; the point itself (distance 0) is the first value
        nearest = joint.topk(max(ks) + 1, dim=1, largest=False)
        if rectangles:  # per space, the distance to the farthest of the first m joint neighbours
            sides = [
                distance.gather(1, nearest.indices[:, 1:]).cummax(dim=1).values for distance in distances
            ]
        for index, k in enumerate(ks):
            for part, distance in enumerate(distances):
                if rectangles:
                    within = distance <= sides[part][:, k - 1, None]
                else:
                    within = distance < nearest.values[:, k, None]
                counts[index][part].append(within.sum(1) - 1)
    return [[torch.cat(c).numpy() for c in per_k] for per_k in counts]


def joint_neighbour_counts(
    parts: Sequence[np.ndarray], ks: Sequence[int], method: str = "auto", rectangles: bool = False
) -> list[list[np.ndarray]]:
    """For each k of ``ks`` and each space of ``parts`` (arrays (n, d_j) of the same rows; the
    joint space is their concatenation): the number of other points strictly within the max-norm
    distance from point i to its k-th nearest other point in the joint space, as counts[k][j][i];
    with ``rectangles``, the number within (or at) the distance in space j from point i to the
    farthest of its k nearest joint neighbours (at least k). ``method``: "tree" (k-d trees),
    "all-pairs" or "auto" (trees up to :data:`TREE_MAX_DIM` joint dimensions). The distances are
    computed once for all k."""
    return joint_neighbours(parts, max(ks), method).counts(ks, rectangles)


def joint_neighbours(
    parts: Sequence[np.ndarray], k_max: int, method: str = "auto"
) -> _TreeNeighbours | _AllPairsNeighbours:
    """The joint neighbours of :func:`joint_neighbour_counts` up to ``k_max``, whose ``counts(ks,
    rectangles)`` are its counts for any ks <= k_max: with k-d trees one query serves every call
    (KSG's rule for k reads one kind of counts and reports the other)."""
    checks.choice("method", method, ("auto", "tree", "all-pairs"))
    if method == "auto":
        method = "tree" if sum(part.shape[1] for part in parts) <= TREE_MAX_DIM else "all-pairs"
    return (_TreeNeighbours if method == "tree" else _AllPairsNeighbours)(parts, k_max)


PLANE_MIN_POINTS = 4096
"""From this many points in the plane, :func:`kth_neighbour_distances` searches with the compiled
grid rather than a k-d tree by default; below, numba's import and first compilation cost more than
the grid saves."""

PLANE_SPREAD_RATIO = 10.0
"""The grid serves points whose two coordinates' standard deviations are within this factor."""

DISTANCE_TABLE_MAX = 2048
"""Fixed points of two coordinates or more are counted from a table of their sorted distances up
to this many points (32 MB); beyond, by a k-d tree."""


def kth_neighbour_distances(
    points: np.ndarray, ks: Sequence[int], compiled: bool | None = None
) -> np.ndarray:
    """(n, len(ks)): the max-norm distance from each point to its k-th nearest other point (0 where
    k or more other points coincide with it). In the plane, with numba installed, the compiled grid
    (:func:`mitool.estimators.grid.kth_distances_plane`: the same distances, 2.5 times less CPU at
    n = 10 000, 3 times at 50 000), where ``compiled`` is True, or where it is None (the default)
    from :data:`PLANE_MIN_POINTS` points whose two coordinates have spreads within a factor
    :data:`PLANE_SPREAD_RATIO` (the grid's cells follow each coordinate's ranks, so a search in
    max-norm over coordinates of very different scales visits many of them). Otherwise a k-d tree
    built by sliding midpoints, without shrinking the nodes: half the building time of the default,
    and the same distances (they do not depend on the tree's shape)."""
    points = np.asarray(points, dtype=np.float64)
    if points.shape[1] == 1:
        return _kth_distances_line(points[:, 0], ks)
    if points.shape[1] == 2 and (_plane_pays(points) if compiled is None else compiled):
        from mitool.estimators import grid

        if grid.available():
            return grid.kth_distances_plane(points, ks)
    from scipy.spatial import cKDTree

    tree = cKDTree(points, balanced_tree=False, compact_nodes=False)
    distances = tree.query(points, k=[k + 1 for k in ks], p=np.inf, workers=chosen_threads())[0]
    return distances.reshape(len(points), len(ks))


def _kth_distances_line(values: np.ndarray, ks: Sequence[int]) -> np.ndarray:
    """kth_neighbour_distances of points on a line: in sorted order the k nearest other points of
    point i and i itself fill a window of k + 1 consecutive points, i - a .. i + k - a for some a in
    0 .. k, so the k-th distance is min over a of max(s_i - s_(i-a), s_(i+k-a) - s_i) (a window that
    leaves the line is infinitely wide, as the tree's missing neighbours are). The same float
    differences as the tree's, so the same distances; O(n k) without a tree (Ross's estimator's
    classes on one coordinate: 2.3 times faster at 54 000 points)."""
    order = np.argsort(values, kind="stable")
    ordered, n, widest = values[order], len(values), max(ks)
    padded = np.concatenate([np.full(widest, -np.inf), ordered, np.full(widest, np.inf)])
    rows = np.arange(n) + widest
    left = [ordered - padded[rows - a] for a in range(widest + 1)]
    right = [padded[rows + b] - ordered for b in range(widest + 1)]
    distances = np.empty((n, len(ks)))
    for column, k in enumerate(ks):
        nearest = np.full(n, np.inf)
        for a in range(k + 1):
            np.minimum(nearest, np.maximum(left[a], right[k - a]), out=nearest)
        distances[order, column] = nearest
    return distances


def _plane_pays(points: np.ndarray) -> bool:
    if len(points) < PLANE_MIN_POINTS:
        return False
    spreads = points.std(axis=0)
    return bool(spreads.min() > 0 and spreads.max() <= PLANE_SPREAD_RATIO * spreads.min())


def kth_distances(points: np.ndarray, k: int) -> np.ndarray:
    """The max-norm distance from each point to its k-th nearest other point (0 where k or more
    other points coincide with it): :func:`kth_neighbour_distances` for one k."""
    return kth_neighbour_distances(points, [k])[:, 0]


def coincident_counts(points: np.ndarray) -> np.ndarray:
    """For each row, how many other rows equal it exactly (every coordinate)."""
    _, inverse, counts = np.unique(points, axis=0, return_inverse=True, return_counts=True)
    return counts[inverse.reshape(-1)] - 1


def _first(
    low: np.ndarray, high: np.ndarray, beyond: Callable[[np.ndarray, np.ndarray], np.ndarray]
) -> np.ndarray:
    """For each i, the first index in [low_i, high_i] where ``beyond(index, i)`` holds (it holds from
    there on): a vectorised binary search."""
    rows = np.arange(len(low))
    while np.any(low < high):
        middle = (low + high) // 2
        holds = beyond(middle, rows) & (low < high)
        high = np.where(holds, middle, high)
        low = np.where(holds | (low >= high), low, middle + 1)
    return low


def _edge(guess: np.ndarray, low: np.ndarray, high: np.ndarray, beyond: Callable) -> np.ndarray:
    """:func:`_first` in [low, high], searched first within 2 of ``guess`` (searchsorted's answer,
    off at most by rounding), the whole range only where that window does not bracket it."""
    near_low, near_high = np.clip(guess - 2, low, high), np.clip(guess + 2, low, high)
    rows = np.arange(len(guess))
    bracketed = ((near_high == high) | beyond(near_high, rows)) & (
        (near_low == low) | ~beyond(np.maximum(near_low - 1, 0), rows)
    )
    found = _first(near_low, near_high, beyond)
    wide = np.flatnonzero(~bracketed)
    if len(wide):
        found[wide] = _first(low[wide], high[wide], lambda index, sub: beyond(index, wide[sub]))
    return found


def _counts_within_sorted(values: np.ndarray, reach: np.ndarray) -> np.ndarray:
    """counts_within for one coordinate: the points within ``reach`` of value i form a run of the
    sorted values; each end is where the trees' own float test, |x_j - x_i| <= reach_i, changes
    (floating-point subtraction is monotone), found near searchsorted's guess. O(n log n). The
    points are taken in sorted order, so that searchsorted's queries come sorted too: at 10^6
    points that made them 3.7 times faster than in the given order, with the same counts."""
    order = np.argsort(values, kind="stable")
    ordered, reach = values[order], reach[order]
    last = len(ordered) - 1
    start = np.searchsorted(ordered, ordered, "left")  # the first value >= x_i

    def after(index: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return ordered[np.minimum(index, last)] - ordered[rows] > reach[rows]

    def inside(index: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return ordered[rows] - ordered[np.minimum(index, last)] <= reach[rows]

    end = _edge(
        np.searchsorted(ordered, ordered + reach, "right"), start, np.full_like(start, len(ordered)), after
    )
    begin = _edge(np.searchsorted(ordered, ordered - reach, "left"), np.zeros_like(start), start, inside)
    counts = np.empty_like(start)
    counts[order] = end - begin - 1
    return counts


def counts_within(points: np.ndarray, radius: np.ndarray, strict: bool = True) -> np.ndarray:
    """For each point i, the number of other points within max-norm distance radius[i] of it
    (strictly within when ``strict``; a zero radius with ``strict=False`` counts the ties)."""
    from scipy.spatial import cKDTree

    reach = np.nextafter(radius, 0.0) if strict else radius  # "strictly within": the float below
    reach = np.maximum(reach, 0.0)
    if points.shape[1] == 1:
        return _counts_within_sorted(points[:, 0], reach)
    tree = cKDTree(points)
    counts = tree.query_ball_point(points, reach, p=np.inf, return_length=True, workers=chosen_threads())
    return np.asarray(counts) - 1


def strict_reach(radius: np.ndarray) -> np.ndarray:
    """Strictly within r as within the float below r, as :func:`counts_within` reads it."""
    return np.maximum(np.nextafter(radius, 0.0), 0.0)


def sorted_counts(
    ordered: np.ndarray, values: np.ndarray, start: np.ndarray, reach: np.ndarray
) -> np.ndarray:
    """For each value v_i (whose first place in ``ordered``, the sorted values, is start_i): how many
    other values o_j satisfy |o_j - v_i| <= reach_i, by the float tests o_j - v_i > reach_i (past the
    right end) and v_i - o_j <= reach_i (inside the left end), both monotone in j. Each end starts
    at searchsorted's guess and is moved until both tests hold at it (rarely more than one step):
    the same counts as :func:`counts_within`, on sorted values kept from one call to the next."""
    size, last = len(ordered), len(ordered) - 1
    end = np.clip(np.searchsorted(ordered, values + reach, "right"), start, size)
    while True:  # end: the first j >= start with o_j - v_i > reach_i, or n
        short = (end < size) & ~(ordered[np.minimum(end, last)] - values > reach)
        long = (end > start) & (ordered[np.maximum(end - 1, 0)] - values > reach)
        if not (short.any() or long.any()):
            break
        end = end + short - long
    begin = np.clip(np.searchsorted(ordered, values - reach, "left"), 0, start)
    while True:  # begin: the first j <= start with v_i - o_j <= reach_i
        short = (begin < start) & ~(values - ordered[begin] <= reach)
        long = (begin > 0) & (values - ordered[np.maximum(begin - 1, 0)] <= reach)
        if not (short.any() or long.any()):
            break
        begin = begin + short - long
    return end - begin - 1


def fixed_points_counter(points: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """For a set of points (n, d) that the permutations do not change: ``count(rows, reach)``, for
    each i the number of other points within max-norm distance reach_i of point rows[i] (<=), where
    ``rows`` holds each point once (a permutation). The structure is built once: for one
    coordinate the sorted values, counted in their order (the searches' keys then come in order,
    twice as fast); for more, up to :data:`DISTANCE_TABLE_MAX` points, each point's distances to
    all the others, sorted (a count is then a binary search: 5-D at n = 400, 0.3 ms where the
    tree's ball queries take 7 ms); beyond, a k-d tree."""
    if points.shape[1] == 1:
        by_value = np.argsort(points[:, 0], kind="stable")
        place = np.empty(len(points), dtype=np.intp)
        place[by_value] = np.arange(len(points))
        ordered = points[by_value, 0]
        start = np.searchsorted(ordered, ordered, "left")

        def count_sorted(rows: np.ndarray, reach: np.ndarray) -> np.ndarray:
            where = place[rows]
            reach_in_order = np.empty(len(points))
            reach_in_order[where] = reach
            return sorted_counts(ordered, ordered, start, reach_in_order)[where]

        return count_sorted
    if len(points) <= DISTANCE_TABLE_MAX:
        return _distance_table_counter(points)
    from scipy.spatial import cKDTree

    tree = cKDTree(points)

    def count(rows: np.ndarray, reach: np.ndarray) -> np.ndarray:
        found = tree.query_ball_point(
            points[rows], reach, p=np.inf, return_length=True, workers=chosen_threads()
        )
        return np.asarray(found) - 1

    return count


def _distance_table_counter(points: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """:func:`fixed_points_counter` by a table: row p holds the max-norm distances from point p to
    every point (itself, 0, included), sorted; the count for point p within reach r is the place of
    the first distance above r, less one, found by a binary search in all rows at once."""
    size = len(points)
    table = np.abs(points[:, None, 0] - points[None, :, 0])
    for column in range(1, points.shape[1]):
        np.maximum(table, np.abs(points[:, None, column] - points[None, :, column]), out=table)
    table.sort(axis=1)

    def count(rows: np.ndarray, reach: np.ndarray) -> np.ndarray:
        low, high = np.zeros(len(rows), dtype=np.intp), np.full(len(rows), size, dtype=np.intp)
        while True:
            open_ = low < high
            if not open_.any():
                return low - 1
            middle = (low + high) // 2
            above = table[rows, np.minimum(middle, size - 1)] > reach
            high = np.where(open_ & above, middle, high)
            low = np.where(open_ & ~above, middle + 1, low)

    return count
