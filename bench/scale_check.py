"""The default's check of dependence through the scale (mitool.estimation.scale_estimate) on a ``mitool
benchmark`` results.csv made before it: for each row of the default, the scales' estimate of the
same samples as the default hands them to its estimator (mitool.benchmark.run.task_data: the same
draw for the same task, size and seed; mitool.estimation.prepare: its ties treated), and the value
the default reports now, the higher of the two (mitool.estimation.through_the_scale). Nothing else
is re-estimated: the neural estimates are those of the file, which the check leaves as they are.

    python bench/scale_check.py bench/results/benchmark/bmi_n10000/results.csv \\
        --json bench/results/benchmark/scale_check_bmi_n10000.json
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import write_json  # noqa: E402

from mitool.benchmark.run import Precision, task_data  # noqa: E402
from mitool.benchmark.suites import get_task  # noqa: E402
from mitool.estimation import THROUGH_THE_SCALE, prepare, scale_estimate  # noqa: E402
from mitool.estimators import DEFAULTS  # noqa: E402
from mitool.runtime import set_threads_to_free_cores  # noqa: E402


def within_target(error: float, truth: float) -> bool:
    """The benchmark's target: |error| <= max(0.1 nats, 10% of the truth)."""
    return abs(error) <= max(0.1, 0.1 * truth)


def summary(rows: list[dict], key: str) -> dict:
    """MAE and tasks of at most 2 nats within target (mean error over seeds) of the values ``key``."""
    by_task: dict[str, list[dict]] = {}
    for row in rows:
        by_task.setdefault(row["task"], []).append(row)
    means = {task: float(np.mean([r[key] - r["true_mi"] for r in group])) for task, group in by_task.items()}
    scored = [task for task in by_task if by_task[task][0]["true_mi"] <= 2]
    return {
        "mae": float(np.mean([abs(r[key] - r["true_mi"]) for r in rows])),
        "within_target": sum(within_target(means[task], by_task[task][0]["true_mi"]) for task in scored),
        "tasks_to_2_nats": len(scored),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="A results.csv of mitool benchmark.")
    parser.add_argument("--estimator", default="default", help="Its rows of this estimator.")
    parser.add_argument("--json", default=None, help="Write the rows and the summary here.")
    arguments = parser.parse_args(argv)
    set_threads_to_free_cores()
    folder = os.path.dirname(arguments.results)
    config = json.load(open(os.path.join(folder, "config.json")))
    precision = Precision(config.get("dtype", "float64"), config.get("digits", 0))
    rows = []
    with open(arguments.results) as file:
        for row in csv.DictReader(file):
            if row["estimator"] != arguments.estimator:
                continue
            task, n, seed = get_task(row["task"]), int(row["n"]), int(row["seed"])
            prepared = prepare(*task_data(task, n, seed, precision)[:2], seed=seed)
            routes = [DEFAULTS[case].name for case in THROUGH_THE_SCALE]
            if prepared.estimator is None or prepared.estimator.name not in routes:
                continue  # the check is made where the default's estimator is InfoNCE only
            scale = scale_estimate(prepared.x, prepared.y, seed=seed)
            value = float(row["estimate"])
            reported = max(value, scale.value) if scale is not None else value
            rows.append({
                "task": row["task"], "seed": seed, "n": n, "true_mi": float(row["true_mi"]),
                "estimate": value, "scale": None if scale is None else scale.value, "reported": reported,
            })  # fmt: skip
            print(f"{row['task']} seed {seed}: {value:.3f}, scales {rows[-1]['scale']}", flush=True)
    switched = [row for row in rows if row["reported"] != row["estimate"]]
    result = {
        "results": arguments.results, "checked": len(rows), "switched": len(switched),
        "before": summary(rows, "estimate"), "after": summary(rows, "reported"),
        "switched_rows": switched, "rows": rows,
    }  # fmt: skip
    print(json.dumps({key: result[key] for key in ("checked", "switched", "before", "after")}, indent=1))
    if arguments.json:
        write_json(arguments.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
