"""KSG's k by Lepski's rule (mitool.estimators.ksg.adapted_k): how far a smaller k's estimate
departs from k = 5's, in standard errors of their pointwise difference, where KSG has no bias at any
k (the threshold ADAPT_Z must stay above these), and on bmi's own samples of its low-dimensional
tasks (v1 and v2, 3 coordinates or fewer, seeds 3 and 4, n = 1000 and 5000), where the waves' sheets
lie closer than k = 5's neighbourhoods; with estimator II's values beside estimator I's (the rule
reads estimator I's for both: the default's KSG is estimator II at the k it chooses).

    python bench/ksg_adaptive_k.py bench/results/ksg_adaptive_k.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bmi_samples import SAMPLES, standardised  # noqa: E402
from harness import write_json  # noqa: E402

from mitool.estimators.ksg import ADAPT_Z, adapted_k, ksg_point_values  # noqa: E402

KS = [1, 2, 3, 4, 5]


def null_pairs(law: str, n: int, dims: tuple[int, int], rho: float, seed: int) -> tuple[np.ndarray, ...]:
    """Correlated Gaussians (rho between x_1 and y), their Student-t (3 degrees of freedom, shared
    scale) or their uniform copula: laws whose density is smooth at every scale."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, dims[0]))
    y = rho * x[:, :1] + np.sqrt(1 - rho**2) * rng.normal(size=(n, dims[1]))
    if law == "student":
        scale = np.sqrt(rng.chisquare(3, size=(n, 1)) / 3)
        x, y = x / scale, y / scale
    if law == "uniform":
        x, y = norm.cdf(x), norm.cdf(y)
    return x, y


def row(x: np.ndarray, y: np.ndarray) -> dict:
    """k by the rule on estimator I's values, with each estimator's value at every k, and the
    departure estimator II's own values would show (the rule reads estimator I's for both)."""
    values = ksg_point_values(x, y, KS, normalise="rank")
    chosen, departure = adapted_k(values)
    second = ksg_point_values(x, y, KS, normalise="rank", variant=2)
    return {"k": KS[chosen], "departure": departure, "by_k": values.mean(axis=1).tolist(),
            "by_k_ii": second.mean(axis=1).tolist(), "departure_ii": adapted_k(second)[1]}  # fmt: skip


def main(out: str) -> None:
    null = []
    for law in ("gaussian", "student", "uniform"):
        for n in (300, 1000, 5000):
            for dims in ((1, 1), (2, 1)):
                for rho in (0.0, 0.6, 0.95):
                    for seed in range(12):
                        null.append({"law": law, "n": n, "dims": dims, "rho": rho, "seed": seed,
                                     **row(*null_pairs(law, n, dims, rho, seed))})  # fmt: skip
    bmi = []
    for suite in ("v1", "v2"):
        tasks = json.loads((SAMPLES / suite / "tasks.json").read_text())["tasks"]
        for task in tasks:
            for seed, entry in task["files"].items():
                with np.load(SAMPLES / suite / entry["file"]) as archive:
                    x, y = standardised(archive["x"]), standardised(archive["y"])
                if x.shape[1] + y.shape[1] > 3:
                    break
                for pairs in (1000, 5000):
                    found = row(x[:pairs], y[:pairs])
                    errors = [value - task["mi_true_nats"] for value in found.pop("by_k")]
                    errors_ii = [value - task["mi_true_nats"] for value in found.pop("by_k_ii")]
                    bmi.append({"suite": suite, "task": task["task_id"], "seed": int(seed), "n": pairs,
                                "true_mi": task["mi_true_nats"], **found, "error_by_k": errors,
                                "error_by_k_ii": errors_ii})  # fmt: skip
    largest_null = max(null, key=lambda entry: entry["departure"])
    summary = {
        "threshold": ADAPT_Z,
        "null_largest_departure": largest_null,
        "null_lowered": sum(entry["k"] < 5 for entry in null),
        "null_count": len(null),
        "bmi_lowered": [entry for entry in bmi if entry["k"] < 5],
        "null_largest_departure_ii": max(entry["departure_ii"] for entry in null),
        # each estimator at the k the rule chose, over bmi's tasks (both suites, both seeds)
        "bmi_mae_at_chosen_k": {
            f"n={pairs}": {
                name: float(
                    np.mean([abs(entry[key][KS.index(entry["k"])]) for entry in bmi if entry["n"] == pairs])
                )
                for name, key in (("estimator I", "error_by_k"), ("estimator II", "error_by_k_ii"))
            }
            for pairs in (1000, 5000)
        },
    }
    write_json(out, {"summary": summary, "null": null, "bmi": bmi})
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
