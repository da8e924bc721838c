"""The curves of a pretraining run: loss, MI estimate (nats), NPC multiplier q_B, top-1
accuracy, and the alignment and uniformity of the normalised embeddings on the held-out batch
(:mod:`mitool.vision.alignment`; lower is better for both) against the optimizer step, from the
run's records (:mod:`mitool.vision.records`).

The accuracy panel shows every source: the kNN monitor of the run (a line), ``mitool vision knn``
(squares) and ``mitool vision linear`` (triangles) on the run's checkpoints. The title names the
method, the loss with its options, the negatives and the batch, from the run's config.json.
"""

from __future__ import annotations

import math
import os
from typing import Any

from mitool import checks
from mitool.figures import FORMATS, PAGE_WIDTH, paper_style, save
from mitool.vision.config import PretrainConfig
from mitool.vision.methods import method_class
from mitool.vision.records import read_config, read_evaluations, read_records

__all__ = ["PANELS", "plot_run", "title_of"]

PANELS: tuple[tuple[str, str], ...] = (
    ("loss", "loss"),
    ("mi", "MI estimate (nats)"),
    ("npc", "NPC multiplier $q_B$"),
    ("accuracy", "top-1 accuracy"),
    ("alignment", "alignment $\\mathcal{L}_{align}$ (held out)"),
    ("uniformity", "uniformity $\\mathcal{L}_{unif}$ (held out)"),
)


def title_of(config: dict[str, Any] | None) -> str:
    """The figure's title: method, loss (with its options), negatives, batch (and LARS when the run used
    it), architecture, data."""
    if config is None:
        return "pretraining run (no config.json)"
    settings = PretrainConfig(
        **{key: value for key, value in config.items() if key in PretrainConfig.__dataclass_fields__}
    )
    options = "".join(f", {name} {value:g}" for name, value in settings.loss_options().items())
    negatives = method_class(settings.method).describe_negatives(settings)
    lars = ", LARS" if settings.optimizer == "lars" else ""
    return (
        f"{settings.method}, loss {settings.loss}{options}, {negatives}, batch {settings.batch_size}{lars}, "
        f"tau {settings.temperature:g} ({settings.arch} on {settings.dataset})"
    )


def _output_path(out: str, path: str | None, file_format: str | None) -> tuple[str, str]:
    """(path, format): the format given, else the path's extension, else png."""
    extension = os.path.splitext(path)[1].lstrip(".").lower() if path else ""
    chosen = checks.choice(
        "file_format", file_format or (extension if extension in FORMATS else "png"), FORMATS
    )
    if path is None:
        return os.path.join(out, f"curves.{chosen}"), chosen
    if extension in FORMATS and extension != chosen:
        raise checks.ParameterError(
            "file_format", f"{chosen} does not match the output {path} (a .{extension} file)"
        )
    return path, chosen


def plot_run(out: str, path: str | None = None, file_format: str | None = None) -> str:
    """Draw the panels into ``path`` (default OUT/curves.<format>), written atomically, in
    ``file_format`` (png, pdf or svg; default: the path's extension, else png); returns the path."""
    records = read_records(out)
    evaluations = read_evaluations(out)
    if not records and not evaluations:
        raise ValueError(f"{out}/metrics.jsonl holds no records yet")
    path, chosen = _output_path(out, path, file_format)
    with paper_style() as plt:
        figure, axes = plt.subplots(2, math.ceil(len(PANELS) / 2), figsize=(PAGE_WIDTH, 5.0), squeeze=False)
        _draw_panels(axes.flat, records, evaluations)
        figure.suptitle(title_of(read_config(out)))
        figure.tight_layout()
    return str(save(figure, path, chosen))


def _draw_panels(axes: Any, records: list[dict[str, Any]], evaluations: list[dict[str, Any]]) -> None:
    for axis, (key, label) in zip(axes, PANELS, strict=False):
        if key == "accuracy":
            _accuracy_panel(axis, records, evaluations)
        else:
            points = [(r["step"], r[key]) for r in records if r.get(key) is not None]
            if points:
                steps, values = zip(*points, strict=True)
                axis.plot(steps, values, marker="o" if len(points) < 30 else None)
            else:
                axis.text(0.5, 0.5, "not logged", ha="center", va="center", transform=axis.transAxes)
        axis.set_title(label)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)


def _accuracy_panel(axis: Any, records: list[dict[str, Any]], evaluations: list[dict[str, Any]]) -> None:
    """kNN of the monitor (line), of ``vision knn`` (squares), linear probes (triangles)."""
    sources = (
        ("kNN monitor", "o-", [(r["step"], r["knn_top1"]) for r in records if "knn_top1" in r]),
        ("vision knn", "s", [(e["step"], e["knn_top1"]) for e in evaluations if e.get("kind") == "knn"]),
        ("vision linear", "^", [(e["step"], e["top1"]) for e in evaluations if e.get("kind") == "linear"]),
    )
    drawn = [value for _, _, points in sources for _, value in points]
    for name, style, points in sources:
        if points:
            steps, values = zip(*sorted(points), strict=True)
            axis.plot(steps, values, style, label=name, markersize=4)
    if drawn:  # the axis within the accuracies' range: never beyond 0 or 1
        axis.set_ylim(max(0.0, min(drawn) - 0.05), min(1.0, max(drawn) + 0.05))
        axis.legend()
    else:
        axis.text(
            0.5, 0.5, "no kNN yet: --knn-every N,\nor mitool vision knn", ha="center", va="center",
            transform=axis.transAxes, fontsize=8,
        )  # fmt: skip
