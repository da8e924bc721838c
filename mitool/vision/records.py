"""The records of a pretraining run in its folder OUT, written by the run and by its evaluations,
read by ``mitool vision plot``.

* OUT/config.json: the run's resolved settings (written atomically when the run starts).
* OUT/metrics.jsonl: one JSON object a line, appended as the run goes: every ``log_every`` steps
  (and when the run stops: the record of the interval so far, marked ``"partial": true``) the
  means of the interval, every ``knn_every`` epochs the kNN monitor's record (with the alignment
  and uniformity of the held-out batch), and when the run ends a record of alignment and
  uniformity at its last step unless the monitor's holds them (:mod:`mitool.vision.alignment`). A
  line cut short by a crash is skipped by the readers and dropped on resume.

  Resume and the interval records: the checkpoint holds the open interval (its step count, sums
  and time: :meth:`Interval.state_dict`) and the resumed run continues it, so every record
  averages the same steps as in one uninterrupted run; a resume drops the records after the
  checkpoint's step and the partial record of the stop (:func:`keep_records_up_to`), whose steps
  the resumed run's next record covers. The file then holds the records of one uninterrupted run
  (besides the alignment record of a run that ended at ``max_steps`` or ``max_minutes`` and was
  continued). A checkpoint without the interval (written before it was saved) resumes with an
  empty one, as before.
* OUT/evaluations.json: a list of the results of ``mitool vision knn`` and ``mitool vision
  linear`` on the run's checkpoint (rewritten atomically, one entry added per evaluation).

Every record has ``step`` (optimizer steps done) and ``epoch`` (epochs done, with the fraction
of the current one: 1.25 is a quarter into the second epoch).
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

from mitool._infra.files import appending, atomic_write_json, atomic_write_text

__all__ = [
    "CONFIG_NAME",
    "EVALUATIONS_NAME",
    "METRICS_NAME",
    "Interval",
    "MetricsLog",
    "add_evaluation",
    "keep_records_up_to",
    "read_config",
    "read_evaluations",
    "read_records",
    "write_config",
]

CONFIG_NAME = "config.json"
METRICS_NAME = "metrics.jsonl"
EVALUATIONS_NAME = "evaluations.json"
STEP_SCALARS = ("loss", "mi", "npc", "grad_norm")
"""The step's scalars that a metrics record averages over its interval."""


def _json_lines(path: str) -> list[tuple[str, dict[str, Any]]]:
    """(line, record) of every whole JSON object line of ``path`` (a cut last line is left out)."""
    if not os.path.exists(path):
        return []
    lines = []
    with open(path) as file:
        for line in file:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                lines.append((line if line.endswith("\n") else line + "\n", record))
    return lines


def read_records(out: str) -> list[dict[str, Any]]:
    """The records of OUT/metrics.jsonl (FileNotFoundError when the folder has none)."""
    path = os.path.join(out, METRICS_NAME)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no {METRICS_NAME} in {out} (is it the --out of a pretraining run?)")
    return [record for _, record in _json_lines(path)]


def keep_records_up_to(path: str, step: int) -> list[dict[str, Any]]:
    """Keep only the records of steps <= ``step`` in the metrics file ``path`` (the run being
    resumed, from its checkpoint at ``step``), less the partial records (the record written when
    the run stopped mid-interval: the resumed run continues that interval from the checkpoint and
    writes its whole record), rewritten atomically; returns them."""
    kept = [
        (line, record)
        for line, record in _json_lines(path)
        if record.get("step", 0) <= step and not record.get("partial")
    ]
    atomic_write_text(path, "".join(line for line, _ in kept))
    return [record for _, record in kept]


def write_config(out: str, config: dict[str, Any]) -> None:
    atomic_write_json(os.path.join(out, CONFIG_NAME), config)


def read_config(out: str) -> dict[str, Any] | None:
    """The run's settings from OUT/config.json; None when the run has none (an older run)."""
    path = os.path.join(out, CONFIG_NAME)
    if not os.path.isfile(path):
        return None
    with open(path) as file:
        return json.load(file)


