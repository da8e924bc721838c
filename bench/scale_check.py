"""The default's check of dependence through the scale (mitool.trust.scale_estimate) on a ``mitool
benchmark`` results.csv made before it: for each row of the default, the scales' estimate of the
same samples as the default hands them to its estimator (mitool.benchmark.run.task_data: the same
draw for the same task, size and seed; mitool.estimation.prepare: its ties treated), and the value
the default reports now, the higher of the two (mitool.trust.through_the_scale). Nothing else
is re-estimated: the neural estimates are those of the file, which the check leaves as they are.

    python bench/scale_check.py bench/results/benchmark/bmi_n10000/results.csv \\
        --estimator default:steps=4000 --json bench/results/benchmark/scale_check/bmi_n10000.json

A JSON file of bench/bmi_samples.py is read too (bmi's own samples, standardised as there).
"""

from __future__ import annotations

import csv
import json
import os
import sys
from collections.abc import Iterator

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bmi_samples import SAMPLES, standardised, within_target  # noqa: E402
from harness import argument_parser, write_json  # noqa: E402

from mitool.benchmark.run import Precision, task_data  # noqa: E402
from mitool.benchmark.suites import get_task  # noqa: E402
from mitool.estimation import prepare  # noqa: E402
from mitool.estimators import DEFAULTS  # noqa: E402
from mitool.runtime import set_threads_to_free_cores  # noqa: E402
from mitool.trust import THROUGH_THE_SCALE, scale_estimate  # noqa: E402


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


def _rows_and_samples(path: str, estimator: str) -> Iterator[tuple[dict, tuple[np.ndarray, np.ndarray]]]:
    """Each row of the results file with its samples: a results.csv of ``mitool benchmark`` (its
    rows of ``estimator``; the draws of mitool.benchmark.run.task_data) or a JSON file of
    bench/bmi_samples.py (bmi's own samples, standardised as there)."""
    if path.endswith(".json"):
        made = json.load(open(path))
        folder = SAMPLES / made["suite"]
        files = {
            task["task_id"]: task["files"]
            for task in json.loads((folder / "tasks.json").read_text())["tasks"]
        }
        for row in made["rows"]:
            if "estimate" in row:
                with np.load(folder / files[row["task"]][str(row["seed"])]["file"]) as archive:
                    x, y = archive["x"][: made["pairs"]], archive["y"][: made["pairs"]]
                yield row, (x, y) if made["as_given"] else (standardised(x), standardised(y))
        return
    config = json.load(open(os.path.join(os.path.dirname(path), "config.json")))
    precision = Precision(config.get("dtype", "float64"), config.get("digits", 0))
    with open(path) as file:
        for row in csv.DictReader(file):
            if row["estimator"] == estimator:
                yield row, task_data(get_task(row["task"]), int(row["n"]), int(row["seed"]), precision)[:2]


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    parser.add_argument(
        "results", help="A results.csv of mitool benchmark, or a JSON file of bmi_samples.py."
    )
    parser.add_argument("--estimator", default="default", help="Its rows of this estimator.")
    parser.add_argument("--json", default=None, help="Write the rows and the summary here.")
    arguments = parser.parse_args(argv)
    set_threads_to_free_cores()
    rows, routes = [], [DEFAULTS[case].name for case in THROUGH_THE_SCALE]
    for row, (x, y) in _rows_and_samples(arguments.results, arguments.estimator):
        seed = int(row["seed"])
        prepared = prepare(x, y, seed=seed)
        # the check is made where the default's estimator is InfoNCE only
        checked = prepared.estimator is not None and prepared.estimator.name in routes
        scale = scale_estimate(prepared.x, prepared.y, seed=seed) if checked else None
        value = float(row["estimate"])
        rows.append({
            "task": row["task"], "seed": seed, "n": len(x), "true_mi": float(row["true_mi"]),
            "estimate": value, "checked": checked, "scale": None if scale is None else scale.value,
            "reported": value if scale is None else max(value, scale.value),
        })  # fmt: skip
        print(f"{row['task']} seed {seed}: {value:.3f}, scales {rows[-1]['scale']}", flush=True)
    switched = [row for row in rows if row["reported"] != row["estimate"]]
    result = {
        "results": arguments.results, "checked": sum(row["checked"] for row in rows),
        "switched": len(switched),
        "before": summary(rows, "estimate"), "after": summary(rows, "reported"),
        "switched_rows": switched, "rows": rows,
    }  # fmt: skip
    print(json.dumps({key: result[key] for key in ("checked", "switched", "before", "after")}, indent=1))
    if arguments.json:
        write_json(arguments.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
