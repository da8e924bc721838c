"""Figures of the toy study, drawn from its CSV files only (so ``mitool toy plot`` can redraw them).

* :func:`figure_against_k`: bias, std or gradient norm against K (log axis, ticks at the K values
  run), one line per bound (colour) and critic (line style), one panel per true MI, at most
  :data:`MAX_COLUMNS` panels a row (at most :data:`mitool.figures.PAGE_WIDTH` wide), the legend in
  the place of the panel after the last; a band of +- 1 standard deviation over seeds of
  each seed's own value; points that leave out diverged seeds get a red ring, cells where every
  seed diverged a red cross at the top named with the bound; values beyond the axis (a runaway
  bias) a triangle on the edge with the value.
* :func:`figure_staircase`: the estimate against the training step, as in Poole et al. (2019),
  Fig. 2: the mean over seeds (smoothed), the range over seeds as a band, every step's estimate as
  faint dots, the true-MI staircase and the caps of the capped bounds (log(K + 1) for InfoNCE).

Each figure ends with a caption line (unless ``caption=False``: a paper's own caption says it):
what the lines and bands are, steps per stage, seeds, batch and d (from OUT/config.json). Colours
follow the order of :data:`mitool.bounds.NAMES` and line styles that of :data:`mitool.critics.NAMES`,
so a bound has one colour in every figure. The axes fit the data and the stages asked for. Figures
are written atomically, as png, pdf or svg.
"""

from __future__ import annotations

import json
import math
import textwrap
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib import ticker
from matplotlib.lines import Line2D

from mitool import bounds, checks, critics
from mitool._infra.files import read_csv
from mitool.figures import PAGE_WIDTH, check_format, paper_style, pyplot, save
from mitool.toy.beside import read_beside

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["figure_against_k", "figure_staircase", "redraw"]
"""Figure formats: png (raster, the default) and the vector formats pdf and svg."""

BIAS_LIMIT = 3.0
"""The bias axis shows at most this many nats above the truth and below an estimate of zero
(bias -I - 3); values beyond (a runaway or collapsed bound) are marked on the edge with their value."""

MAX_COLUMNS = 3
"""Panels a row of the figures against K (one per true MI), so that they stay readable at a page's width."""

STAIRCASE_MARGIN = 3.0
"""The staircase's axis shows estimates up to this many nats above the largest true MI."""

_LAST_HALF = "the estimates of the last half of each stage, pooled over seeds"
_STATISTICS = {  # column: (axis label, spread column, title, what the line is over)
    "bias": (r"bias $\hat{I} - I$ (nats)", "bias_seed_sd", "Bias of the MI estimate against K", _LAST_HALF),
    "std": (r"std of $\hat{I}$ (nats)", "std_seed_sd", "Standard deviation of the MI estimate against K",
            _LAST_HALF),
    "grad_norm": (r"gradient norm $\Vert\partial\mathcal{L}/\partial\theta\Vert_2$", "grad_norm_seed_sd",
                  "Gradient norm of the loss against K", "every step of each stage, averaged over seeds"),
}  # fmt: skip
_STYLES = ("-", ":", "-.", "--")  # by critics.NAMES: separable solid, cosine dashed
_SYMBOLS = {"alpha": r"\alpha"}  # how a bound's option is written in mathtext
_CLIPPED = {"marker": "^", "markersize": 7, "linestyle": ""}
_RING = {"marker": "o", "markersize": 9, "markerfacecolor": "none", "markeredgecolor": "red", "mew": 1.5,
         "linestyle": ""}  # fmt: skip
_CROSS = {"marker": "x", "markersize": 8, "color": "red", "mew": 2, "linestyle": ""}


def colour_of(bound: str) -> str:
    """The bound's colour: its place in :data:`mitool.bounds.NAMES` in matplotlib's cycle."""
    return f"C{bounds.NAMES.index(bound) % 10}" if bound in bounds.NAMES else "black"


def style_of(critic: str) -> str:
    return _STYLES[critics.NAMES.index(critic) % len(_STYLES)] if critic in critics.NAMES else "-"


def _float(text: object) -> float:
    try:
        return float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def _caption(figure: Figure, text: str) -> None:
    figure.text(0.01, -0.01, text, ha="left", va="top", fontsize=8, color="0.25", wrap=True)