def read_evaluations(out: str) -> list[dict[str, Any]]:
    """The evaluations recorded in OUT/evaluations.json (none: [])."""
    path = os.path.join(out, EVALUATIONS_NAME)
    if not os.path.isfile(path):
        return []
    with open(path) as file:
        entries = json.load(file)
    return entries if isinstance(entries, list) else []


def add_evaluation(out: str, entry: dict[str, Any]) -> str:
    """Add ``entry`` (with ``kind`` "knn" or "linear", ``step``, ``epoch`` and its results) to
    OUT/evaluations.json, rewritten atomically; returns the file's path."""
    path = os.path.join(out, EVALUATIONS_NAME)
    atomic_write_json(path, [*read_evaluations(out), entry])
    return path


class MetricsLog:
    """Appends records to OUT/metrics.jsonl (when ``enabled``: rank 0), and to TensorBoard when
    it is installed. Each record is one line, flushed at once."""

    def __init__(self, out: str, enabled: bool) -> None:
        self.path = os.path.join(out, METRICS_NAME)
        self.enabled = enabled
        self.tensorboard = None
        if enabled:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tensorboard = SummaryWriter(os.path.join(out, "tensorboard"))
            except ImportError:
                self.tensorboard = None

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with appending(self.path) as file:  # appended: one line per record (see the module's note)
            file.write(json.dumps(record) + "\n")
        if self.tensorboard is not None:
            for key, value in record.items():
                if key not in ("step", "epoch") and isinstance(value, float) and math.isfinite(value):
                    self.tensorboard.add_scalar(key, value, record["step"])

    def close(self) -> None:
        if self.tensorboard is not None:
            self.tensorboard.close()


class Interval:
    """Sums of the step scalars since the last metrics record, and the time spent waiting for data.

    The checkpoint holds the open interval (:meth:`state_dict`, :meth:`load_state_dict`): a
    resumed run's next record averages the same steps as an uninterrupted run's."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.steps = 0
        self.sums = dict.fromkeys(STEP_SCALARS, 0.0)
        self.data_wait = 0.0
        self.started = time.perf_counter()

    def add(self, scalars: Any) -> None:
        """Add one step's ``scalars`` (an object with the attributes of :data:`STEP_SCALARS`; a
        value may be a 0-dim tensor on the device, summed there and read when the record is made)."""
        self.steps += 1
        for key in self.sums:
            value = getattr(scalars, key)
            self.sums[key] = self.sums[key] + (value.detach() if hasattr(value, "detach") else value)

    def state_dict(self) -> dict[str, Any]:
        """The open interval as numbers (a checkpoint's entry): its step count, the sums (read from
        the device: a float32 sum is exact as a float, and adding the next step's tensor to it gives
        the uninterrupted run's sum), the seconds since it started and those spent waiting for data."""
        return {
            "steps": self.steps,
            "sums": {key: float(value) for key, value in self.sums.items()},
            "seconds": time.perf_counter() - self.started,
            "data_wait": float(self.data_wait),
        }

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """Continue the interval saved by :meth:`state_dict`; None (a checkpoint written before the
        interval was saved): an empty interval. Its clock goes on from the saved seconds."""
        self.reset()
        if not state:
            return
        self.steps = int(state["steps"])
        self.sums.update({key: float(value) for key, value in state["sums"].items() if key in self.sums})
        self.data_wait = float(state.get("data_wait", 0.0))
        self.started -= float(state.get("seconds", 0.0))

    def record(
        self, step: int, epoch: float, lr: float, images_per_step: int, partial: bool = False
    ) -> dict[str, Any]:
        """The record of the interval (means of the scalars, lr, images/s, the fraction of the time
        spent waiting for data, and ``"partial": true`` when ``partial``: written when the run stops
        mid-interval, dropped on resume); starts the next interval."""
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        record: dict[str, Any] = {"step": step, "epoch": epoch}
        record.update({key: float(value) / max(self.steps, 1) for key, value in self.sums.items()})
        record.update(
            lr=lr,
            images_per_second=images_per_step * self.steps / elapsed,
            data_wait_fraction=min(1.0, self.data_wait / elapsed),
        )
        if partial:
            record["partial"] = True
        self.reset()
        return record
