"""The benchmark's summary table and figures, drawn from OUT/results.csv only.

* :func:`summary_markdown`: per sample size, the mean error (mean over seeds of estimate - true MI)
  of each estimator on each task, the best per task in bold; then per estimator the mean absolute
  error over all tasks and seeds, how many tasks of at most 2 nats it gets within the target
  (max(0.1 nats, 10% of the truth), by its mean over seeds), how many estimates ran away, and the
  wall time.
* :func:`figure_estimates`: one panel per task: each estimator's estimates (one point per seed, with
  its confidence interval) against the true MI (dashed line).
* :func:`figure_heatmap`: tasks x estimators, colour and number the mean estimate over the true MI,
  as the "Beyond Normal" benchmark draws it (1 is right; below 1 an underestimate).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from mitool.figures import save  # noqa: E402
from mitool.files import atomic_write_text, read_csv  # noqa: E402

__all__ = [
    "TARGET_MAX_MI",
    "figure_estimates",
    "figure_heatmap",
    "redraw",
    "summary_markdown",
    "within_target",
]

TARGET_MAX_MI = 2.0
"""The target applies to tasks of at most this many nats."""


def within_target(mean_estimate: float, true_mi: float) -> bool:
    """|mean estimate - truth| <= max(0.1 nats, 10% of the truth)."""
    return abs(mean_estimate - true_mi) <= max(0.1, 0.1 * true_mi)


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


class _Table:
    """results.csv of one sample size: estimates by (task, estimator), the tasks and estimators in
    their order, the true MI of each task and the seconds of each estimator."""

    def __init__(self, rows: Sequence[dict[str, str]]) -> None:
        self.estimates: dict[tuple[str, str], list[tuple[float, float, float]]] = defaultdict(list)
        self.truth: dict[str, float] = {}
        self.seconds: dict[str, float] = defaultdict(float)
        self.tasks: list[str] = []
        self.estimators: list[str] = []
        for row in rows:
            task, estimator = row["task"], row["estimator"]
            self.tasks += [task] if task not in self.tasks else []
            self.estimators += [estimator] if estimator not in self.estimators else []
            self.truth[task] = float(row["true_mi"])
            point = (_float(row["estimate"]), _float(row["ci_low"]), _float(row["ci_high"]))
            self.estimates[task, estimator].append(point)
            self.seconds[estimator] += _float(row["seconds"])

    def mean(self, task: str, estimator: str) -> float:
        """Mean estimate over the seeds (NaN when a seed ran away or the cell is missing)."""
        values = [point[0] for point in self.estimates.get((task, estimator), [])]
        return float(np.mean(values)) if values else math.nan

    def runaways(self, estimator: str) -> int:
        return sum(math.isnan(p[0]) for task in self.tasks for p in self.estimates.get((task, estimator), []))

    def mean_absolute_error(self, estimator: str) -> float:
        errors = [
            abs(p[0] - self.truth[t]) for t in self.tasks for p in self.estimates.get((t, estimator), [])
        ]
        return float(np.mean(errors)) if errors else math.nan

    def targets(self, estimator: str) -> tuple[int, int]:
        """(tasks of at most 2 nats within the target, tasks of at most 2 nats)."""
        eligible = [task for task in self.tasks if self.truth[task] <= TARGET_MAX_MI]
        met = sum(within_target(self.mean(task, estimator), self.truth[task]) for task in eligible)
        return met, len(eligible)


def _by_size(rows: Sequence[dict[str, str]]) -> dict[int, _Table]:
    sizes: dict[int, list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        sizes[int(row["n"])].append(row)
    return {n: _Table(chosen) for n, chosen in sorted(sizes.items())}


def _error_cell(table: _Table, task: str, estimator: str, best: str | None) -> str:
    mean = table.mean(task, estimator)
    if math.isnan(mean):
        return "ran away" if (task, estimator) in table.estimates else "-"
    text = f"{mean - table.truth[task]:+.3f}"
    if table.truth[task] <= TARGET_MAX_MI and not within_target(mean, table.truth[task]):
        text += " ✗"
    return f"**{text}**" if estimator == best else text


def _size_section(n: int, table: _Table, seeds: int) -> list[str]:
    lines = [f"## n = {n} pairs, {seeds} seeds", "", "| task | MI | " + " | ".join(table.estimators) + " |"]
    lines.append("| --- | ---: | " + " | ".join("---:" for _ in table.estimators) + " |")
    for task in table.tasks:
        errors = {e: abs(table.mean(task, e) - table.truth[task]) for e in table.estimators}
        finite = {e: v for e, v in errors.items() if not math.isnan(v)}
        best = min(finite, key=finite.get) if finite else None
        cells = [_error_cell(table, task, e, best) for e in table.estimators]
        lines.append(f"| {task} | {table.truth[task]:.3f} | " + " | ".join(cells) + " |")
    footer = {
        "mean absolute error (nats)": [f"{table.mean_absolute_error(e):.3f}" for e in table.estimators],
        f"tasks <= {TARGET_MAX_MI:g} nats within target": [
            "{}/{}".format(*table.targets(e)) for e in table.estimators
        ],
        "estimates that ran away": [str(table.runaways(e)) for e in table.estimators],
        "wall time (s, all tasks and seeds)": [f"{table.seconds[e]:.0f}" for e in table.estimators],
    }
    lines += [f"| {label} | | " + " | ".join(values) + " |" for label, values in footer.items()]
    return lines + [""]


def summary_markdown(rows: Sequence[dict[str, str]]) -> str:
    """The summary table(s) of results.csv as markdown (see the module)."""
    lines = [
        "# MI benchmark summary",
        "",
        "Each number is the mean error (mean over seeds of the estimate minus the true MI, nats); the best "
        "per task (smallest absolute mean error) is in bold; ✗ marks a task of at most 2 nats missed by "
        "the target |mean error| <= max(0.1, 10% of the truth). The mean absolute error is over all "
        "tasks and seeds.",
        "",
    ]
    for n, table in _by_size(rows).items():
        seeds = max((len(v) for v in table.estimates.values()), default=0)
        lines += _size_section(n, table, seeds)
    return "\n".join(lines)


def figure_estimates(table: _Table, n: int) -> plt.Figure:
    """One panel per task: every seed's estimate with its interval, per estimator, and the truth."""
    columns = min(6, len(table.tasks))
    rows = math.ceil(len(table.tasks) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(2.9 * columns, 2.3 * rows), squeeze=False)
    positions = np.arange(len(table.estimators))
    for axis, task in zip(axes.flat, table.tasks, strict=False):
        for position, estimator in zip(positions, table.estimators, strict=True):
            points = np.array(table.estimates.get((task, estimator), []), dtype=float).reshape(-1, 3)
            offsets = position + np.linspace(-0.25, 0.25, len(points)) if len(points) > 1 else [position]
            error = np.abs(points[:, 1:] - points[:, :1]).T
            style = {"fmt": "o", "markersize": 2.5, "color": f"C{position % 10}", "elinewidth": 0.8}
            axis.errorbar(offsets, points[:, 0], yerr=error, **style)
        axis.axhline(table.truth[task], color="black", linestyle="--", linewidth=1)
        axis.set_title(f"{task}\nI = {table.truth[task]:.3f}", fontsize=7)
        axis.set_xticks(positions, table.estimators, rotation=60, ha="right", fontsize=6)
        axis.tick_params(axis="y", labelsize=6)
    for axis in list(axes.flat)[len(table.tasks) :]:
        axis.set_visible(False)
    figure.suptitle(f"MI estimates against the truth (dashed), n = {n} pairs", fontsize=10)
    figure.tight_layout()
    caption = "Points: one estimate per seed with its confidence interval; dashed: the true MI (nats)."
    figure.text(0.01, -0.005, caption, fontsize=7, color="0.25")
    return figure


