"""PNG curves of a pretraining run from OUT/metrics.jsonl: loss, MI estimate (nats), NPC multiplier
q_B and kNN top-1 against the optimizer step."""

from __future__ import annotations

import json
import os

from mitool.files import atomic_writer

__all__ = ["plot_run", "read_metrics"]

PANELS: tuple[tuple[str, str], ...] = (
    ("loss", "loss"),
    ("mi", "MI estimate (nats)"),
    ("npc", "NPC multiplier q_B"),
    ("knn_top1", "kNN top-1"),
)


def read_metrics(out: str) -> list[dict]:
    """The records of OUT/metrics.jsonl (FileNotFoundError when the run has none)."""
    path = os.path.join(out, "metrics.jsonl")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no metrics.jsonl in {out} (is it the --out of a pretraining run?)")
    with open(path) as file:
        return [json.loads(line) for line in file if line.strip()]


def plot_run(out: str, path: str | None = None) -> str:
    """Draw the four panels into ``path`` (default OUT/curves.png), written atomically; returns it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = read_metrics(out)
    if not records:
        raise ValueError(f"{out}/metrics.jsonl holds no records yet")
    path = path or os.path.join(out, "curves.png")
    figure, axes = plt.subplots(1, len(PANELS), figsize=(4 * len(PANELS), 3.2))
    for axis, (key, title) in zip(axes, PANELS, strict=True):
        points = [(r["step"], r[key]) for r in records if key in r and r[key] is not None]
        if points:
            steps, values = zip(*points, strict=True)
            axis.plot(steps, values, marker="o" if len(points) < 30 else None)
        else:
            axis.text(0.5, 0.5, "not logged", ha="center", va="center", transform=axis.transAxes)
        axis.set_title(title)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
    figure.tight_layout()
    with atomic_writer(path) as file:
        figure.savefig(file, dpi=100, format="png")
    plt.close(figure)
    return path
