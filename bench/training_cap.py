"""The default's training cap, fold by fold (issue 50): training that ends when the held-out value
stops rising (patience) rather than at 2000 steps, on data none of it was chosen on.

For every task of three folds, bmi's own v1 and v2 samples (../shared/bmi-samples, the first
``--pairs`` pairs of seed 3, standardised per column as bmi's pipeline does) and mitool's
``families`` suite (one draw of ``--pairs`` pairs, seed 0), the default estimate is made with the
new cap (``--steps``) and, only where some run trained past 2000 steps, again with the old cap of
2000: a run that early stopping ended by step 2000 trains identically under either cap (the same
batches, the same patience; nothing in training depends on the cap), so its estimate is the same.
Writes one row per task (fold, task, truth, before, after, steps, seconds) and prints per fold the
mean absolute error before and after, the tasks within target (|error| <= max(0.1, 10%)), the
tasks that trained past 2000 steps and the time.

    MITOOL_THREADS=1 python bench/training_cap.py --pairs 1000 --steps 20000 \\
        --out bench/results/training_cap_n1000.csv
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import numpy as np
import torch

import mitool
from mitool.benchmark.families import families_suite

SAMPLES = Path(__file__).resolve().parent.parent.parent / "shared" / "bmi-samples"
OLD_CAP = 2000


def standardised(values: np.ndarray) -> np.ndarray:
    values = values.astype(np.float64)
    scale = values.std(axis=0)
    return (values - values.mean(axis=0)) / np.where(scale > 0, scale, 1.0)


def bmi_fold(version: str, pairs: int):
    folder = SAMPLES / version
    for task in json.loads((folder / "tasks.json").read_text())["tasks"]:
        entry = task["files"]["3"]
        with np.load(folder / entry["file"]) as archive:
            x, y = archive["x"][:pairs], archive["y"][:pairs]
        yield task["task_id"], task["mi_true_nats"], standardised(x), standardised(y)


def families_fold(pairs: int):
    for task in families_suite():
        x, y = task.sample(pairs, torch.Generator().manual_seed(0), dtype=torch.float64)
        yield task.name, task.mi, x.numpy(), y.numpy()


def estimate(x: np.ndarray, y: np.ndarray, steps: int) -> tuple[float, int, float]:
    start = time.perf_counter()
    result = mitool.estimate(x, y, steps=steps)
    return result.value, int(result.details.get("steps", 0)), time.perf_counter() - start


def within(error: float, truth: float) -> bool:
    return abs(error) <= max(0.1, 0.1 * truth)


def summarise(rows: list[dict]) -> None:
    """Per fold: MAE and tasks within target before and after, tasks past 2000 steps, seconds."""
    print("\nfold       tasks  MAE before  MAE after  within before  within after  past 2000  seconds")
    for fold in dict.fromkeys(row["fold"] for row in rows):
        chosen = [row for row in rows if row["fold"] == fold]
        truth = np.array([row["truth"] for row in chosen])
        before, after = (np.array([row[key] for row in chosen]) for key in ("before", "after"))
        mae = f"{np.mean(abs(before - truth)):11.4f} {np.mean(abs(after - truth)):10.4f}"
        hits = f"{sum(map(within, before - truth, truth)):14d} {sum(map(within, after - truth, truth)):13d}"
        past = sum(row["steps"] > OLD_CAP for row in chosen)
        took = [sum(row[key] for row in chosen) for key in ("seconds_before", "seconds_after")]
        seconds = f"{took[0]:.0f} -> {took[1]:.0f}"
        print(f"{fold:9s} {len(chosen):6d} {mae} {hits} {past:10d}  {seconds}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--folds", default="bmi-v1,bmi-v2,families")
    parser.add_argument("--out", type=Path, default=Path("bench/results/training_cap_n1000.csv"))
    parser.add_argument("--part", default="0/1", help="i/m: every m-th task from the i-th (to split a run)")
    parser.add_argument("--summarise", nargs="*", type=Path, help="Only summarise these CSV files.")
    arguments = parser.parse_args()
    if arguments.summarise:
        read = [row for path in arguments.summarise for row in csv.DictReader(path.open())]
        numbers = ("truth", "before", "after", "seconds_before", "seconds_after")
        summarise(
            [{**row, **{key: float(row[key]) for key in numbers}, "steps": int(row["steps"])} for row in read]
        )
        return
    folds = {
        "bmi-v1": lambda: bmi_fold("v1", arguments.pairs),
        "bmi-v2": lambda: bmi_fold("v2", arguments.pairs),
        "families": lambda: families_fold(arguments.pairs),
    }
    rows = []
    with arguments.out.open("w", newline="") as file:
        writer = csv.DictWriter(file, ["fold", "task", "truth", "before", "after", "steps", "seconds_before",
                                       "seconds_after"])  # fmt: skip
        writer.writeheader()
        part, parts = (int(value) for value in arguments.part.split("/"))
        for fold in arguments.folds.split(","):
            for index, (name, truth, x, y) in enumerate(folds[fold]()):
                if index % parts != part:
                    continue
                after, steps, seconds_after = estimate(x, y, arguments.steps)
                before, seconds_before = after, seconds_after
                if steps > OLD_CAP:
                    before, _, seconds_before = estimate(x, y, OLD_CAP)
                row = {"fold": fold, "task": name, "truth": truth, "before": before, "after": after}
                row.update(steps=steps, seconds_before=seconds_before, seconds_after=seconds_after)
                writer.writerow(row)
                file.flush()
                rows.append(row)
                print(f"{fold:9s} {name:40s} truth {truth:6.3f} before {before:6.3f} after {after:6.3f} "
                      f"steps {steps:5d} {seconds_after:6.1f} s", flush=True)  # fmt: skip
    summarise(rows)


if __name__ == "__main__":
    main()