def figure_heatmap(table: _Table, n: int) -> plt.Figure:
    """Tasks x estimators: mean estimate / true MI, coloured from 0 (blue) through 1 (white) to 2 (red)."""
    ratio = np.array([[table.mean(t, e) / table.truth[t] for e in table.estimators] for t in table.tasks])
    figure, axis = plt.subplots(figsize=(2.4 + 0.75 * len(table.estimators), 1.0 + 0.26 * len(table.tasks)))
    image = axis.imshow(np.clip(ratio, 0, 2), cmap="RdBu_r", vmin=0, vmax=2, aspect="auto")
    for (row, column), value in np.ndenumerate(ratio):
        text = "n/a" if math.isnan(value) else f"{value:.2f}"
        axis.text(column, row, text, ha="center", va="center", fontsize=6)
    axis.set_xticks(range(len(table.estimators)), table.estimators, rotation=45, ha="right", fontsize=7)
    labels = [f"{t} ({table.truth[t]:.2f})" for t in table.tasks]
    axis.set_yticks(range(len(table.tasks)), labels, fontsize=6)
    figure.colorbar(image, ax=axis, fraction=0.04, label="mean estimate / true MI")
    axis.set_title(f"Mean estimate over true MI (true MI in brackets), n = {n}", fontsize=9)
    return figure


def redraw(out: Path, file_format: str = "png") -> list[Path]:
    """summary.md and the figures of OUT/results.csv (one estimates and one heat map per size)."""
    out = Path(out)
    rows = read_csv(out / "results.csv")
    atomic_write_text(out / "summary.md", summary_markdown(rows))
    written = [out / "summary.md"]
    for n, table in _by_size(rows).items():
        written.append(save(figure_estimates(table, n), out / f"estimates_n{n}.{file_format}"))
        written.append(save(figure_heatmap(table, n), out / f"heatmap_n{n}.{file_format}"))
    return written
