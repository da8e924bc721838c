"""KSG's speed: one estimate (k = 5) of n pairs of the dense Gaussian at d + d dimensions, with the
k-d tree counts and with the all-pairs counts, best of a few repeats; and the estimate with its
standard error (10 disjoint subsets) as ``mitool estimate --estimator ksg`` makes it.

    python bench/ksg_speed.py                       # n = 5000 at 25 + 25 and 5 + 5 dimensions
    python bench/ksg_speed.py --json bench/results/benchmark/ksg_speed_cpu.json
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import argument_parser, write_json  # noqa: E402

from mitool import estimators  # noqa: E402
from mitool.estimators.ksg import ksg  # noqa: E402
from mitool.runtime import set_threads_to_free_cores  # noqa: E402
from mitool.tasks import dense_normal  # noqa: E402


def best_seconds(function, arguments: tuple, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function(*arguments)
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--dims", default="25,5", help="comma-separated d (X and Y each have d)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    set_threads_to_free_cores()
    rows = []
    for dim in (int(d) for d in args.dims.split(",")):
        task = dense_normal(dim, dim)
        x, y = (a.numpy() for a in task.sample(args.n, torch.Generator().manual_seed(0), dtype=torch.float64))
        row = {
            "n": args.n,
            "dim_x": dim,
            "dim_y": dim,
            "true_mi": task.mi,
            "threads": torch.get_num_threads(),
        }
        for method in ("tree", "all-pairs"):
            row[f"seconds_{method}"] = best_seconds(ksg, (x, y, 5, method), args.repeats)
        row["estimate"] = ksg(x, y, 5)
        row["seconds_with_stderr"] = best_seconds(estimators.get("ksg").estimate, (x, y), args.repeats)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        write_json(args.json, {"rows": rows, "load_average": os.getloadavg()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
