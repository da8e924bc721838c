"""The toy study's figures, drawn from hand-made CSV rows: legend entries only for what is drawn,
axes fitted to the data and to the stages asked for, clipped values marked with their value, bands
over seeds, math labels, plain tick labels, the panels in a grid at most three wide, diverged cells
named with their bound, and the caption line (or none)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest

from mitool.figures import PAGE_WIDTH
from mitool.toy.plots import colour_of, figure_against_k, figure_staircase
from mitool.toy.study import SUMMARY_COLUMNS

SETTINGS = {"steps_per_stage": 40, "batch_size": 16, "dim": 5, "transform": None}


def summary_row(
    estimator: str, negatives: int, true_mi: float, bias: float, **extra: object
) -> dict[str, str]:
    row = dict.fromkeys(SUMMARY_COLUMNS, "")
    row.update(estimator=estimator, critic="separable", negatives=str(negatives), true_mi=f"{true_mi:g}")
    row.update(
        n_seeds="3", diverged="0", bias=str(bias), mean=str(bias + true_mi), std="0.2", grad_norm="0.6"
    )
    row.update(bias_seed_sd="0.1", std_seed_sd="0.05", grad_norm_seed_sd="0.2")
    row.update({key: str(value) for key, value in extra.items()})
    return row


def legend_labels(figure: plt.Figure) -> list[str]:
    """The labels of the figure's legend, unwrapped (long labels are wrapped to the legend's cell)."""
    return [" ".join(text.get_text().split()) for legend in figure.legends for text in legend.get_texts()]


def texts(figure: plt.Figure) -> list[str]:
    return [text.get_text() for text in figure.findobj(plt.Text)]


def panels(figure: plt.Figure) -> list[plt.Axes]:
    """The panels drawn (the legend's cell is an axis turned off)."""
    return [axis for axis in figure.axes if axis.axison]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_bias_figure_without_anything_off_scale_has_no_entry_for_it() -> None:
    rows = [summary_row(name, k, 4.0, -1.0 - 0.1 * index) for index, name in enumerate(("infonce", "nwj"))
            for k in (4, 16, 64)]  # fmt: skip
    figure = figure_against_k(rows, "bias", SETTINGS)
    labels = legend_labels(figure)
    assert labels[:2] == ["infonce", "nwj"]  # the bounds drawn, and no critic entries (one critic)
    assert not any("beyond" in label or "diverged" in label or "critic" in label for label in labels)
    assert "the bound's cap minus $I$" in labels  # infonce has a cap, drawn dotted
    (axis,) = panels(figure)
    low, high = axis.get_ylim()
    assert -1.6 < low < -1.2 and 0.0 < high < 0.5  # fitted to the data (and 0), not to [-4, 3.8]
    assert len(axis.collections) == 2  # one band per line (spread over seeds)
    assert axis.get_ylabel() == r"bias $\hat{I} - I$ (nats)"
    assert [tick.get_text() for tick in axis.get_xticklabels()] == ["4", "16", "64"]


def test_bias_beyond_the_axis_is_marked_with_its_value() -> None:
    rows = [summary_row("dcl", 4, 2.0, 165.0), summary_row("dcl", 16, 2.0, 0.5),
            summary_row("nwj", 4, 2.0, -40.0), summary_row("nwj", 16, 2.0, -1.0)]  # fmt: skip
    figure = figure_against_k(rows, "bias")
    (axis,) = panels(figure)
    low, high = axis.get_ylim()
    assert high <= 3.5 and low >= -2.0 - 3.5  # runaway values do not stretch the axis
    assert {"165", "-40"} <= set(texts(figure))
    assert "beyond the axis (value)" in legend_labels(figure)
    assert "steps per stage" not in " ".join(texts(figure))  # no config.json: the caption says what it knows
    assert "3 seeds" in " ".join(texts(figure))


def test_diverged_cells_and_several_critics_in_the_legend() -> None:
    rows = [summary_row("dcl", 4, 6.0, -2.0, diverged=1, n_seeds=2), summary_row("dcl", 16, 6.0, -1.0),
            summary_row("dcl", 64, 6.0, math.nan, diverged=3, n_seeds=0),
            summary_row("dcl", 4, 6.0, -3.0, critic="cosine")]  # fmt: skip
    labels = legend_labels(figure_against_k(rows, "bias"))
    assert labels[:3] == ["dcl", "separable critic", "cosine critic"]
    assert "some seeds diverged (left out)" in labels and "every seed diverged: dcl, separable" in labels


def test_every_seed_diverged_marks_name_their_bound() -> None:
    """Two bounds of which every seed diverged at K = 64: two red crosses there, one below the
    other, each written with its bound's name in the bound's colour; the legend names both."""
    rows = [summary_row("dcl", 4, 6.0, -2.0), summary_row("dcl", 64, 6.0, math.nan, diverged=3, n_seeds=0),
            summary_row("nwj", 4, 6.0, -1.0), summary_row("nwj", 64, 6.0, math.nan, diverged=3, n_seeds=0),
            summary_row("infonce", 4, 6.0, -3.0), summary_row("infonce", 64, 6.0, -2.5)]  # fmt: skip
    figure = figure_against_k(rows, "bias")
    (axis,) = panels(figure)
    crosses = [line for line in axis.get_lines() if line.get_marker() == "x" and len(line.get_xdata())]
    assert sorted(line.get_label() for line in crosses) == [
        "every seed diverged: dcl",
        "every seed diverged: nwj",
    ]
    assert all(list(line.get_xdata()) == [64] and line.get_color() == "red" for line in crosses)
    heights = sorted(float(line.get_ydata()[0]) for line in crosses)
    assert heights[1] - heights[0] > 0.05  # one below the other, not on top of each other
    names = {text.get_text(): text for text in axis.texts}
    assert {"dcl", "nwj"} <= set(names) and "infonce" not in names
    assert names["dcl"].get_color() == colour_of("dcl") and names["nwj"].get_color() == colour_of("nwj")
    for name, cross in zip(("dcl", "nwj"), sorted(crosses, key=lambda line: line.get_label()), strict=True):
        assert names[name].xy == (64, cross.get_ydata()[0])  # the name is written at its cross
    assert "every seed diverged: dcl; nwj" in legend_labels(figure)


def stage_rows(stages: tuple[float, ...]) -> list[dict[str, str]]:
    return [summary_row(name, k, mi, -0.5 * mi) for mi in stages for name in ("infonce", "nwj")
            for k in (4, 16, 64)]  # fmt: skip


@pytest.mark.parametrize(
    ("stages", "grid"), [((2.0,), [1]), ((2.0, 4.0, 6.0), [2, 1]), ((2.0, 4.0, 6.0, 8.0, 10.0), [3, 2])]
)
def test_panels_in_rows_of_at_most_three_with_the_legend_in_the_next_cell(stages, grid) -> None:
    """The default five stages: 3 + 2 panels and the legend in the sixth cell, a page wide, not
    five in a row (3460 x 676 px); the legend never beside the page."""
    figure = figure_against_k(stage_rows(stages), "bias", SETTINGS)
    figure.canvas.draw()
    drawn = panels(figure)
    assert [axis.get_title() for axis in drawn] == [f"$I$ = {mi:g} nats" for mi in stages]
    tops = sorted({round(axis.get_position().y1, 3) for axis in drawn}, reverse=True)
    assert [sum(round(axis.get_position().y1, 3) == top for axis in drawn) for top in tops] == grid
    width, height = figure.get_size_inches()
    assert width <= PAGE_WIDTH + 1e-9 and 0.8 <= width / height <= 2.2
    (legend,) = figure.legends
    (cell,) = [axis for axis in figure.axes if not axis.axison]
    renderer = figure.canvas.get_renderer()
    box, place = legend.get_window_extent(renderer), cell.get_window_extent(renderer)
    assert place.x0 - 1 <= (box.x0 + box.x1) / 2 <= place.x1 + 1  # centred in the cell after the panels
    assert box.x1 <= figure.bbox.x1 + 1  # inside the figure
    labels = [axis.get_ylabel() for axis in drawn]
    assert labels.count(r"bias $\hat{I} - I$ (nats)") == len(grid)  # one per row


@pytest.mark.parametrize("column", ["bias", "std", "grad_norm"])
def test_without_the_caption_no_caption_is_drawn(column: str) -> None:
    with_caption = figure_against_k(stage_rows((2.0, 4.0)), column, SETTINGS)
    without = figure_against_k(stage_rows((2.0, 4.0)), column, SETTINGS, caption=False)
    assert [text for text in texts(with_caption) if text.startswith("Lines:")]
    assert not [text for text in texts(without) if "Lines:" in text or "steps per stage" in text]
    bare = figure_against_k(stage_rows((2.0,)), column, SETTINGS, caption=False)
    assert [text.get_text() for text in bare.texts] == [bare.get_suptitle()]  # the title, no caption
    staircase = figure_staircase(curve_rows((1.0, 2.0), seeds=2), SETTINGS, caption=False)
    assert not [text for text in texts(staircase) if "Lines:" in text or "steps per stage" in text]


@pytest.mark.parametrize("column", ["std", "grad_norm"])
def test_log_axes_have_plain_tick_labels_and_math_labels(column: str) -> None:
    rows = [summary_row("infonce", k, 2.0, -1.0, std=value, grad_norm=value) for k, value in
            ((4, 0.6), (16, 0.9), (64, 1.7))]  # fmt: skip
    figure = figure_against_k(rows, column, SETTINGS)
    figure.canvas.draw()
    (axis,) = panels(figure)
    low, high = axis.get_ylim()
    ticks = zip(axis.get_yticks(), axis.get_yticklabels(), strict=True)
    labels = [label.get_text() for value, label in ticks if low <= value <= high]
    assert labels and all("times" not in label and "^" not in label and "$" not in label for label in labels)
    assert {float(label) for label in labels} <= {0.5, 1.0, 2.0}
    if column == "grad_norm":
        assert axis.get_ylabel() == r"gradient norm $\Vert\partial\mathcal{L}/\partial\theta\Vert_2$"
    (caption,) = [text for text in texts(figure) if text.startswith("Lines")]
    assert (
        "40 steps per stage, 3 seeds, batch 16, d = 5" in caption and "bands: ± 1 s.d. over seeds" in caption
    )
    assert ("every step" in caption) == (column == "grad_norm")


def curve_rows(stages: tuple[float, ...], seeds: int, estimator: str = "infonce", offset: float = 0.0,
               stop: int | None = None) -> list[dict[str, str]]:  # fmt: skip
    rows = []
    for seed in range(seeds):
        for step in range(len(stages) * 10 if stop is None or seed else stop):
            true_mi = stages[step // 10]
            estimate = min(true_mi, 2.0) + offset + 0.01 * seed
            rows.append({"run": "0", "estimator": estimator, "critic": "separable", "negatives": "7",
                         "alpha": "", "seed": str(seed), "step": str(step), "true_mi": f"{true_mi:g}",
                         "estimate": str(estimate)})  # fmt: skip
    return rows


def test_the_staircase_axis_follows_the_stages_asked_for() -> None:
    low_stages = figure_staircase(curve_rows((0.5, 1.0), seeds=2), SETTINGS)
    high_stages = figure_staircase(curve_rows((2.0, 6.0, 12.0), seeds=2), SETTINGS)
    assert 1.0 < low_stages.axes[0].get_ylim()[1] < 3.0  # not 11 or 13 whatever the stages
    assert 12.0 < high_stages.axes[0].get_ylim()[1] < 16.0
    labels = [text.get_text() for text in low_stages.axes[0].get_legend().get_texts()]
    assert labels == ["infonce", r"cap of infonce: $\log(K + 1)$ = 2.08", "true MI $I$"]
    assert len(low_stages.axes[0].collections) == 1  # the band over the two seeds
    caption = [text for text in texts(low_stages) if text.startswith("Lines")]
    assert "bands: range over seeds" in caption[0] and "40 steps per stage, 2 seeds" in caption[0]


def test_a_staircase_line_below_the_axis_is_marked_and_a_stopped_seed_crossed() -> None:
    rows = curve_rows((2.0, 4.0), seeds=1) + curve_rows(
        (2.0, 4.0), seeds=2, estimator="nwj", offset=-50.0, stop=12
    )
    figure = figure_staircase(rows)
    axis = figure.axes[0]
    assert axis.get_ylim()[0] > -4.0  # NWJ's -48 does not stretch the axis
    labels = [text.get_text() for text in axis.get_legend().get_texts()]
    assert "beyond the axis (value)" in labels and "a seed diverged (stopped there): nwj" in labels
    assert "min -48" in texts(figure)  # the extreme value, written
    assert "bands" not in [text for text in texts(figure) if text.startswith("Lines")][0].split(";")[0]
