"""The benchmark's summary table and figures, drawn from OUT/results.csv only.

* :func:`summary_markdown`: per sample size, the mean error (mean over seeds of estimate - true MI)
  of each estimator on each task, the best per task in bold; then per estimator the mean absolute
  error over all tasks and seeds, how many tasks of at most 2 nats it gets within the target
  (max(0.1 nats, 10% of the truth), by its mean over seeds), how often its interval holds the truth
  on those tasks and, where it gives ``bias_high``, how often [ci_low, bias_high] does on all tasks,
  how many estimates ran away, and the wall time.
* :func:`figure_errors`: one panel per family, at a paper page's width: each task's mean error
  and the seeds' range per estimator, the truth at 0 and the target's band;
* :func:`figure_heatmap`: tasks x estimators, colour and number the mean error (nats).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mitool._infra.files import atomic_write_text, read_csv
from mitool.figures import COLUMN_WIDTH, PAGE_WIDTH, paper_style, save

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "TARGET_MAX_MI",
    "figure_errors",
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
        self.bias_high: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.truth: dict[str, float] = {}
        self.family: dict[str, str] = {}
        self.seconds: dict[str, float] = defaultdict(float)
        self.tasks: list[str] = []
        self.estimators: list[str] = []
        for row in rows:
            task, estimator = row["task"], row["estimator"]
            self.tasks += [task] if task not in self.tasks else []
            self.estimators += [estimator] if estimator not in self.estimators else []
            self.truth[task] = float(row["true_mi"])
            self.family[task] = row.get("family", "") or "tasks"
            point = (_float(row["estimate"]), _float(row["ci_low"]), _float(row["ci_high"]))
            self.estimates[task, estimator].append(point)
            self.bias_high[task, estimator].append(_float(row.get("bias_high") or ""))
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

    def families(self) -> dict[str, list[str]]:
        """The tasks of each family, in the table's order."""
        grouped: dict[str, list[str]] = defaultdict(list)
        for task in self.tasks:
            grouped[self.family[task]].append(task)
        return dict(grouped)

    def worst(self, estimator: str) -> tuple[str, float]:
        """The task with the largest |mean error| and that error."""
        errors = {t: self.mean(t, estimator) - self.truth[t] for t in self.tasks}
        finite = {t: e for t, e in errors.items() if not math.isnan(e)}
        task = max(finite, key=lambda t: abs(finite[t])) if finite else ""
        return task, finite.get(task, math.nan)

    def coverage(self, estimator: str) -> tuple[int, int]:
        """(estimates whose interval holds the truth, estimates with an interval) over the tasks of
        at most 2 nats that the estimator gets within the target (an interval says nothing of a
        bias it does not claim to cover)."""
        inside = total = 0
        for task in self.tasks:
            if self.truth[task] > TARGET_MAX_MI or not within_target(
                self.mean(task, estimator), self.truth[task]
            ):
                continue
            for _, low, high in self.estimates.get((task, estimator), []):
                if not (math.isnan(low) or math.isnan(high)):
                    total += 1
                    inside += low <= self.truth[task] <= high
        return inside, total

    def coverage_with_bias(self, estimator: str) -> tuple[int, int] | None:
        """(estimates whose [ci_low, bias_high] holds the truth, estimates with an interval) over
        every task: ``bias_high`` allows for the bound's downward bias (results.csv's column; the
        plain interval's upper end where an estimate has none); None when no estimate has one."""
        highs = [high for task in self.tasks for high in self.bias_high.get((task, estimator), [])]
        if all(math.isnan(high) for high in highs):
            return None
        inside = total = 0
        for task in self.tasks:
            points = self.estimates.get((task, estimator), [])
            for (_, low, high), bias_high in zip(points, self.bias_high[task, estimator], strict=True):
                upper = high if math.isnan(bias_high) else bias_high
                if not (math.isnan(low) or math.isnan(upper)):
                    total += 1
                    inside += low <= self.truth[task] <= upper
        return inside, total

    def family_error(self, family: str, estimator: str) -> float:
        """Mean absolute error over the family's tasks and seeds."""
        errors = [abs(p[0] - self.truth[t]) for t in self.families()[family]
                  for p in self.estimates.get((t, estimator), [])]  # fmt: skip
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
        return "no value" if (task, estimator) in table.estimates else "-"
    text = f"{mean - table.truth[task]:+.3f}"
    if table.truth[task] <= TARGET_MAX_MI and not within_target(mean, table.truth[task]):
        text += " ✗"
    return f"**{text}**" if estimator == best else text


