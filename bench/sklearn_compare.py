"""mitool's default beside scikit-learn's mutual_info_classif and mutual_info_regression, on the
tasks where both apply (a 1-D X against a 1-D Y: scikit-learn estimates each feature alone), at
n = 5000 over 5 seeds (error of the mean against the truth), and the time of one estimate at
n = 10^5. Needs the optional extra: pip install -e '.[compare]'.

    python bench/sklearn_compare.py --json bench/results/benchmark/sklearn_compare.json
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import argument_parser, write_json  # noqa: E402

from mitool.benchmark.run import task_data  # noqa: E402
from mitool.benchmark.suites import suite  # noqa: E402
from mitool.estimation import estimate  # noqa: E402
from mitool.runtime import set_threads_to_free_cores  # noqa: E402

TASKS = {
    # task: (suite, the scikit-learn function, discrete_features)
    "classes-1d-3": ("discrete", "classif", False),
    "table-symmetric-4x4": ("discrete", "classif", True),
    "poisson-sum-4-2": ("discrete", "classif", True),
    "binomial-thinning-20-0.5-0.5": ("discrete", "classif", True),
    "zero-inflated-0.3-0.5": ("discrete", "regression", False),
    "rounded-2": ("discrete", "regression", False),
    "poisson-rate-0.7": ("discrete", "classif", False),
    "1v1-normal-0.75": ("bmi", "regression", False),
    "1v1-additive-0.1": ("bmi", "regression", False),
    "1v1-additive-0.75": ("bmi", "regression", False),
    "1v1-bimodal-0.75": ("bmi", "regression", False),
    "student-identity-1-1-1": ("bmi", "regression", False),
}


def sklearn_mi(kind: str, discrete: bool, x: np.ndarray, y: np.ndarray, seed: int) -> float:
    from sklearn.feature_selection import mutual_info_classif, mutual_info_regression

    if kind == "classif":
        return float(
            mutual_info_classif(x, y[:, 0].astype(int), discrete_features=discrete, random_state=seed)[0]
        )
    return float(mutual_info_regression(x, y[:, 0], discrete_features=discrete, random_state=seed)[0])


def timed(function, *arguments) -> tuple[float, float]:
    start = time.perf_counter()
    value = function(*arguments)
    return value, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--large", type=int, default=100_000, help="n of the timing")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    set_threads_to_free_cores()
    tasks = {task.name: task for name in ("discrete", "bmi") for task in suite(name)}
    rows = []
    for name, (_, kind, discrete) in TASKS.items():
        task = tasks[name]
        ours, theirs = [], []
        for seed in range(args.seeds):
            x, y = task_data(task, args.n, seed)[:2]
            ours.append(float(estimate(x, y, seed=seed)))
            theirs.append(sklearn_mi(kind, discrete, x, y, seed))
        x, y = task_data(task, args.large, 0)[:2]
        result, our_seconds = timed(estimate, x, y)
        _, their_seconds = timed(sklearn_mi, kind, discrete, x, y, 0)
        row = {
            "task": name, "true_mi": task.mi, "mitool_estimator": result.estimator,
            "sklearn": f"mutual_info_{kind}", "mitool_error": float(np.mean(ours) - task.mi),
            "sklearn_error": float(np.mean(theirs) - task.mi), "mitool_seconds_large": our_seconds,
            "sklearn_seconds_large": their_seconds, "n_large": args.large,
        }  # fmt: skip
        rows.append(row)
        print(f"{name:32s} truth {task.mi:.3f}  mitool ({result.estimator}) {row['mitool_error']:+.3f} "
              f"{our_seconds:.2f} s, sklearn {row['sklearn_error']:+.3f} {their_seconds:.2f} s")  # fmt: skip
    if args.json:
        write_json(args.json, {"n": args.n, "seeds": args.seeds, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