def _protocol(settings: dict | None, seeds: int) -> str:
    """'150 steps per stage, 3 seeds, batch 64, d = 20' (what config.json says; seeds always)."""
    parts = [f"{seeds} seed{'s' if seeds != 1 else ''}"]
    if settings:
        parts.insert(0, f"{settings['steps_per_stage']} steps per stage")
        parts += [f"batch {settings['batch_size']}", f"d = {settings['dim']}"]
        if settings.get("transform"):
            parts.append(f"y transformed by {settings['transform']}")
    return ", ".join(parts)


# ------------------------------------------------------------------------------------------------
# bias, std and gradient norm against K


def _k_axis(axis: Axes, all_k: np.ndarray) -> None:
    axis.set_xscale("log", base=2)
    axis.set_xticks(all_k, [f"{int(k)}" for k in all_k])
    axis.xaxis.set_minor_locator(ticker.NullLocator())
    axis.set_xlim(all_k.min() / 1.4, all_k.max() * 1.4)
    axis.set_xlabel("K (negatives per anchor)")


def _log_axis(axis: Axes, values: list[float]) -> None:
    """A log y-axis over the positive ``values``, ticks at 1, 2, 5 x 10^n written as plain numbers."""
    positive = [v for v in values if v > 0]
    axis.set_yscale("log")
    if positive:
        axis.set_ylim(min(positive) / 1.3, max(positive) * 1.3)
    axis.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.yaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    axis.yaxis.set_minor_formatter(ticker.NullFormatter())


def _mark_clipped(
    axis: Axes, ks: np.ndarray, values: np.ndarray, low: float, high: float, colour: str
) -> bool:
    """Triangles on the edge for values beyond [low, high], with the value; True if any."""
    marked = False
    for k, value in zip(ks, values, strict=True):
        if np.isfinite(value) and not low <= value <= high:
            edge, marker, offset = (high, "^", -11) if value > high else (low, "v", 6)
            axis.plot([k], [edge], marker=marker, color=colour, markersize=7, linestyle="", clip_on=False)
            axis.annotate(f"{value:.3g}", (k, edge), textcoords="offset points", xytext=(0, offset),
                          ha="center", fontsize=7, color=colour)  # fmt: skip
            marked = True
    return marked


def _mark_diverged(
    axis: Axes, ks: np.ndarray, shown: np.ndarray, diverged: np.ndarray, name: str, colour: str,
    crosses: dict[float, int],
) -> tuple[bool, bool]:  # fmt: skip
    """A red ring on the points whose statistics leave out diverged seeds; a red cross near the top
    where every seed diverged (no point), written with the bound's ``name`` in its colour (on the
    side of the axis's middle, so inside the frame), the crosses of several lines at one K one below
    the other (``crosses``: K -> crosses there so far). Call after the x-axis is set. Returns (any
    ring, any cross)."""
    ring = diverged & np.isfinite(shown)
    axis.plot(ks[ring], shown[ring], **_RING)
    middle = math.sqrt(math.prod(axis.get_xlim()))  # the log axis's middle
    for k in ks[diverged & ~np.isfinite(shown)]:
        height = 0.94 - 0.09 * crosses.get(float(k), 0)
        crosses[float(k)] = crosses.get(float(k), 0) + 1
        axis.plot([k], [height], transform=axis.get_xaxis_transform(), label=f"every seed diverged: {name}",
                  **_CROSS)  # fmt: skip
        side = -1 if k > middle else 1
        axis.annotate(name, (k, height), xycoords=axis.get_xaxis_transform(), textcoords="offset points",
                      xytext=(6 * side, 0), ha="left" if side > 0 else "right", va="center", fontsize=7,
                      color=colour)  # fmt: skip
    return bool(ring.any()), bool((diverged & ~np.isfinite(shown)).any())


