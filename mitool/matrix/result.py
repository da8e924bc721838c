"""The result of :func:`mitool.matrix.mi_matrix`: :class:`MatrixResult`, its pairs, CSV, clustering,
heatmap and summary."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mitool.estimators.base import interval_text
from mitool.independence.tails import TAIL_FLOOR, TailFit

COMBINED_FLOOR = 2 * TAIL_FLOOR
"""The least tail p-value of a pair: Bonferroni over its two statistics' tails, each at least
:data:`mitool.independence.tails.TAIL_FLOOR`; printed as "<2e-12" (the tails say only "below")."""


@dataclass(frozen=True, repr=False)
class MatrixResult:
    """The MI matrix of :func:`mi_matrix`.

    columns: the column names. statistic, ci_low, ci_high, pvalue, qvalue: (p, p) arrays, symmetric,
    NaN on the diagonal: the MI (nats), the estimator's interval, the p-value and the
    Benjamini-Hochberg q-value over the p (p - 1) / 2 pairs. permutations: B. null: "shared",
    "pair" or "mixed" (which pairs used the shared null: ``shared_pairs``); null_values: the shared
    null (empty without one). method: what was done. notes: what was decided, each once. n_rows:
    the rows. seconds: wall time. reused_blocks: blocks read back from ``out`` rather than computed.
    tail: the ``tail`` asked for ("gpd" or "none"); tail_pairs: (p, p) booleans, the pairs whose
    p-value is the shared null's generalized Pareto tail (:func:`mitool.independence.tail_pvalue`)
    rather than a permutation p-value; tail_fit: that tail (None where none was fitted).
    linear: (p, p), the linear statistic of the pairs on the shared null (NaN elsewhere), and
    linear_null_values its shared null, on the same permutations as null_values.
    """

    columns: tuple[str, ...]
    statistic: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    pvalue: np.ndarray
    qvalue: np.ndarray
    permutations: int
    null: str
    method: str
    notes: tuple[str, ...]
    n_rows: int
    seconds: float
    reused_blocks: int = 0
    shared_pairs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=bool))
    null_values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tail: str = "none"
    tail_pairs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=bool))
    tail_fit: TailFit | None = None
    linear_null_values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    linear: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    dequantised: tuple[str, ...] = ()
    """The columns dequantised once so that their pairs share a null (with ``null="shared"``)."""

    def __repr__(self) -> str:
        return (f"MatrixResult(columns={len(self.columns)}, n_rows={self.n_rows}, "
                f"permutations={self.permutations})")  # fmt: skip

    def pairs(self) -> list[tuple[str, str, float, float, float, float, float]]:
        """One row per pair a < b in the columns' order: (column_a, column_b, mi, ci_low, ci_high,
        pvalue, qvalue)."""
        rows = []
        for a, b in zip(*np.triu_indices(len(self.columns), 1), strict=True):
            rows.append((self.columns[a], self.columns[b], *(float(m[a, b]) for m in self._arrays())))
        return rows

    def _arrays(self) -> tuple[np.ndarray, ...]:
        return self.statistic, self.ci_low, self.ci_high, self.pvalue, self.qvalue

    def to_csv(self, path: str | Path) -> Path:
        """Write the pairs (:meth:`pairs`) as CSV, atomically: column_a, column_b, mi, ci_low,
        ci_high, pvalue, qvalue; returns the path."""
        from mitool._infra.files import write_csv

        path = Path(path)
        write_csv(path, ("column_a", "column_b", "mi", "ci_low", "ci_high", "pvalue", "qvalue"), self.pairs())
        return path

    def order(self) -> np.ndarray:
        """The columns in the order of a hierarchical clustering by MI (average linkage on the
        distance 1 - r, r = sqrt(1 - exp(-2 I)) the informational coefficient of correlation
        (Linfoot 1957), which is 0 for independence and tends to 1 with the MI)."""
        from scipy.cluster.hierarchy import leaves_list, linkage
        from scipy.spatial.distance import squareform

        count = len(self.columns)
        if count < 3:
            return np.arange(count)
        mi = np.nan_to_num(np.maximum(self.statistic, 0.0), nan=0.0)
        distance = np.sqrt(np.exp(-2.0 * mi))  # 1 - r <= sqrt(1 - r^2): the same order, no cancellation
        distance = (distance + distance.T) / 2
        np.fill_diagonal(distance, 0.0)
        return leaves_list(linkage(squareform(distance, checks=False), "average"))

    def figure(self, path: str | Path, alpha: float = 0.05) -> Path:
        """The heatmap of the MI (nats, negative estimates shown as 0), rows and columns in the
        clustering's order (:meth:`order`), a dot on each pair with q <= ``alpha``; written
        atomically to ``path`` (png, pdf or svg); returns the path."""
        from mitool.figures import PAGE_WIDTH, paper_style, save

        order = self.order()
        count = len(order)
        shown = np.maximum(self.statistic[np.ix_(order, order)], 0.0)
        found = self.qvalue[np.ix_(order, order)] <= alpha
        with paper_style() as plt:
            size = min(PAGE_WIDTH, max(3.5, 1.2 + 0.16 * count))
            figure, axes = plt.subplots(figsize=(size, size * 0.85))
            image = axes.imshow(shown, cmap="viridis", interpolation="nearest", vmin=0.0)
            rows, cols = np.nonzero(found)
            if len(rows):
                axes.scatter(cols, rows, s=max(1.0, 60.0 / max(count, 1)), c="white", marker="o",
                             linewidths=0, label=f"q <= {alpha:g}")  # fmt: skip
                axes.legend(loc="upper right", fontsize=7, frameon=True, markerscale=2)
            if count <= 60:
                names = [self.columns[index] for index in order]
                axes.set_xticks(range(count), names, rotation=90)
                axes.set_yticks(range(count), names)
            else:
                axes.set_xticks([])
                axes.set_yticks([])
            axes.set_title(f"MI of {count} columns, {self.n_rows} rows (clustered by MI)")
            figure.colorbar(image, ax=axes, label="MI (nats)", shrink=0.8)
            return save(figure, path)

    def __str__(self) -> str:
        """A sentence, and the pairs of highest MI (at most 10)."""
        count = len(self.columns)
        upper = np.triu_indices(count, 1)
        found = int(np.count_nonzero(self.qvalue[upper] <= 0.05))
        tailed = int(np.count_nonzero(self.tail_pairs[upper])) if self.tail_pairs.size else 0
        scheme = f"{self.null} null" + (f"; {tailed} p-value(s) from its GPD tail" if tailed else "")
        lines = [
            f"MI matrix of {count} columns ({len(upper[0])} pairs), {self.n_rows} rows; {self.permutations} "
            f"permutations ({scheme}); {found} pair(s) at q <= 0.05."
        ]
        best = sorted(self.pairs(), key=lambda row: -row[2] if math.isfinite(row[2]) else math.inf)[:10]
        if best:
            width = max(6, *(len(row[0]) + len(row[1]) + 3 for row in best))
            lines.append(f"{'pair':<{width}}  {'MI (nats)':>9}  {'interval':>17}  {'p':>7}  {'q':>7}")
            for a, b, mi, low, high, p, q in best:
                interval = interval_text(low, high)
                shown = f"<{COMBINED_FLOOR:.0e}" if p <= COMBINED_FLOOR else f"{p:.3g}"
                lines.append(f"{a + ' ~ ' + b:<{width}}  {mi:>9.4f}  {interval:>17}  {shown:>7}  {q:>7.3g}")
        return "\n".join(lines)
