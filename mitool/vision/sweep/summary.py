"""The summary of a vision sweep: OUT/summary.csv, one row per finished run under OUT/runs (several
sweeps may share one OUT), with the run's settings, its training figures from metrics.jsonl and its
evaluation."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mitool._infra.files import write_csv
from mitool.vision.records import read_records
from mitool.vision.sweep.worker import RESULT_FILE, RUN_FILE

__all__ = ["SUMMARY_COLUMNS", "summary_rows", "write_summary"]

SUMMARY_COLUMNS: tuple[str, ...] = (
    "name", "method", "loss", "negatives", "alpha", "batch_size", "temperature", "optimizer", "seed",
    "epochs", "steps", "images_per_second", "loss_final", "mi_final", "npc_final", "npc_mean", "knn_top1",
    "knn_top5", "linear_top1", "alignment", "uniformity", "support_size", "wall_minutes", "status",
)  # fmt: skip
"""summary.csv: the run's settings (optimizer: empty for a run made before it was a setting, SGD);
steps made; training images/s (two views each); loss, MI
estimate (nats) and NPC multiplier q_B averaged over the last 10% of the steps (``*_final``) and
q_B over the whole run (``npc_mean``); kNN top-1/top-5 and linear top-1 (fractions; empty when not
evaluated); alignment and uniformity of the normalised embeddings on the held-out batch at the
run's last step (:mod:`mitool.vision.alignment`; empty for a run made before they were recorded);
nnclr's support set size (empty for the other methods); wall minutes of the run's last process
(pretraining and evaluation); status: done or diverged."""


def _mean(values: Sequence[float]) -> float:
    finite = [value for value in values if value is not None and math.isfinite(value)]
    return sum(finite) / len(finite) if finite else math.nan


def _training_figures(records: list[dict[str, Any]]) -> dict[str, float]:
    """images/s (total images / total time over the logged intervals), the means of loss, mi and
    npc over the last 10% of the steps, and npc over all of them."""
    training = [record for record in records if "loss" in record]
    if not training:
        return {
            key: math.nan for key in ("images_per_second", "loss_final", "mi_final", "npc_final", "npc_mean")
        }
    last_step = training[-1]["step"]
    tail = [record for record in training if record["step"] > 0.9 * last_step] or training[-1:]
    # an interval of s steps at r images/s took s * batch / r seconds: images/s = steps / sum(s / r)
    steps_before = [0] + [record["step"] for record in training[:-1]]
    step_seconds_per_image = sum(
        (record["step"] - before) / max(record["images_per_second"], 1e-9)
        for record, before in zip(training, steps_before, strict=True)
    )
    return {
        "images_per_second": last_step / step_seconds_per_image if step_seconds_per_image > 0 else math.nan,
        "loss_final": _mean([record["loss"] for record in tail]),
        "mi_final": _mean([record["mi"] for record in tail]),
        "npc_final": _mean([record["npc"] for record in tail]),
        "npc_mean": _mean([record["npc"] for record in training]),
    }


def _held_out_figures(records: list[dict[str, Any]]) -> dict[str, float | None]:
    """Alignment and uniformity of the last record that has them (None: no such record)."""
    measured = [record for record in records if "alignment" in record]
    last = measured[-1] if measured else {}
    return {"alignment": last.get("alignment"), "uniformity": last.get("uniformity")}


def summary_rows(out: str | os.PathLike) -> list[dict[str, Any]]:
    """One dict per finished run under OUT/runs (columns :data:`SUMMARY_COLUMNS`), sorted by name."""
    rows = []
    for directory in sorted(Path(out, "runs").glob("*/")):
        if not (directory / RESULT_FILE).is_file() or not (directory / RUN_FILE).is_file():
            continue
        plan = json.loads((directory / RUN_FILE).read_text())
        result = json.loads((directory / RESULT_FILE).read_text())
        config = plan["config"]
        records = read_records(str(directory))
        row = {
            key: config.get(key)
            for key in ("method", "loss", "negatives", "alpha", "batch_size", "temperature", "optimizer",
                        "seed", "epochs", "support_size")
        }  # fmt: skip
        row.update(_training_figures(records))
        row.update(_held_out_figures(records))
        row.update(
            name=plan["name"], steps=result.get("steps"), knn_top1=result.get("knn_top1"),
            knn_top5=result.get("knn_top5"), linear_top1=result.get("linear_top1"),
            wall_minutes=result["wall_seconds"] / 60, status=result["status"],
        )  # fmt: skip
        rows.append(row)
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.6g}"
    return str(value)


def write_summary(out: str | os.PathLike) -> Path:
    """OUT/summary.csv from every finished run; returns its path."""
    path = Path(out) / "summary.csv"
    rows = summary_rows(out)
    write_csv(path, SUMMARY_COLUMNS, [[_cell(row[column]) for column in SUMMARY_COLUMNS] for row in rows])
    return path