def _panel_lines(
    rows: Sequence[dict[str, str]], column: str
) -> dict[tuple[str, str], tuple[np.ndarray, ...]]:
    """(bound, critic) -> (K, value, spread over seeds, diverged?, alpha) sorted by K (the CSVs name
    the bound's column ``estimator``)."""
    spread_column = _STATISTICS[column][1]
    lines: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        lines[(row["estimator"], row["critic"])].append(row)
    result = {}
    for key, members in sorted(lines.items(), key=lambda item: (_order(item[0][0]), item[0][1])):
        members = sorted(members, key=lambda r: int(r["negatives"]))
        result[key] = (
            np.array([int(r["negatives"]) for r in members], dtype=float),
            np.array([_float(r[column]) for r in members]),
            np.array([_float(r.get(spread_column)) for r in members]),
            np.array([int(r.get("diverged") or 0) > 0 for r in members]),
            np.array([_float(r.get("alpha")) for r in members]),
        )
    return result


def _order(bound: str) -> int:
    return bounds.NAMES.index(bound) if bound in bounds.NAMES else len(bounds.NAMES)


def _cap_minus_truth(name: str, ks: np.ndarray, alphas: np.ndarray, true_mi: float) -> np.ndarray | None:
    """The ceiling of bound ``name`` (log(K + 1); EqCo's log(alpha + 1)) minus the true MI, or None."""
    bound = bounds.BOUNDS.get(name)
    if bound is None or bound.form != "coupled":
        return None
    caps = []
    for k, alpha in zip(ks, alphas, strict=True):
        options = {"alpha": alpha} if "alpha" in bound.option_names and np.isfinite(alpha) else {}
        caps.append(bound.ceiling(int(k), options) if set(options) == set(bound.option_names) else math.nan)
    return np.array(caps) - true_mi


def _draw_panel(
    axis: Axes, rows: Sequence[dict[str, str]], column: str, true_mi: float, several_critics: bool
) -> tuple[dict[str, bool], list[str]]:
    """One true MI's panel; returns which kinds of marks it drew and the lines every seed of which
    diverged somewhere (for the legend)."""
    drawn = dict.fromkeys(("clipped", "some diverged", "cap", "band"), False)
    crossed: list[str] = []
    crosses: dict[float, int] = {}
    lines = _panel_lines(rows, column)
    shown = [v for _, values, spread, _, _ in lines.values() for v in np.concatenate([values, values - spread,
             values + spread]) if np.isfinite(v)]  # fmt: skip
    low, high = -math.inf, math.inf
    if column == "bias":
        low = max(min(shown + [0.0]), -true_mi - BIAS_LIMIT) - 0.3
        high = min(max(shown + [0.0]), BIAS_LIMIT) + 0.3
        axis.set_ylim(low, high)
        axis.axhline(0.0, color="black", linewidth=0.8)
    else:
        _log_axis(axis, shown)
    for (bound, critic), (ks, values, spread, diverged, alphas) in lines.items():
        colour = colour_of(bound)
        axis.plot(ks, values, style_of(critic), marker="o", markersize=3.5, color=colour, linewidth=1.4)
        if np.isfinite(spread).any():
            axis.fill_between(ks, values - spread, values + spread, color=colour, alpha=0.15, linewidth=0)
            drawn["band"] = True
        drawn["clipped"] |= _mark_clipped(axis, ks, values, low, high, colour)
        name = f"{bound}, {critic}" if several_critics else bound
        some, every = _mark_diverged(axis, ks, np.clip(values, low, high), diverged, name, colour, crosses)
        drawn["some diverged"] |= some
        if every:
            crossed.append(name)
        cap = _cap_minus_truth(bound, ks, alphas, true_mi) if column == "bias" else None
        if cap is not None and np.isfinite(cap).any():
            axis.plot(ks, cap, ":", color=colour, linewidth=1.0)
            drawn["cap"] = True
    axis.set_title(f"$I$ = {true_mi:g} nats")
    axis.grid(alpha=0.3)
    return drawn, crossed


