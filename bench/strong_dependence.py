"""Strong dependence (issue 27): where the capped estimators start to fall short, and which routes
get past their ceilings. Two measurements, each printed as JSON lines and written with --json:

    python bench/strong_dependence.py saturation --json bench/results/benchmark/saturation.json
    python bench/strong_dependence.py routes --json bench/results/benchmark/routes.json

``saturation``: the default's InfoNCE (two critics; named, so that it is not handed to flow) on
correlated Gaussians of 5 x 5 and 20 x 20 dimensions at 2 .. 6 nats, and KSG on rank scores at
1 + 1, 2 + 2 and 5 + 5 dimensions from 1 to 10 nats, n = 10 000 (where SATURATION_GAP of
mitool.estimators.neural and of mitool.estimators.ksg come from). ``routes``: every route past
InfoNCE's ceiling tried on two 10-nat tasks of the highmi suite, n = 10 000, one draw.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import argument_parser  # noqa: E402

import mitool  # noqa: E402
from mitool.benchmark.suites import get_task
from mitool.runtime import set_threads_to_free_cores

ROUTES = {
    "infonce": {"estimator": "infonce", "ensemble": 2},
    "infonce scored with eqco, alpha = 1e6": {"estimator": "infonce", "ensemble": 2, "evaluator": "eqco",
                                              "alpha": 1e6},
    "infonce scored with dcl (uncapped)": {"estimator": "infonce", "ensemble": 2, "evaluator": "dcl"},
    "smile (tau = 5)": {"estimator": "smile"},
    "smile trained, scored with dv": {"estimator": "smile", "evaluator": "dv"},
    "nwj": {"estimator": "nwj"},
    "flow": {"estimator": "flow"},
    "gaussian": {"estimator": "gaussian"},
}  # fmt: skip


def _gaussian_pair(n: int, mi: float, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    rho = math.sqrt(-math.expm1(-2 * mi / dim))
    x = rng.normal(size=(n, dim))
    return x, rho * x + math.sqrt(1 - rho**2) * rng.normal(size=(n, dim))


def saturation() -> list[dict]:
    rows = []
    cases = [("infonce", dim, mi) for dim in (5, 20) for mi in (2.0, 3.0, 4.0, 5.0, 6.0)]
    cases += [("ksg", dim, mi) for dim in (1, 2, 5) for mi in (1, 2, 3, 4, 5, 6, 8, 10)]
    for estimator, dim, mi in cases:
        x, y = _gaussian_pair(10_000, mi, dim, seed=1)
        start = time.perf_counter()
        settings = {"ensemble": 2} if estimator == "infonce" else {}  # the default's critics, not rerouted
        result = mitool.estimate(x, y, estimator=estimator, seed=0, **settings)
        seconds = time.perf_counter() - start
        rows.append({"estimator": estimator, "dim": dim, "truth": mi,
                     "value": result.value, "ci_high": result.ci_high,
                     "ceiling": result.details.get("ceiling"), "seconds": seconds})  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    return rows


def routes(tasks: list[str]) -> list[dict]:
    rows = []
    for name in tasks:
        task = get_task(name)
        x, y = (
            part.numpy()
            for part in task.sample(10_000, torch.Generator().manual_seed(0), dtype=torch.float64)
        )
        for label, settings in ROUTES.items():
            start = time.perf_counter()
            result = mitool.estimate(x, y, **settings)
            rows.append({"task": name, "truth": task.mi, "route": label, "value": result.value,
                         "ci_high": result.ci_high, "seconds": time.perf_counter() - start})  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("part", choices=("saturation", "routes"))
    parser.add_argument("--tasks", default="normal-5x5-10nats,rotated-halfcube-5x5-10nats")
    parser.add_argument("--json", default=None, help="Write the rows here.")
    args = parser.parse_args()
    set_threads_to_free_cores()
    rows = saturation() if args.part == "saturation" else routes(args.tasks.split(","))
    if args.json:
        with open(args.json, "w") as stream:
            json.dump(rows, stream, indent=1)


if __name__ == "__main__":
    main()
