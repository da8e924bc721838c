"""Figures fit for a paper: at most a page's width (7.2 in), no text below 8 pt, axes within the
data's range."""

from __future__ import annotations

import pytest

from mitool.benchmark import figures
from mitool.figures import COLUMN_WIDTH, PAGE_WIDTH, pyplot


def _rows() -> list[dict[str, str]]:
    rows = []
    for task, family, truth in (("a-1-x", "first", 0.4), ("a-2-x", "first", 1.0), ("b-5-5", "second", 0.3)):
        for estimator, error in (("ksg", -0.3), ("default", 0.02)):
            for seed in range(3):
                value = truth + error + 0.01 * seed
                interval = {"ci_low": str(value - 0.05), "ci_high": str(value + 0.05)}
                rows.append(
                    {
                        "task": task,
                        "family": family,
                        "true_mi": str(truth),
                        "n": "500",
                        "seed": str(seed),
                        "estimator": estimator,
                        "estimate": str(value),
                        "seconds": "1.0",
                        **interval,
                    }
                )
    return rows


def _texts(figure) -> list:
    return [
        text for text in figure.findobj(lambda artist: hasattr(artist, "get_fontsize")) if text.get_text()
    ]


@pytest.mark.parametrize("draw", [figures.figure_errors, figures.figure_heatmap])
def test_benchmark_figures_are_legible(draw) -> None:
    (table,) = figures._by_size(_rows()).values()
    figure = draw(table, 500)
    try:
        assert figure.get_size_inches()[0] <= PAGE_WIDTH + 1e-9
        small = [(text.get_text(), text.get_fontsize()) for text in _texts(figure) if text.get_fontsize() < 8]
        assert not small
    finally:
        pyplot().close(figure)


def test_wrapped_breaks_long_names_after_their_separators() -> None:
    name = "infonce:ensemble=1:radial=false:activation=relu:hidden=256:hidden_layers=2:base=none"
    lines = figures.wrapped(name, 36).splitlines()
    assert "".join(lines) == name and all(len(line) <= 36 for line in lines) and len(lines) == 3
    assert figures.wrapped("default", 3) == "default"  # a part longer than the width keeps its line


@pytest.mark.parametrize(
    ("draw", "width"), [(figures.figure_errors, COLUMN_WIDTH), (figures.figure_heatmap, PAGE_WIDTH)]
)
def test_long_names_keep_the_saved_figure_within_a_column_or_a_page(draw, width, tmp_path) -> None:
    """Saved with a tight bounding box, a legend or column labels of long names once widened the
    errors figure to 11.5 in and overlapped the heatmap's labels; the errors figure is a column
    wide, the heatmap (a table) a page."""
    long_names = {
        "ksg": "infonce:ensemble=1:radial=false:activation=relu:hidden=256:hidden_layers=2:base=none",
        "default": "default:ensemble=1:folds=3",
    }
    task = "swissroll_x-normal_cdf-multinormal-sparse-25-25-2-2.0"
    renamed = {"b-5-5": task}
    rows = [{**row, "estimator": long_names[row["estimator"]], "task": renamed.get(row["task"], row["task"])}
            for row in _rows()]  # fmt: skip
    (table,) = figures._by_size(rows).values()
    path = figures.save(draw(table, 500), tmp_path / "figure.png", dpi=100)
    image = pyplot().imread(path)
    assert image.shape[1] <= width * 100 + 1


def test_the_error_axis_ends_near_the_data() -> None:
    (table,) = figures._by_size(_rows()).values()
    figure = figures.figure_errors(table, 500)
    low, high = figure.axes[-1].get_xlim()
    pyplot().close(figure)
    assert -0.3 - 0.05 < low < -0.3 and 0.12 < high < 0.2  # errors -0.3 .. +0.04, the target band +-0.1


def test_short_labels_drop_what_a_familys_names_share() -> None:
    names = ["spiral-multinormal-sparse-3-3-2-2.0", "spiral-normal_cdf-multinormal-sparse-25-25-2-2.0"]
    assert figures.short_labels(names) == ["multinormal-sparse-3-3", "normal_cdf-multinormal-sparse-25-25"]
    assert figures.short_labels(["one"]) == ["one"]


def test_the_accuracy_axis_of_a_run_stays_within_zero_and_one(tmp_path) -> None:
    from mitool.vision.plot import _accuracy_panel

    plt = pyplot()
    figure, axis = plt.subplots()
    records = [{"step": 1, "knn_top1": 0.9}, {"step": 2, "knn_top1": 1.0}]
    _accuracy_panel(axis, records, [])
    low, high = axis.get_ylim()
    plt.close(figure)
    assert (low, high) == pytest.approx((0.85, 1.0))