def _legend_entries(
    summary: Sequence[dict[str, str]], drawn: dict[str, bool], crossed: Sequence[str]
) -> tuple[list[Line2D], list[str]]:
    """Entries for what is drawn only: the bounds (colours), the critics (styles) when several, the
    marks; the red cross names the lines every seed of which diverged."""
    bound_names = sorted({row["estimator"] for row in summary}, key=_order)
    critic_names = sorted({row["critic"] for row in summary}, key=lambda c: style_of(c))
    handles = [Line2D([], [], color=colour_of(name), marker="o", markersize=3.5) for name in bound_names]
    labels = list(bound_names)
    if len(critic_names) > 1:
        handles += [Line2D([], [], color="0.3", linestyle=style_of(name)) for name in critic_names]
        labels += [f"{name} critic" for name in critic_names]
    extras = {
        "cap": (Line2D([], [], color="0.3", linestyle=":"), "the bound's cap minus $I$"),
        "some diverged": (Line2D([], [], **_RING), "some seeds diverged (left out)"),
        "all diverged": (Line2D([], [], **_CROSS), f"every seed diverged: {'; '.join(crossed)}"),
        "clipped": (Line2D([], [], color="0.3", **_CLIPPED), "beyond the axis (value)"),
    }
    for key, (handle, label) in extras.items():
        if drawn[key] or (key == "all diverged" and crossed):
            handles.append(handle)
            labels.append(label)
    return handles, labels


def _grid(panels: int) -> tuple[int, int]:
    """(rows, columns) of ``panels`` panels and the legend's cell, at most :data:`MAX_COLUMNS` a
    row, the rows filled evenly (1 panel: 1 x 2, 3: 2 x 2, 5: 2 x 3, 6: 3 x 3)."""
    rows = math.ceil((panels + 1) / MAX_COLUMNS)
    return rows, math.ceil((panels + 1) / rows)


def _place_legend(figure: Figure, axes: np.ndarray, panels: int, handles: list, labels: list[str]) -> None:
    """The legend in the cell after the last panel (the cells after it removed), its labels wrapped
    to the cell's width."""
    free = list(axes.flat[panels:])
    for axis in free[1:]:
        figure.delaxes(axis)
    free[0].set_axis_off()
    columns = 2 if len(labels) > 10 else 1
    wrapped = [textwrap.fill(label, 32 if columns == 1 else 16) for label in labels]
    figure.legend(handles, wrapped, loc="center", bbox_to_anchor=(0.5, 0.5), bbox_transform=free[0].transAxes,
                  ncols=columns, fontsize=8, frameon=False)  # fmt: skip


def figure_against_k(
    summary: Sequence[dict[str, str]], column: str, settings: dict | None = None, caption: bool = True
) -> Figure:
    """The figure of ``column`` (bias, std or grad_norm) against K from the rows of summary.csv, a
    panel per true MI (:func:`_grid`); ``settings``: the study's settings (config.json) for the
    caption line, drawn under the figure unless ``caption`` is False."""
    column = checks.choice("column", column, tuple(_STATISTICS))
    stages = sorted({_float(row["true_mi"]) for row in summary})
    if not stages:
        raise ValueError("summary.csv has no rows to plot")
    rows, columns = _grid(len(stages))
    width = min(PAGE_WIDTH, 2.4 * columns)
    several_critics = len({row["critic"] for row in summary}) > 1
    with paper_style() as plt:
        figure, axes = plt.subplots(rows, columns, figsize=(width, 2.3 * rows + 0.5), squeeze=False,
                                    layout="constrained")  # fmt: skip
        all_k = np.array(sorted({int(r["negatives"]) for r in summary}), dtype=float)
        drawn: dict[str, bool] = defaultdict(bool)
        crossed: list[str] = []
        for index, (axis, true_mi) in enumerate(zip(axes.flat, stages, strict=False)):
            _k_axis(axis, all_k)
            marks, names = _draw_panel(axis, [r for r in summary if _float(r["true_mi"]) == true_mi], column,
                                       true_mi, several_critics)  # fmt: skip
            for key, value in marks.items():
                drawn[key] |= value
            crossed += [name for name in names if name not in crossed]
            if index + columns < len(stages):  # a panel below says what the x-axis is
                axis.set_xlabel("")
            if index % columns == 0:
                axis.set_ylabel(_STATISTICS[column][0])
        _place_legend(figure, axes, len(stages), *_legend_entries(summary, drawn, crossed))
        figure.suptitle(_STATISTICS[column][2])
        if caption:
            seeds = max(int(r.get("n_seeds") or 0) + int(r.get("diverged") or 0) for r in summary)
            band = "; bands: ± 1 s.d. over seeds of each seed's own value" if drawn["band"] else ""
            _caption(figure, f"Lines: {_STATISTICS[column][3]}{band}. {_protocol(settings, seeds)}.")
    return figure


