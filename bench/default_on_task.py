"""The default estimate of one task of the ``families`` suite, with what its training did: the
task's truth, the estimate, the route, the steps trained and the step kept, and the time.

    python bench/default_on_task.py sandwich-normal 2 5000 '{"steps": 8000}'

Arguments: family, seed, n (one draw, the CPU generator seeded 0), and optional settings for
``mitool.estimate`` as JSON.
"""

from __future__ import annotations

import json
import sys
import time

import torch

import mitool
from mitool.benchmark.families import family_task


def main() -> None:
    family, seed, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    settings = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    task = family_task(family, seed)
    x, y = task.sample(n, torch.Generator().manual_seed(0), dtype=torch.float64)
    start = time.perf_counter()
    result = mitool.estimate(x.numpy(), y.numpy(), **settings)
    details = result.details
    print(f"{task.name} ({task.dim_x} x {task.dim_y}): truth {task.mi:.3f}, estimate {result.value:.3f} by "
          f"{result.estimator}; steps {details.get('steps')}, best step {details.get('best_step')}, ended by "
          f"{details.get('ended_by')}; {time.perf_counter() - start:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
