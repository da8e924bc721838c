"""The figures of a vision sweep, drawn from OUT/summary.csv's rows and the runs' metrics.

* ``knn_vs_k.png``: kNN top-1 and the mean NPC multiplier q_B against the number of negatives K
  (log axis), one line per method and loss (and whatever else varies: alpha, batch, temperature),
  the mean over seeds with the seeds' range as an error bar (EqCo's claim: with eqco the kNN line
  stays flat as K shrinks);
* ``knn_vs_batch.png``: the same two panels against the batch size (DCL's claim: dcl gains most
  at small batches, where q_B of infonce is far from 1);
* ``curves.png``: loss, MI estimate (nats) and NPC of every run against the images seen, on
  shared axes (one colour per line of the figures above, one line style per seed).
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mitool.figures import pyplot, save
from mitool.vision.records import read_records
from mitool.vision.sweep.summary import summary_rows

__all__ = ["line_label", "plot_sweep"]

_SETTINGS = ("method", "loss", "negatives", "alpha", "batch_size", "temperature")
_SHORT = {"negatives": "K", "alpha": "alpha", "batch_size": "batch", "temperature": "tau"}
_STYLES = ("-", "--", ":", "-.")


def line_label(row: dict[str, Any], varying: Sequence[str], x_axis: str | None) -> str:
    """``method loss`` plus the settings that vary between the runs (except ``x_axis``)."""
    parts = [f"{row['method']} {row['loss']}"]
    for key in varying:
        if key not in ("method", "loss", x_axis) and row[key] is not None:
            parts.append(
                f"{_SHORT[key]} {row[key]:g}" if isinstance(row[key], float) else f"{_SHORT[key]} {row[key]}"
            )
    return ", ".join(parts)


def _varying(rows: list[dict[str, Any]]) -> list[str]:
    return [key for key in _SETTINGS if len({row[key] for row in rows}) > 1]


def _lines(rows: list[dict[str, Any]], x_axis: str, value: str) -> dict[str, dict[float, list[float]]]:
    """{label: {x: [value of each seed]}} over the rows that have both x and a finite value."""
    varying = _varying(rows)
    lines: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        number = row.get(value)
        if row[x_axis] is None or number is None or not math.isfinite(number):
            continue
        lines[line_label(row, varying, x_axis)][row[x_axis]].append(number)
    return lines


def _draw_lines(
    axis, lines: dict[str, dict[float, list[float]]], scale: float, colours: dict[str, Any]
) -> None:
    for label, points in sorted(lines.items()):
        xs = sorted(points)
        means = [scale * sum(points[x]) / len(points[x]) for x in xs]
        low = [mean - scale * min(points[x]) for mean, x in zip(means, xs, strict=True)]
        high = [scale * max(points[x]) - mean for mean, x in zip(means, xs, strict=True)]
        axis.errorbar(
            xs, means, yerr=[low, high], marker="o", capsize=3, label=label, color=colours.get(label)
        )
    if lines:
        axis.set_xscale("log", base=2)
        axis.legend(fontsize=7)
    else:
        axis.text(0.5, 0.5, "no runs", ha="center", va="center", transform=axis.transAxes)
    axis.grid(alpha=0.3)


def _colours(labels: Sequence[str]) -> dict[str, Any]:
    plt = pyplot()
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return {label: cycle[index % len(cycle)] for index, label in enumerate(sorted(set(labels)))}


def _against(rows: list[dict[str, Any]], axis_key: str, axis_label: str, path: Path) -> Path:
    """Two panels against ``axis_key`` (log axis): kNN top-1 and the mean NPC multiplier q_B."""
    plt = pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    knn, npc = _lines(rows, axis_key, "knn_top1"), _lines(rows, axis_key, "npc_mean")
    colours = _colours([*knn, *npc])
    _draw_lines(axes[0], knn, 100.0, colours)
    _draw_lines(axes[1], npc, 1.0, colours)
    titles = ("kNN top-1 (%), mean and range over seeds", "mean NPC multiplier q_B over the run")
    for axis, title in zip(axes, titles, strict=True):
        axis.set_xlabel(axis_label)
        axis.set_title(title)
    return save(figure, path)


def _curves(rows: list[dict[str, Any]], out: Path, path: Path) -> Path:
    plt = pyplot()
    varying = _varying(rows)
    labels = [line_label(row, varying, None) for row in rows]
    colours = _colours(labels)
    seeds = sorted({row["seed"] for row in rows})
    figure, axes = plt.subplots(1, 3, figsize=(15, 4), sharex=True)
    for row, label in zip(rows, labels, strict=True):
        records = [record for record in read_records(str(out / "runs" / row["name"])) if "loss" in record]
        images = [record["step"] * row["batch_size"] / 1000 for record in records]
        style = _STYLES[seeds.index(row["seed"]) % len(_STYLES)]
        for axis, key in zip(axes, ("loss", "mi", "npc"), strict=True):
            values = [record[key] for record in records]
            first_seed = row["seed"] == seeds[0]
            axis.plot(images, values, style, color=colours[label], label=label if first_seed else None, lw=1)
    for axis, title in zip(axes, ("loss", "MI estimate (nats)", "NPC multiplier q_B"), strict=True):
        axis.set_title(title)
        axis.set_xlabel("images seen (thousands)")
        axis.grid(alpha=0.3)
    if rows:
        axes[0].legend(fontsize=7)
    return save(figure, path)


def plot_sweep(out: str | os.PathLike) -> list[Path]:
    """Draw the three figures of the sweep in OUT from its finished runs; returns their paths."""
    out = Path(out)
    rows = [row for row in summary_rows(out) if row["status"] == "done"]
    return [
        _against(
            [row for row in rows if row["negatives"] is not None],
            "negatives",
            "negatives K",
            out / "knn_vs_k.png",
        ),
        _against(rows, "batch_size", "batch size", out / "knn_vs_batch.png"),
        _curves(rows, out, out / "curves.png"),
    ]