# ------------------------------------------------------------------------------------------------
# the staircase


def _ema(values: np.ndarray, weight: float) -> np.ndarray:
    """Exponential moving average along the last axis, started at the first value; NaN stays NaN."""
    smoothed = np.empty_like(values)
    current = values[..., 0]
    for index in range(values.shape[-1]):
        current = weight * current + (1 - weight) * values[..., index]
        smoothed[..., index] = current
    return smoothed


def _estimates_by_bound(curves: Sequence[dict[str, str]], total: int) -> dict[str, np.ndarray]:
    """bound -> (seeds, steps) estimates, NaN after a run stopped."""
    by_seed: dict[str, dict[int, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    for row in curves:
        by_seed[row["estimator"]][int(row["seed"])].append((int(row["step"]), _float(row["estimate"])))
    result = {}
    for bound in sorted(by_seed, key=_order):
        matrix = np.full((len(by_seed[bound]), total), np.nan)
        for row, points in enumerate(by_seed[bound].values()):
            steps, values = np.array(points).T
            matrix[row, steps.astype(int)] = values
        result[bound] = matrix
    return result


def _stair_limits(truth: np.ndarray, lines: list[np.ndarray], caps: list[float]) -> tuple[float, float]:
    """The y-range: the stages asked for and the mean lines, at most STAIRCASE_MARGIN above the
    largest true MI and down to -STAIRCASE_MARGIN."""
    values = np.concatenate([truth, *[line[np.isfinite(line)] for line in lines], np.array(caps)])
    low = max(min(values.min(), 0.0), -STAIRCASE_MARGIN)
    high = min(values.max(), truth.max() + STAIRCASE_MARGIN)
    pad = 0.05 * (high - low) + 0.2
    return low - pad, high + pad


def _mark_clipped_line(axis: Axes, steps: np.ndarray, line: np.ndarray, low: float, high: float,
                       colour: str) -> bool:  # fmt: skip
    """A triangle on the edge where the line first leaves the axis, written with the most extreme
    value it reaches beyond it ("max 920")."""
    marked = False
    for beyond, edge, marker, offset, word in (
        (line > high, high, "^", -10, "max"), (line < low, low, "v", 4, "min"),
    ):  # fmt: skip
        if beyond.any():
            first = int(np.argmax(beyond))
            extreme = line[beyond].max() if word == "max" else line[beyond].min()
            axis.plot([steps[first]], [edge], marker=marker, color=colour, markersize=7, clip_on=False)
            axis.annotate(f"{word} {extreme:.3g}", (steps[first], edge), textcoords="offset points",
                          xytext=(5, offset), ha="left", fontsize=7, color=colour)  # fmt: skip
            marked = True
    return marked


def _caps(curves: Sequence[dict[str, str]], bound_names: Sequence[str], negatives: int) -> dict[str, float]:
    """bound -> the ceiling of its estimate (log(K + 1); EqCo's log(alpha + 1)) where it has one."""
    alphas = {row["estimator"]: _float(row.get("alpha")) for row in curves}
    caps = {}
    for name in bound_names:
        cap = _cap_minus_truth(name, np.array([negatives]), np.array([alphas.get(name, math.nan)]), 0.0)
        if cap is not None and np.isfinite(cap[0]):
            caps[name] = float(cap[0])
    return caps


def _over_seeds(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, minimum and maximum over seeds (axis 0) of the finite values; NaN where none is."""
    finite = np.isfinite(values)
    counts = finite.sum(axis=0)
    mean = np.where(finite, values, 0.0).sum(axis=0) / np.maximum(counts, 1)
    low = np.where(finite, values, np.inf).min(axis=0)
    high = np.where(finite, values, -np.inf).max(axis=0)
    return tuple(np.where(counts > 0, v, np.nan) for v in (mean, low, high))  # type: ignore[return-value]


def _draw_bound_steps(
    axis: Axes, name: str, steps: np.ndarray, matrix: np.ndarray, smoothed: np.ndarray,
    limits: tuple[float, float],
) -> tuple[bool, bool]:  # fmt: skip
    """One bound on the staircase: every step's estimate (dots), the range over seeds of the
    smoothed curves (band), their mean (line), a red cross where a seed stopped (diverged).
    Returns (line clipped, a seed diverged)."""
    colour, (low, high) = colour_of(name), limits
    axis.plot(np.broadcast_to(steps, matrix.shape).ravel(), np.clip(matrix, low, high).ravel(), ".",
              color=colour, alpha=0.06, markersize=1.5, rasterized=True)  # fmt: skip
    mean, smallest, largest = _over_seeds(smoothed)
    if matrix.shape[0] > 1:
        axis.fill_between(steps, smallest, largest, color=colour, alpha=0.2, linewidth=0)
    axis.plot(steps, mean, color=colour, linewidth=1.6, label=name)
    clipped = _mark_clipped_line(axis, steps, mean, low, high, colour)
    diverged, inset = False, 0.03 * (high - low)  # crosses kept inside the frame
    for row in matrix:
        finite = np.flatnonzero(np.isfinite(row))
        if finite.size and finite[-1] + 1 < len(steps):
            axis.plot([finite[-1]], [np.clip(row[finite[-1]], low + inset, high - inset)],
                      label=f"_a seed of {name} diverged", **_CROSS)  # fmt: skip
            diverged = True
    return clipped, diverged


def figure_staircase(
    curves: Sequence[dict[str, str]], settings: dict | None = None, caption: bool = True,
    beside: Sequence[dict[str, str]] = (),
) -> Figure:  # fmt: skip
    """The estimates of one critic and K (rows of curves.csv) against the step; ``settings``: the
    study's settings (config.json) for the caption line, drawn under the figure unless ``caption``
    is False; ``beside``: rows of beside.csv (:mod:`mitool.toy.beside`), each estimator's estimate
    at each stage drawn at the stage's middle with its interval (an arrow up where it is open)."""
    if not curves:
        raise ValueError("curves.csv has no rows to plot")
    true_mi = {int(row["step"]): _float(row["true_mi"]) for row in curves}
    steps = np.arange(max(true_mi) + 1)
    truth = np.array([true_mi.get(step, math.nan) for step in steps])
    negatives, critic = int(curves[0]["negatives"]), curves[0]["critic"]
    matrices = _estimates_by_bound(curves, len(steps))
    weight = 1 - 1 / max(10, len(steps) / 100)
    smoothed = {name: _ema(matrix, weight) for name, matrix in matrices.items()}
    means = {name: _over_seeds(values)[0] for name, values in smoothed.items()}
    caps = _caps(curves, list(matrices), negatives)
    limits = _stair_limits(truth, list(means.values()), list(caps.values()))
    figure, axis = pyplot().subplots(figsize=(7.5, 3.8))
    clipped, diverged = False, []
    for name, matrix in matrices.items():
        marks = _draw_bound_steps(axis, name, steps, matrix, smoothed[name], limits)
        clipped = clipped or marks[0]
        diverged += [name] if marks[1] else []
    _draw_caps(axis, caps)
    _draw_beside(axis, beside, limits)
    axis.step(steps, truth, where="post", color="black", linewidth=1.2, label="true MI $I$")
    _finish_staircase(figure, axis, limits, clipped, diverged, f"{critic} critic, K = {negatives}")
    if caption:
        seeds = max(matrix.shape[0] for matrix in matrices.values())
        band = "; bands: range over seeds" if seeds > 1 else ""
        _caption(figure, f"Lines: mean over seeds, smoothed (EMA over ~{1 / (1 - weight):.0f} steps){band}; "
                 f"dots: every step's estimate. {_protocol(settings, seeds)}.")  # fmt: skip
    return figure


_BESIDE_MARKERS = ("D", "s", "^", "v", "P", "X")


def _draw_beside(axis: Axes, rows: Sequence[dict[str, str]], limits: tuple[float, float]) -> None:
    """Each estimator of beside.csv at each stage's middle step, with its interval; an interval open
    above (a lower bound near a ceiling) as a bar to the top of the axis with an arrow."""
    names = list(dict.fromkeys(row["estimator"] for row in rows))
    for index, name in enumerate(names):
        mine = [row for row in rows if row["estimator"] == name]
        middle = np.array([(_float(row["start"]) + _float(row["stop"])) / 2 for row in mine])
        value = np.array([_float(row["estimate"]) for row in mine])
        low = np.array([_float(row["ci_low"]) for row in mine])
        high = np.array([_float(row["ci_high"]) for row in mine])
        colour = f"C{(index + 5) % 10}"
        axis.plot(middle, value, linestyle="none", marker=_BESIDE_MARKERS[index % len(_BESIDE_MARKERS)],
                  color=colour, markersize=6, label=f"{name} on fresh pairs (whole estimator)")  # fmt: skip
        closed = np.isfinite(high)
        axis.vlines(middle[closed], low[closed], high[closed], color=colour, linewidth=1.5)
        for step, bottom in zip(middle[~closed], low[~closed], strict=True):
            axis.annotate("", xy=(step, limits[1]), xytext=(step, bottom),
                          arrowprops={"arrowstyle": "->", "color": colour, "linewidth": 1.2})  # fmt: skip


def _draw_caps(axis: Axes, caps: dict[str, float]) -> None:
    """A dashed line at each capped bound's ceiling, labelled with its formula and value."""
    for name, cap in caps.items():
        weight_option = bounds.BOUNDS[name].weight_option
        symbol = "K" if weight_option is None else _SYMBOLS.get(weight_option, weight_option)
        label = f"cap of {name}: $\\log({symbol} + 1)$ = {cap:.2f}"
        axis.axhline(cap, color=colour_of(name), linestyle="--", linewidth=0.9, label=label)


def _finish_staircase(figure: Figure, axis: Axes, limits: tuple[float, float], clipped: bool,
                      diverged: Sequence[str], title: str) -> None:  # fmt: skip
    axis.set_title(title, fontsize=11)
    axis.set_ylim(*limits)
    axis.set_xlim(0, None)
    axis.set_xlabel("training step")
    axis.set_ylabel(r"MI estimate $\hat{I}$ (nats)")
    axis.grid(alpha=0.3)
    handles, labels = axis.get_legend_handles_labels()
    if clipped:
        handles.append(Line2D([], [], color="0.3", **_CLIPPED))
        labels.append("beyond the axis (value)")
    if diverged:
        handles.append(Line2D([], [], **_CROSS))
        labels.append(f"a seed diverged (stopped there): {', '.join(diverged)}")
    axis.legend(handles, labels, loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
    figure.tight_layout()


# ------------------------------------------------------------------------------------------------
# a run's or a sweep's directory


def _settings_of(out: Path) -> dict | None:
    try:
        return json.loads((out / "config.json").read_text())["settings"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def redraw(out: Path, file_format: str = "png", caption: bool = True) -> list[Path]:
    """Every figure of a run or sweep directory, from its CSVs, in ``file_format`` (one of
    :data:`mitool.figures.FORMATS`), with their caption lines unless ``caption`` is False; returns
    the paths written."""
    suffix = "." + check_format(file_format)
    out = Path(out)
    if not out.is_dir():
        raise FileNotFoundError(f"OUT: no such directory: {out}")
    settings = _settings_of(out)
    written: list[Path] = []

    def keep(figure: Figure, path: Path) -> None:
        written.append(save(figure, path))

    cells = sorted((out / "cells").glob("*/curves.csv")) if (out / "cells").is_dir() else []
    if cells:  # a sweep
        summary = read_csv(out / "summary.csv")
        for column, name in (("bias", "bias_vs_k"), ("std", "std_vs_k"), ("grad_norm", "gradnorm_vs_k")):
            keep(figure_against_k(summary, column, settings, caption), out / f"{name}{suffix}")
        for curves_path in cells:
            keep(
                figure_staircase(read_csv(curves_path), settings, caption),
                out / f"staircase_{curves_path.parent.name}{suffix}",
            )
    elif (out / "curves.csv").is_file():  # a single run
        staircase = figure_staircase(read_csv(out / "curves.csv"), settings, caption, read_beside(out))
        keep(staircase, out / f"staircase{suffix}")
    else:
        raise FileNotFoundError(f"OUT: {out} holds neither curves.csv (toy run) nor cells/ (toy sweep)")
    return written
