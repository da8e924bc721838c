"""The toy study's figures, drawn from hand-made CSV rows: legend entries only for what is drawn,
axes fitted to the data and to the stages asked for, clipped values marked with their value, bands
over seeds, math labels, plain tick labels and the caption line."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest

from mitool.toy.plots import figure_against_k, figure_staircase
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
    return [text.get_text() for legend in figure.legends for text in legend.get_texts()]


def texts(figure: plt.Figure) -> list[str]:
    return [text.get_text() for text in figure.findobj(plt.Text)]


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
    (axis,) = figure.axes
    low, high = axis.get_ylim()
    assert -1.6 < low < -1.2 and 0.0 < high < 0.5  # fitted to the data (and 0), not to [-4, 3.8]
    assert len(axis.collections) == 2  # one band per line (spread over seeds)
    assert axis.get_ylabel() == r"bias $\hat{I} - I$ (nats)"
    assert [tick.get_text() for tick in axis.get_xticklabels()] == ["4", "16", "64"]


def test_bias_beyond_the_axis_is_marked_with_its_value() -> None:
    rows = [summary_row("dcl", 4, 2.0, 165.0), summary_row("dcl", 16, 2.0, 0.5),
            summary_row("nwj", 4, 2.0, -40.0), summary_row("nwj", 16, 2.0, -1.0)]  # fmt: skip
    figure = figure_against_k(rows, "bias")
    (axis,) = figure.axes
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
    assert "some seeds diverged (left out)" in labels and "every seed diverged" in labels


@pytest.mark.parametrize("column", ["std", "grad_norm"])
def test_log_axes_have_plain_tick_labels_and_math_labels(column: str) -> None:
    rows = [summary_row("infonce", k, 2.0, -1.0, std=value, grad_norm=value) for k, value in
            ((4, 0.6), (16, 0.9), (64, 1.7))]  # fmt: skip
    figure = figure_against_k(rows, column, SETTINGS)
    figure.canvas.draw()
    (axis,) = figure.axes
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
    assert "beyond the axis (value)" in labels and "a seed diverged (stopped there)" in labels
    assert "min -48" in texts(figure)  # the extreme value, written
    assert "bands" not in [text for text in texts(figure) if text.startswith("Lines")][0].split(";")[0]
