"""KSG and the Gaussian estimator beside the default's stored rows on bmi's own samples (n = 5000,
bench/results/benchmark/bmi_samples_v{1,2}.json), and the coverage of the hull of their intervals
with the default's (issue 25: does widening the interval to the other cheap routes cover the
default's bias?).

    python bench/interval_routes.py bench/results/benchmark/interval_routes.json
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bmi_samples import SAMPLES, standardised  # noqa: E402

from mitool.estimation import estimate  # noqa: E402

ROUTES = ("ksg", "gaussian")


def run() -> list[dict]:
    rows = []
    for suite in ("v1", "v2"):
        with open(f"bench/results/benchmark/bmi_samples_{suite}.json") as file:
            stored = json.load(file)["rows"]
        for row in stored:
            with np.load(SAMPLES / suite / f"{row['task']}__seed{row['seed']}.npz") as archive:
                x, y = standardised(archive["x"]), standardised(archive["y"])
            entry = {"suite": suite, **row}
            for name in ROUTES:
                start = time.process_time()
                result = estimate(x, y, estimator=name, seed=row["seed"])
                entry[name] = [result.value, result.ci_low, result.ci_high, time.process_time() - start]
            rows.append(entry)
    return rows


def hull_coverage(rows: list[dict], routes: tuple[str, ...]) -> float:
    covered = []
    for row in rows:
        low, high = row["ci_low"], row["ci_high"]
        for name in routes:
            value, route_low, route_high, _ = row[name]
            low, high = min(low, route_low), max(high, route_high if np.isfinite(route_high) else value)
        covered.append(low <= row["true_mi"] <= high)
    return float(np.mean(covered))


def main() -> None:
    rows = run()
    with open(sys.argv[1], "w") as file:
        json.dump(rows, file, indent=1)
    for routes in ((), ("gaussian",), ("ksg",), ("ksg", "gaussian")):
        name = "+".join(("default", *routes))
        print(name, {suite: round(hull_coverage([r for r in rows if r["suite"] == suite], routes), 3)
                     for suite in ("v1", "v2")}, "all", round(hull_coverage(rows, routes), 3))  # fmt: skip


if __name__ == "__main__":
    main()
