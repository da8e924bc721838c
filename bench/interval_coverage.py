"""The default's interval on bmi's own samples (issue 25): how often it holds the truth, and how
often it would with an allowance for the default's downward bias, from the rows that
bench/bmi_samples.py wrote (any suites and sizes; nothing is re-estimated).

The interval [ci_low, ci_high] covers the noise of the held-out evaluation and of training (the
neural route) or of the pairs (KSG), not the estimators' bias. Both routes err low (InfoNCE is a
lower bound; KSG's neighbourhoods blur the dependence), so the allowance is one-sided: the upper
end ci_high + c max(estimate, 0). For each c the script prints the coverage per suite and size and
over all rows, the coverage left on each suite when c is chosen on the other alone (the smallest
c of the grid reaching 95% there), and, for every estimate the plain interval misses, which side
it misses on.

    python bench/interval_coverage.py bench/results/benchmark/bmi_samples_v1.json \\
        bench/results/benchmark/bmi_samples_v2.json runs/n1000/bmi_samples_v1_n1000.json ...

A ``results.csv`` of ``mitool benchmark`` is read too, as FILE or FILE:ESTIMATOR (its rows of that
estimator only), its suite named by its folder: the flow route's allowance on the highmi suite,

    python bench/interval_coverage.py bench/results/benchmark/highmi/results.csv:flow \\
        bench/results/benchmark/highmi-images-encoded/results.csv
"""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import argument_parser  # noqa: E402

ALLOWANCES = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)


def load_results_csv(spec: str) -> list[dict]:
    """The rows of a ``mitool benchmark`` results.csv given as FILE or FILE:ESTIMATOR."""
    path, _, estimator = spec.partition(".csv:")
    path = Path(path if path.endswith(".csv") else path + ".csv")
    rows = []
    with path.open() as file:
        for row in csv.DictReader(file):
            if estimator and row["estimator"] != estimator or not row["estimate"] or row["estimate"] == "nan":
                continue
            values = {key: float(row[key]) for key in ("estimate", "ci_low", "ci_high")}
            rows.append(
                {**values, "true_mi": float(row["true_mi"]), "n": int(row["n"]), "suite": path.parent.name}
            )
    return rows


def load(paths: list[str]) -> list[dict]:
    rows = []
    for path in paths:
        if ".csv" in path:
            rows += load_results_csv(path)
            continue
        data = json.loads(Path(path).read_text())
        for row in data["rows"]:
            if row.get("estimate") is not None and row.get("ci_low") is not None:
                rows.append({**row, "suite": data["suite"]})
    return rows


def covered(row: dict, allowance: float) -> bool:
    high = row["ci_high"] + allowance * max(row["estimate"], 0.0)
    return row["ci_low"] <= row["true_mi"] <= high


def coverage(rows: list[dict], allowance: float) -> float:
    return float(np.mean([covered(row, allowance) for row in rows])) if rows else float("nan")


def smallest_reaching(rows: list[dict], level: float) -> float:
    return next((c for c in ALLOWANCES if coverage(rows, c) >= level), float("nan"))


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--level", type=float, default=0.95)
    rows = load(parser.parse_args().files)
    level = parser.parse_args().level
    groups = sorted({(row["suite"], row["n"]) for row in rows})
    header = " | ".join(f"{suite} n={n}" for suite, n in groups)
    print(f"| c | {header} | all |")
    print("|" + " ---: |" * (len(groups) + 2))
    for allowance in ALLOWANCES:
        cells = [coverage([r for r in rows if (r["suite"], r["n"]) == group], allowance) for group in groups]
        print(
            f"| {allowance:g} | "
            + " | ".join(f"{cell:.3f}" for cell in cells)
            + f" | {coverage(rows, allowance):.3f} |"
        )
    print()
    for suite in sorted({row["suite"] for row in rows}):
        others = [row for row in rows if row["suite"] != suite]
        chosen = smallest_reaching(others, level)
        held = [row for row in rows if row["suite"] == suite]
        print(f"c chosen on the other suites ({level:.0%}): {chosen:g}; coverage on {suite}: "
              f"{coverage(held, chosen) if chosen == chosen else float('nan'):.3f}")  # fmt: skip
    misses = [row for row in rows if not covered(row, 0.0)]
    above = sum(row["true_mi"] > row["ci_high"] for row in misses)
    print(
        f"\nthe plain interval misses {len(misses)} of {len(rows)}: {above} with the truth above, "
        f"{len(misses) - above} below"
    )


if __name__ == "__main__":
    main()
