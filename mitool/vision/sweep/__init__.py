"""A grid of pretraining runs with their evaluation (``mitool vision sweep``), one file per job:

* :mod:`~mitool.vision.sweep.grid`: the axes and their expansion into checked runs;
* :mod:`~mitool.vision.sweep.worker`: one run (pretraining, kNN, linear probe) in its own process;
* :mod:`~mitool.vision.sweep.launcher`: the runs' processes on :mod:`mitool._infra.runner`, the progress;
* :mod:`~mitool.vision.sweep.summary` and :mod:`~mitool.vision.sweep.plots`: OUT/summary.csv and
  the figures (knn_vs_k, knn_vs_batch, curves).
"""

from mitool.vision.sweep.grid import Evaluation, Grid, SweepRun, expand, run_name
from mitool.vision.sweep.launcher import SweepFailed, run_sweep
from mitool.vision.sweep.summary import SUMMARY_COLUMNS, summary_rows, write_summary

__all__ = [
    "SUMMARY_COLUMNS",
    "Evaluation",
    "Grid",
    "SweepFailed",
    "SweepRun",
    "expand",
    "run_name",
    "run_sweep",
    "summary_rows",
    "write_summary",
]
