"""The default's bias allowance chosen out of sample (issue 52): leave one suite out.

The default reports [ci_low, bias_high], bias_high = ci_high + c max(estimate, 0), because its
routes for continuous data err low. Here c is chosen on some suites and its coverage measured on
the suite left out, for each suite in turn (bmi v1, bmi v2, mitool's families), at each sample
size. Coverage is counted by task cluster: a task's seeds are one cluster, the coverage of a suite
at one size is the mean over its tasks of the share of that task's estimates the range holds, and
its 95% interval comes from resampling the tasks (2000 draws).

Two rules are compared, each choosing the least c of the grid whose cluster coverage on the other
suites reaches --level: one c for every size ("pooled"), or one c per size ("by size"). Nothing
is re-estimated: the rows come from bench/bmi_samples.py's JSON and mitool benchmark's
results.csv (FILE:ESTIMATOR for one estimator's rows, the suite named by --name SUITE=FILE).

    python bench/interval_lofo.py \\
        v1=bench/results/benchmark/bmi_samples_v1.json v1=bench/results/benchmark/bmi_samples_v1_n1000.json \\
        v2=bench/results/benchmark/bmi_samples_v2.json v2=bench/results/benchmark/bmi_samples_v2_n1000.json \\
        families=bench/results/benchmark/families-default/results.csv:default
"""

from __future__ import annotations

import csv
import json
import os
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import argument_parser  # noqa: E402

GRID = tuple(round(0.05 * step, 2) for step in range(41))  # 0 .. 2 by 0.05


def load(spec: str) -> list[dict]:
    """The rows of one SUITE=FILE[:ESTIMATOR] argument: suite, task, n, estimate, ci_low, ci_high, truth."""
    suite, _, path = spec.partition("=")
    rows = []
    if ".csv" in path:
        path, _, estimator = path.partition(".csv:")
        with Path(path if path.endswith(".csv") else path + ".csv").open() as file:
            for row in csv.DictReader(file):
                if estimator and row["estimator"] != estimator or row["estimate"] in ("", "nan"):
                    continue
                fold = f"{suite}:{row['family']}"  # each family a fold of its own
                rows.append({"suite": suite, "fold": fold, "task": row["task"], "n": int(row["n"]),
                             **{key: float(row[key]) for key in ("estimate", "ci_low", "ci_high")},
                             "truth": float(row["true_mi"])})  # fmt: skip
        return rows
    for row in json.loads(Path(path).read_text())["rows"]:
        if row.get("estimate") is not None and row.get("ci_low") is not None:
            rows.append({"suite": suite, "fold": suite, "task": row["task"], "n": int(row["n"]),
                         **{key: float(row[key]) for key in ("estimate", "ci_low", "ci_high")},
                         "truth": float(row["true_mi"])})  # fmt: skip
    return rows


def held(row: dict, allowance: float) -> bool:
    """Whether [ci_low, bias_high] holds the truth, both ends as the user reads them (an MI is never
    reported below 0, nor its interval's ends)."""
    estimate = max(row["estimate"], 0.0)
    low, high = max(row["ci_low"], 0.0), max(row["ci_high"], 0.0) + allowance * estimate
    return low <= row["truth"] <= high


def by_task(rows: list[dict], allowance: float | Callable[[dict], float]) -> np.ndarray:
    """Each task's share of its estimates held (one value per task cluster); ``allowance`` one c, or
    each row's."""
    shares = defaultdict(list)
    for row in rows:
        shares[row["suite"], row["task"]].append(
            held(row, allowance(row) if callable(allowance) else allowance)
        )
    return np.array([np.mean(values) for values in shares.values()])


def coverage(rows: list[dict], allowance: float | Callable[[dict], float]) -> float:
    shares = by_task(rows, allowance)
    return float(shares.mean()) if len(shares) else float("nan")


def cluster_interval(
    rows: list[dict], allowance: float | Callable[[dict], float], draws: int = 2000
) -> tuple[float, float]:
    shares = by_task(rows, allowance)
    rng = np.random.default_rng(0)
    means = shares[rng.integers(0, len(shares), size=(draws, len(shares)))].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def least_reaching(rows: list[dict], level: float) -> float:
    """The least c of the grid whose coverage reaches ``level``; where none does, the least c with
    the highest coverage (past it a larger c buys nothing)."""
    values = [coverage(rows, c) for c in GRID]
    reached = [c for c, value in zip(GRID, values, strict=True) if value >= level]
    return reached[0] if reached else GRID[int(np.argmax(values))]


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("files", nargs="+", help="SUITE=FILE or SUITE=FILE.csv:ESTIMATOR")
    parser.add_argument("--level", type=float, default=0.95, help="the coverage c must reach where chosen")
    options = parser.parse_args()
    rows = [row for spec in options.files for row in load(spec)]
    suites, sizes = sorted({row["suite"] for row in rows}), sorted({row["n"] for row in rows})
    clusters = len({(row["suite"], row["task"]) for row in rows})
    print(f"{len(rows)} estimates; {clusters} task clusters; c chosen as the least of 0, 0.05, .., 2 "
          f"reaching {options.level:.0%} by task on the other suites "
          "(else the least with the most)\n")  # fmt: skip
    folds = sorted({row["fold"] for row in rows})
    chosen: dict[tuple[str, str, int], float] = {}
    for fold in folds:  # each fold's c chosen on the others
        others = [row for row in rows if row["fold"] != fold]
        pooled = least_reaching(others, options.level)
        for n in sizes:
            chosen[fold, "pooled", n] = pooled
            chosen[fold, "by size", n] = least_reaching(
                [row for row in others if row["n"] == n], options.level
            )
    print(f"folds: {', '.join(folds)}\n")
    print("| suite | n | tasks | interval alone | c pooled | coverage (95% by tasks) | c by size "
          "| coverage (95% by tasks) | truth below ci_low |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for suite in suites:
        for n in sizes:
            test = [row for row in rows if row["suite"] == suite and row["n"] == n]
            if not test:
                continue
            cells = []
            for rule in ("pooled", "by size"):

                def allowance(row: dict, rule: str = rule) -> float:
                    return chosen[row["fold"], rule, row["n"]]

                low, high = cluster_interval(test, allowance)
                used = sorted({allowance(row) for row in test})
                cells += [
                    ", ".join(f"{c:g}" for c in used),
                    f"{coverage(test, allowance):.3f} ({low:.2f}-{high:.2f})",
                ]
            below = sum(max(row["ci_low"], 0.0) > row["truth"] for row in test)
            print(f"| {suite} | {n} | {len(by_task(test, 0))} | {coverage(test, 0.0):.3f} | "
                  f"{' | '.join(cells)} | {below} of {len(test)} |")  # fmt: skip
    print()
    everything = least_reaching(rows, options.level)
    each_size = [
        f"n = {n}: {least_reaching([r for r in rows if r['n'] == n], options.level):g}" for n in sizes
    ]
    print(f"c chosen on every suite (pooled): {everything:g}; by size: {', '.join(each_size)}")
    for suite in suites:
        for n in sizes:
            test = [row for row in rows if row["suite"] == suite and row["n"] == n]
            if test:
                print(f"  {suite} n = {n}: coverage with c = 0.3 (today's) {coverage(test, 0.3):.3f}, "
                      f"with c = {everything:g} {coverage(test, everything):.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