def _size_section(n: int, table: _Table, seeds: int) -> list[str]:
    header = f"## n = {n} pairs, {seeds} seed{'s' if seeds != 1 else ''}"
    lines = [header, "", "| task | MI | " + " | ".join(table.estimators) + " |"]
    lines.append("| --- | ---: | " + " | ".join("---:" for _ in table.estimators) + " |")
    for task in table.tasks:
        errors = {e: abs(table.mean(task, e) - table.truth[task]) for e in table.estimators}
        finite = {e: v for e, v in errors.items() if not math.isnan(v)}
        best = min(finite, key=finite.get) if finite else None
        cells = [_error_cell(table, task, e, best) for e in table.estimators]
        lines.append(f"| {task} | {table.truth[task]:.3f} | " + " | ".join(cells) + " |")
    count = {e: sum(len(table.estimates.get((t, e), [])) for t in table.tasks) for e in table.estimators}
    footer = {
        "mean absolute error (nats)": [f"{table.mean_absolute_error(e):.3f}" for e in table.estimators],
        f"tasks <= {TARGET_MAX_MI:g} nats within target": [
            "{}/{}".format(*table.targets(e)) for e in table.estimators
        ],
        "worst task (mean error)": ["{} ({:+.3f})".format(*table.worst(e)) for e in table.estimators],
        "truth inside the interval (tasks within target)": [
            _share(*table.coverage(e)) for e in table.estimators
        ],
        "truth inside [ci_low, bias_high] (all tasks)": [
            _share(*shares) if (shares := table.coverage_with_bias(e)) else "-" for e in table.estimators
        ],
        "estimates without a value (ran away or refused)": [str(table.runaways(e)) for e in table.estimators],
        "seconds per estimate": [f"{table.seconds[e] / max(count[e], 1):.2f}" for e in table.estimators],
        "wall time (s, all tasks and seeds)": [f"{table.seconds[e]:.0f}" for e in table.estimators],
    }
    lines += [f"| {label} | | " + " | ".join(values) + " |" for label, values in footer.items()]
    lines += ["", "Mean absolute error by family (nats):", "",
              "| family | tasks | " + " | ".join(table.estimators) + " |",
              "| --- | ---: | " + " | ".join("---:" for _ in table.estimators) + " |"]  # fmt: skip
    for family, tasks in table.families().items():
        errors = " | ".join(f"{table.family_error(family, e):.3f}" for e in table.estimators)
        lines.append(f"| {family} | {len(tasks)} | {errors} |")
    return lines + [""]


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "-"


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


def short_labels(names: Sequence[str]) -> list[str]:
    """The names without the words at the start and at the end that they all share (a family's
    tasks differ in their middle: "spiral-multinormal-sparse-3-3-2-2.0" -> "multinormal-sparse-3-3")."""
    words = [name.split("-") for name in names]
    if len(words) < 2:
        return list(names)
    start = 0
    while all(len(w) > start + 1 and w[start] == words[0][start] for w in words):
        start += 1
    end = 0
    while all(len(w) > start + end + 1 and w[-1 - end] == words[0][-1 - end] for w in words):
        end += 1
    return ["-".join(w[start : len(w) - end]) for w in words]


def wrapped(name: str, width: int, breaks: str = ":") -> str:
    """A name broken after the matches of the pattern ``breaks`` into lines of at most ``width``
    characters where it can be ("infonce:ensemble=1:radial=false" at 20 ->
    "infonce:ensemble=1:\nradial=false"); a part longer than ``width`` keeps a line of its own."""
    lines = [""]
    for part in re.split(f"(?<={breaks})", name):
        if lines[-1] and len(lines[-1]) + len(part) > width:
            lines.append("")
        lines[-1] += part
    return "\n".join(lines)


