"""The estimation routes on the ``families`` suite (issue 50): each task of
:func:`mitool.benchmark.families.families_suite` sampled once per size (float64, the CPU generator
seeded with ``--seed``), each route's ``mitool.estimate(x, y, estimator=...)`` timed, and the mean
absolute error per family and route printed.

Routes: ``default`` (the estimator mitool chooses), ``ksg``, ``gaussian`` and ``flow``. The neural
routes (default, flow: tens of seconds an estimate on one CPU core at n = 1000) run only at sizes up
to ``--slow-max-n``.

    MITOOL_THREADS=1 OMP_NUM_THREADS=1 nice -n 10 python bench/families_routes.py \\
        --sizes 1000,5000 --slow-max-n 1000 --out bench/results/families_routes.csv

writes one row per (task, n, route): task, family, dim_x, dim_y, true_mi, n, route, estimate,
seconds (wall).
"""

from __future__ import annotations

import argparse
import csv
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

import mitool
from mitool.benchmark.families import families_suite

ROUTES = ("default", "ksg", "gaussian", "flow")
SLOW_ROUTES = ("default", "flow")
COLUMNS = ("task", "family", "dim_x", "dim_y", "true_mi", "n", "route", "estimate", "seconds")


def run(sizes: list[int], routes: list[str], slow_max_n: int, seed: int, out: Path) -> list[dict]:
    rows: list[dict] = []
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=COLUMNS)
        writer.writeheader()
        for task in families_suite():
            for n in sizes:
                x, y = task.sample(n, torch.Generator().manual_seed(seed), dtype=torch.float64)
                x, y = x.numpy(), y.numpy()
                for route in routes:
                    if route in SLOW_ROUTES and n > slow_max_n:
                        continue
                    start = time.perf_counter()
                    result = mitool.estimate(x, y, estimator=None if route == "default" else route, seed=seed)
                    row = {
                        "task": task.name, "family": task.family, "dim_x": task.dim_x, "dim_y": task.dim_y,
                        "true_mi": round(task.mi, 6), "n": n, "route": route,
                        "estimate": round(float(result.value), 6),
                        "seconds": round(time.perf_counter() - start, 3),
                    }  # fmt: skip
                    writer.writerow(row)
                    file.flush()
                    rows.append(row)
                    print(" ".join(f"{key}={row[key]}" for key in COLUMNS), flush=True)
    return rows


def mae_table(rows: list[dict]) -> str:
    """Mean absolute error per family (rows) and route (columns), one table per n, with the
    overall MAE and the total seconds of each route."""
    lines = []
    for n in sorted({row["n"] for row in rows}):
        at_n = [row for row in rows if row["n"] == n]
        routes = list(dict.fromkeys(row["route"] for row in at_n))
        errors: dict[tuple[str, str], list[float]] = defaultdict(list)
        for row in at_n:
            errors[row["family"], row["route"]].append(abs(row["estimate"] - row["true_mi"]))
            errors["all", row["route"]].append(abs(row["estimate"] - row["true_mi"]))
        families = list(dict.fromkeys(row["family"] for row in at_n)) + ["all"]
        lines += [f"\nn = {n}: mean absolute error (nats)", "| family | " + " | ".join(routes) + " |"]
        lines.append("|---" * (len(routes) + 1) + "|")
        for family in families:
            cells = [f"{np.mean(errors[family, route]):.3f}" for route in routes]
            lines.append(f"| {family} | " + " | ".join(cells) + " |")
        seconds = [f"{sum(r['seconds'] for r in at_n if r['route'] == route):.0f}" for route in routes]
        lines.append("| seconds (all tasks) | " + " | ".join(seconds) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000", help="Comma-separated sample sizes.")
    parser.add_argument("--routes", default=",".join(ROUTES), help="Comma-separated routes.")
    parser.add_argument("--slow-max-n", type=int, default=1000, help="Largest n for default and flow.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("bench/results/families_routes.csv"))
    arguments = parser.parse_args()
    sizes = [int(size) for size in arguments.sizes.split(",")]
    rows = run(sizes, arguments.routes.split(","), arguments.slow_max_n, arguments.seed, arguments.out)
    print(mae_table(rows))


if __name__ == "__main__":
    main()
