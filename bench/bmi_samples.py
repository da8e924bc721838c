"""mitool on samples it did not draw: bmi's own float32 draws of its v1 (40 tasks) and v2 (26
tasks) suites, from ../shared/bmi-samples (drawn by the bmi package: PyPI benchmark-mi 0.1.3, seeds
3 and 4, n = 5000), against the true MI bmi reports.

Each column is standardised as bmi's pipeline does (sklearn.preprocessing.scale per column: the
affine map keeps every tie of the float32 values); ``--as-given`` passes the float32 arrays
unscaled instead, as a user would. ``--pairs N`` uses the first N pairs of each sample (small
samples). ``--estimator`` names a route as ``mitool benchmark --estimators`` does
(``default:folds=5``; parse_estimator). An estimate the default refuses is counted as refused, with
its message.

    python bench/bmi_samples.py --suite v1 --json bench/results/benchmark/bmi_samples_v1.json
    python bench/bmi_samples.py --suite v2 --json bench/results/benchmark/bmi_samples_v2.json
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import argument_parser, write_json  # noqa: E402

from mitool.benchmark.run import parse_estimator  # noqa: E402
from mitool.checks import ParameterError  # noqa: E402
from mitool.estimation import DefaultEstimator  # noqa: E402
from mitool.runtime import set_threads_to_free_cores  # noqa: E402

SAMPLES = Path(__file__).resolve().parent.parent.parent / "shared" / "bmi-samples"


CHOICES = ("normalise", "advantage_by_normalise", "k")
"""The details of a result that say what the default decided, kept in each row."""


def within_target(error: float, truth: float) -> bool:
    """The benchmark's target: |error| <= max(0.1 nats, 10% of the truth)."""
    return abs(error) <= max(0.1, 0.1 * truth)


def standardised(values: np.ndarray) -> np.ndarray:
    """Each column minus its mean, over its standard deviation, in float64 (as sklearn's scale)."""
    values = values.astype(np.float64)
    scale = values.std(axis=0)
    return (values - values.mean(axis=0)) / np.where(scale > 0, scale, 1.0)


def run_task(
    task: dict, folder: Path, pairs: int | None, as_given: bool, estimator: DefaultEstimator
) -> list[dict]:
    rows = []
    for seed, entry in task["files"].items():
        with np.load(folder / entry["file"]) as archive:
            x, y = archive["x"][:pairs], archive["y"][:pairs]
        if not as_given:
            x, y = standardised(x), standardised(y)
        start = time.perf_counter()
        row = {"task": task["task_id"], "seed": int(seed), "true_mi": task["mi_true_nats"], "n": len(x)}
        try:
            result = estimator.estimate(x, y, seed=int(seed))
        except ParameterError as error:
            row.update(refused=str(error))
        else:
            truth = task["mi_true_nats"]
            row.update(
                estimate=result.value, error=result.value - truth, ci_low=result.ci_low,
                ci_high=result.ci_high, estimator=result.estimator,
                covered=bool(result.ci_low <= truth <= result.ci_high),
                bias_high=result.details.get("bias_high"),
                covered_with_bias=bool(
                    result.ci_low <= truth <= result.details.get("bias_high", result.ci_high)
                ),
            )  # fmt: skip
            # what the default decided: the preparation (normalise="auto") and KSG's k
            row.update({key: result.details[key] for key in CHOICES if key in result.details})
        row["seconds"] = time.perf_counter() - start
        rows.append(row)
    return rows


def summary(rows: list[dict]) -> dict:
    """MAE over the estimates, tasks within target (the mean error over seeds), refusals, coverage."""
    scored = [row for row in rows if "estimate" in row]
    by_task: dict[str, list[dict]] = {}
    for row in scored:
        by_task.setdefault(row["task"], []).append(row)
    mean_errors = {task: float(np.mean([r["error"] for r in group])) for task, group in by_task.items()}
    within = [
        task for task, error in mean_errors.items() if within_target(error, by_task[task][0]["true_mi"])
    ]
    worst = sorted(mean_errors.items(), key=lambda item: -abs(item[1]))[:8]
    return {
        "estimates": len(rows),
        "refused": len(rows) - len(scored),
        "mae": float(np.mean([abs(r["error"]) for r in scored])) if scored else None,
        "tasks": len(by_task),
        "within_target": len(within),
        "worst": [{"task": task, "mean_error": error} for task, error in worst],
        "coverage": float(np.mean([r["covered"] for r in scored])) if scored else None,
        "coverage_with_bias": float(np.mean([r.get("covered_with_bias", r["covered"]) for r in scored]))
        if scored
        else None,
        "seconds_per_estimate": float(np.mean([r["seconds"] for r in rows])),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("--suite", choices=("v1", "v2"), default="v1")
    parser.add_argument("--pairs", type=int, default=None, help="Use the first N pairs of each sample.")
    parser.add_argument("--as-given", action="store_true", help="float32 as drawn, not standardised.")
    parser.add_argument(
        "--estimator", default="default",
        help="An estimator as mitool benchmark --estimators names one: default, a registry name, with "
        ":key=value settings (default:folds=5, infonce:ensemble=4).",
    )  # fmt: skip
    parser.add_argument("--tasks", default=None, help="Comma-separated task ids (default: all).")
    parser.add_argument("--json", default=None, help="Write the rows and the summary here.")
    arguments = parser.parse_args(argv)
    set_threads_to_free_cores()
    folder = SAMPLES / arguments.suite
    if not folder.is_dir():
        print(f"no bmi samples at {folder}", file=sys.stderr)
        return 2
    tasks = json.loads((folder / "tasks.json").read_text())["tasks"]
    if arguments.tasks:
        chosen = arguments.tasks.split(",")
        unknown = sorted(set(chosen) - {task["task_id"] for task in tasks})
        if unknown:
            print(f"error: --tasks: no task {', '.join(unknown)} in {arguments.suite}; "
                  f"its tasks are in {folder / 'tasks.json'}", file=sys.stderr)  # fmt: skip
            return 2
        tasks = [task for task in tasks if task["task_id"] in set(chosen)]
    try:
        spec = parse_estimator(arguments.estimator)
        estimator = spec.build()
    except ParameterError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    rows = []
    for task in tasks:
        done = run_task(task, folder, arguments.pairs, arguments.as_given, estimator)
        rows += done
        values = [f"{row['estimate']:.3f}" if "estimate" in row else "refused" for row in done]
        shown = ", ".join(f"seed {row['seed']} {value}" for row, value in zip(done, values, strict=True))
        print(f"{task['task_id']}: truth {task['mi_true_nats']:.3f}; {shown}", flush=True)
    result = {
        "suite": arguments.suite, "pairs": arguments.pairs, "as_given": arguments.as_given,
        "estimator": spec.name, "settings": spec.settings, "summary": summary(rows),
        "rows": rows,
    }  # fmt: skip
    print(json.dumps(result["summary"], indent=1))
    if arguments.json:
        write_json(arguments.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
