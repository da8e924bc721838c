"""Figures of the toy study, drawn from its CSV files only (so ``mitool toy plot`` can redraw them).

* :func:`plot_against_k`: bias, std or gradient norm against K (log2 axis), one line per bound and
  critic, one panel per true MI; cells where some seed diverged get a red cross.
* :func:`plot_staircase`: the estimate at every step (faint points) with its exponential moving
  average, the true-MI staircase and InfoNCE's cap log(K + 1), as in Poole et al. (2019), Fig. 2.
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

from mitool import checks  # noqa: E402
from mitool.files import atomic_write_bytes, read_csv  # noqa: E402

__all__ = ["FORMATS", "check_format", "plot_against_k", "plot_staircase", "redraw"]

FORMATS: tuple[str, ...] = ("png", "pdf", "svg")
"""Figure formats: png (raster, the default) and the vector formats pdf and svg."""


def check_format(file_format: str) -> str:
    """``file_format`` when it is one of :data:`FORMATS` (ParameterError otherwise)."""
    return checks.choice("file_format", file_format, FORMATS)


_COLOURS = {
    "infonce": "tab:blue",
    "eqco": "tab:orange",
    "dcl": "tab:green",
    "dclw": "tab:olive",
    "nwj": "tab:red",
    "dv": "tab:purple",
    "js": "tab:brown",
    "smile": "tab:pink",
}
_STYLES = {"separable": "-", "cosine": "--", "concat": ":", "bilinear": "-."}
_LABELS = {
    "bias": "bias (nats): mean estimate - true MI",
    "std": "std of the estimate (nats)",
    "grad_norm": "gradient norm ||d loss / d theta||",
}


def _save(figure: plt.Figure, path: Path) -> None:
    import io

    buffer = io.BytesIO()
    figure.savefig(buffer, format=path.suffix.lstrip("."), dpi=150, bbox_inches="tight")
    plt.close(figure)
    atomic_write_bytes(path, buffer.getvalue())


def _float(text: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


BIAS_CEILING = 3.0
"""Bias panels show at most this many nats above the truth; larger (runaway) values are drawn as
triangles on the upper edge, labelled with their value."""


def plot_against_k(summary: Sequence[dict[str, str]], column: str, path: Path, title: str = "") -> None:
    """One panel per true MI; x = K (log2), y = ``column``; red crosses on the upper edge mark cells
    where some seed diverged (those seeds are left out of the statistics)."""
    stages = sorted({_float(row["true_mi"]) for row in summary})
    if not stages:
        raise ValueError(f"no rows to plot for {path.name}")
    figure, axes = plt.subplots(1, len(stages), figsize=(3.6 * len(stages) + 1.5, 4.0), squeeze=False)
    lines: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for row in summary:
        lines[(row["estimator"], row["critic"])].append(row)
    all_k = np.array(sorted({int(r["negatives"]) for r in summary}), dtype=float)
    for axis, true_mi in zip(axes[0], stages, strict=True):
        panel_values = []
        for (estimator, critic), rows in sorted(lines.items()):
            rows = sorted(
                (r for r in rows if _float(r["true_mi"]) == true_mi), key=lambda r: int(r["negatives"])
            )
            ks = np.array([int(r["negatives"]) for r in rows])
            values = np.array([_float(r[column]) for r in rows])
            colour = _COLOURS.get(estimator, "black")
            panel_values += list(values[np.isfinite(values)])
            shown = values
            if column == "bias":
                shown = np.where(values > BIAS_CEILING, np.nan, values)
                for k, value in zip(ks, values, strict=True):
                    if np.isfinite(value) and value > BIAS_CEILING:
                        axis.plot([k], [BIAS_CEILING], "^", color=colour, markersize=7)
                        axis.annotate(f"{value:.0f}", (k, BIAS_CEILING), textcoords="offset points",
                                      xytext=(0, -11), ha="center", fontsize=7, color=colour)  # fmt: skip
            axis.plot(ks, shown, _STYLES.get(critic, "-"), marker="o", markersize=3, color=colour,
                      label=f"{estimator} ({critic})")  # fmt: skip
            diverged = np.array([int(r.get("diverged") or 0) > 0 for r in rows])
            if diverged.any():
                axis.plot(ks[diverged], np.full(diverged.sum(), 0.96), "x", color="red", markersize=9, mew=2,
                          transform=axis.get_xaxis_transform())  # fmt: skip
        if column == "bias":
            axis.axhline(0.0, color="black", linewidth=0.8)
            axis.plot(all_k, np.log(all_k + 1) - true_mi, color="gray", linestyle=":", label="log(K+1) - I")
            low = min([-true_mi] + panel_values) - 0.5
            axis.set_ylim(low, BIAS_CEILING + 0.8)
        elif any(v > 0 for v in panel_values):
            axis.set_yscale("log")
        axis.set_xscale("log", base=2)
        axis.set_title(f"true MI = {true_mi:g} nats")
        axis.set_xlabel("K (negatives per anchor)")
        axis.grid(alpha=0.3)
    axes[0][0].set_ylabel(_LABELS.get(column, column))
    handles, labels = axes[0][0].get_legend_handles_labels()
    if any(int(r.get("diverged") or 0) > 0 for r in summary):
        handles.append(plt.Line2D([], [], linestyle="", marker="x", color="red", mew=2))
        labels.append("diverged (some seed)")
    if column == "bias":
        handles.append(plt.Line2D([], [], linestyle="", marker="^", color="gray"))
        labels.append(f"off scale (> {BIAS_CEILING:g}), value below")
    figure.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    _save(figure, path)


def _ema(values: np.ndarray, weight: float) -> np.ndarray:
    smoothed = np.empty_like(values)
    current = values[0]
    for index, value in enumerate(values):
        current = weight * current + (1 - weight) * value
        smoothed[index] = current
    return smoothed


def plot_staircase(curves: Sequence[dict[str, str]], path: Path, title: str = "") -> None:
    """Estimates per step for each bound of one critic and K: faint points for every seed, the EMA
    of the mean over seeds, the true MI (black) and log(K + 1) (dashed)."""
    if not curves:
        raise ValueError(f"no curve rows to plot for {path.name}")
    by_estimator: dict[str, dict[int, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    true_mi: dict[int, float] = {}
    for row in curves:
        step = int(row["step"])
        by_estimator[row["estimator"]][int(row["seed"])].append((step, _float(row["estimate"])))
        true_mi[step] = _float(row["true_mi"])
    steps = np.array(sorted(true_mi))
    truth = np.array([true_mi[s] for s in steps])
    negatives = int(curves[0]["negatives"])
    top = truth.max() + 5
    figure, axis = plt.subplots(figsize=(8, 4.2))
    total = steps[-1] + 1
    ema_weight = 1 - 1 / max(10, total / 100)
    for estimator, seeds in by_estimator.items():
        colour = _COLOURS.get(estimator, "black")
        stacked = np.full((len(seeds), total), np.nan)
        for row, points in enumerate(seeds.values()):
            points = np.array(points)
            stacked[row, points[:, 0].astype(int)] = points[:, 1]
            axis.plot(
                points[:, 0], np.clip(points[:, 1], -2, top), ".", color=colour, alpha=0.08, markersize=2
            )
            last_step = int(points[-1, 0])
            if last_step + 1 < total:  # stopped early: diverged
                axis.plot([last_step], [top - 0.3], "x", color="red", markersize=9, mew=2)
        finite = np.isfinite(stacked)
        counts = finite.sum(axis=0)
        mean = np.where(finite, stacked, 0.0).sum(axis=0) / np.maximum(counts, 1)
        valid = counts > 0
        if valid.any():
            axis.plot(
                steps[valid], np.clip(_ema(mean[valid], ema_weight), -2, top), color=colour, label=estimator
            )
    axis.step(steps, truth, where="post", color="black", linewidth=1.2, label="true MI")
    axis.axhline(
        math.log(negatives + 1), color="gray", linestyle="--", linewidth=1, label=f"log(K+1), K={negatives}"
    )
    axis.set_ylim(-2, top)
    axis.set_xlabel("training step")
    axis.set_ylabel("MI estimate (nats)")
    axis.set_title(title or f"{curves[0]['critic']} critic, K = {negatives}")
    axis.legend(loc="upper left", fontsize=8, ncol=2)
    axis.grid(alpha=0.3)
    figure.tight_layout()
    _save(figure, path)


def redraw(out: Path, file_format: str = "png") -> list[Path]:
    """Every figure of a run or sweep directory, from its CSVs, in ``file_format`` (one of
    :data:`FORMATS`); returns the paths written."""
    suffix = "." + check_format(file_format)
    out = Path(out)
    if not out.is_dir():
        raise FileNotFoundError(f"OUT: no such directory: {out}")
    written = []
    summary_path = out / "summary.csv"
    cells = sorted((out / "cells").glob("*/curves.csv")) if (out / "cells").is_dir() else []
    if cells:  # a sweep
        summary = read_csv(summary_path)
        for column, name in (("bias", "bias_vs_k"), ("std", "std_vs_k"), ("grad_norm", "gradnorm_vs_k")):
            plot_against_k(summary, column, out / f"{name}{suffix}")
            written.append(out / f"{name}{suffix}")
        for curves_path in cells:
            path = out / f"staircase_{curves_path.parent.name}{suffix}"
            plot_staircase(read_csv(curves_path), path)
            written.append(path)
    elif (out / "curves.csv").is_file():  # a single run
        plot_staircase(read_csv(out / "curves.csv"), out / f"staircase{suffix}")
        written.append(out / f"staircase{suffix}")
    else:
        raise FileNotFoundError(f"OUT: {out} holds neither curves.csv (toy run) nor cells/ (toy sweep)")
    return written