def _longest_line(labels: Sequence[str]) -> int:
    return max(len(line) for label in labels for line in label.splitlines())


def figure_errors(table: _Table, n: int) -> Figure:
    """One panel per family, at a paper column's width (3.5 in; fonts of 8 pt, long task labels on
    two lines): each task's mean error over the seeds (estimate minus truth, nats; the bar spans
    the seeds' lowest to highest), one marker per estimator (hollow at the edge when beyond the
    axis); the truth is the vertical line at 0, the grey band the target max(0.1, 10%) of each
    task."""
    families = table.families()
    labels = {family: _task_labels(table, tasks) for family, tasks in families.items()}
    # each row of a panel as tall as its family's longest label
    heights = [len(tasks) * _lines(labels[family]) for family, tasks in families.items()]
    means = [table.mean(t, e) - table.truth[t] for t in table.tasks for e in table.estimators]
    means = [value for value in means if not math.isnan(value)]
    limits = (max(min([*means, -0.12]), -_REACH) - 0.03, min(max([*means, 0.12]), _REACH) + 0.03)
    names = [wrapped(e, _LEGEND_WIDTH) for e in table.estimators]
    columns = max(1, min(3, _LINE_CHARACTERS // (_longest_line(names) + 4)))
    legend_lines = math.ceil(len(names) / columns) * _lines(names)
    with paper_style() as plot:
        figure, axes = plot.subplots(
            len(families), 1, sharex=True,
            figsize=(COLUMN_WIDTH - 0.1,  # the labels reach out
                     1.0 + 0.16 * legend_lines + 0.5 * len(families) + 0.14 * sum(heights)),
            gridspec_kw={"height_ratios": [h + 1.2 for h in heights]}, squeeze=False,
        )  # fmt: skip
        for axis, (family, tasks) in zip(axes[:, 0], families.items(), strict=True):
            _family_panel(axis, table, family, tasks, labels[family], limits)
        handles = [
            plot.Line2D([], [], marker=_MARKERS[k % len(_MARKERS)], color=f"C{k}", linestyle="", label=name)
            for k, name in enumerate(names)
        ]
        # above the first panel's title: 1.6 font sizes over its top
        axes[0, 0].legend(handles=handles, loc="lower right", bbox_to_anchor=(1, 1), ncol=columns,
                          frameon=False, borderaxespad=1.6, handletextpad=0.2, columnspacing=0.8)  # fmt: skip
        axes[-1, 0].set_xlabel(f"estimate − true MI (nats), n = {n}")
        axes[-1, 0].set_xlim(*limits)
        figure.tight_layout(h_pad=0.4)
    return figure


def _task_labels(table: _Table, tasks: list[str]) -> list[str]:
    """A family's task labels: what their names do not share, and the true MI."""
    return [wrapped(f"{label} ({table.truth[t]:.2f})", _TASK_LABEL_WIDTH, _BEFORE_A_WORD)
            for label, t in zip(short_labels(tasks), tasks, strict=True)]  # fmt: skip


def _lines(labels: Sequence[str]) -> int:
    return max(label.count("\n") + 1 for label in labels)


_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
_REACH = 0.6
"""The error axis ends at the means' range, at most +-0.6 nats; a mean beyond is drawn hollow at the edge."""

_LEGEND_WIDTH = 36
"""Characters of an estimator's name on one line of the errors figure's legend and of the heatmap's
column labels."""

_LINE_CHARACTERS = 56
"""Characters of 8 pt text across a column (3.5 in): the errors figure's legend has as many
columns (at most 3) as fit."""

_TASK_LABEL_WIDTH = 28
"""Characters of a task's label on one line of the errors figure (longer ones wrap after a '-'
that a word follows, not inside the dimensions "3-3-2")."""

_BEFORE_A_WORD = "-(?=[A-Za-z_])"


def _family_panel(
    axis, table: _Table, family: str, tasks: list[str], labels: list[str], limits: tuple[float, float]
) -> None:
    rows = np.arange(len(tasks))
    for row, task in zip(rows, tasks, strict=True):
        tolerance = max(0.1, 0.1 * table.truth[task])
        axis.fill_betweenx([row - 0.45, row + 0.45], -tolerance, tolerance, color="0.88", linewidth=0)
    axis.axvline(0.0, color="black", linewidth=0.8)
    spread = 0.5 / max(len(table.estimators), 1)
    for k, estimator in enumerate(table.estimators):
        for row, task in zip(rows, tasks, strict=True):
            values = [p[0] - table.truth[task] for p in table.estimates.get((task, estimator), [])]
            values = [v for v in values if not math.isnan(v)]
            if not values:
                continue
            y = row + (k - (len(table.estimators) - 1) / 2) * spread
            clipped = np.clip(values, *limits)
            axis.plot([clipped.min(), clipped.max()], [y, y], color=f"C{k}", linewidth=0.8)
            mean = float(np.mean(values))
            inside = limits[0] <= mean <= limits[1]
            style = {"marker": _MARKERS[k % len(_MARKERS)], "markersize": 3.5, "linestyle": ""}
            face = f"C{k}" if inside else "white"
            axis.plot(np.clip(mean, *limits), y, color=f"C{k}", markerfacecolor=face, **style)
    axis.set_yticks(rows, labels)
    axis.set_ylim(len(tasks) - 0.5, -0.5)
    axis.set_title(family, loc="left", pad=2)
    axis.tick_params(axis="y", length=0)


def figure_heatmap(table: _Table, n: int) -> Figure:
    """Tasks x estimators (fonts of 8 pt, at most a page's width): each cell the mean error over the
    seeds (nats), coloured from -0.5 (blue, under) through 0 (white, the truth) to +0.5 (red,
    over); a cell outside the target max(0.1, 10%) is marked with a dot after its number."""
    error = np.array([[table.mean(t, e) - table.truth[t] for e in table.estimators] for t in table.tasks])
    with paper_style() as plot:
        width = min(PAGE_WIDTH, 2.8 + 0.7 * len(table.estimators))
        figure, axis = plot.subplots(figsize=(width, 0.9 + 0.17 * len(table.tasks)))
        image = axis.imshow(np.clip(error, -0.5, 0.5), cmap="RdBu_r", vmin=-0.5, vmax=0.5, aspect="auto")
        for (row, column), value in np.ndenumerate(error):
            task = table.tasks[row]
            missed = not math.isnan(value) and not within_target(value + table.truth[task], table.truth[task])
            text = "n/a" if math.isnan(value) else f"{value:+.2f}" + ("•" if missed else "")
            colour = "white" if abs(value) > 0.3 else "black"
            axis.text(column, row, text, ha="center", va="center", color=colour)
        labels = [wrapped(e, _LEGEND_WIDTH) for e in table.estimators]
        axis.set_xticks(range(len(table.estimators)), labels)
        axis.xaxis.tick_top()
        if _longest_line(labels) > 10:  # wider than a column
            axis.tick_params(axis="x", labelrotation=45)
            for label in axis.get_xticklabels():
                label.set(ha="left", rotation_mode="anchor")
        axis.set_yticks(range(len(table.tasks)), table.tasks)
        figure.colorbar(image, ax=axis, fraction=0.05, pad=0.02, label=f"mean error (nats), n = {n}")
    return figure


def redraw(out: Path, file_format: str = "png") -> list[Path]:
    """summary.md and the figures of OUT/results.csv (one estimates and one heat map per size)."""
    out = Path(out)
    rows = read_csv(out / "results.csv")
    atomic_write_text(out / "summary.md", summary_markdown(rows))
    written = [out / "summary.md"]
    for n, table in _by_size(rows).items():
        written.append(save(figure_errors(table, n), out / f"errors_n{n}.{file_format}"))
        written.append(save(figure_heatmap(table, n), out / f"heatmap_n{n}.{file_format}"))
    return written
