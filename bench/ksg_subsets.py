"""How well the disjoint subsets' spread gives the standard error of KSG (1 + 1 dimensions, rank
scores), with k kept on the subsets and with k scaled to the same share of the pairs (k s / n, at
least 1), for mitool.estimators.subsets.PAIRS_PER_NEIGHBOUR. For each (n, k, MI): the standard
deviation of the estimate over 60 draws of correlated Gaussians, and the median standard error
each way gives (the estimator's subsets: min(10, n // max(20, k + 2)) of n // m pairs). Writes the
rows to OUT.

    python bench/ksg_subsets.py bench/results/ksg_subsets.json
"""

import json
import math
import sys

import numpy as np

from mitool.estimators.ksg import ksg


def pair(n: int, mi: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    rho = math.sqrt(-math.expm1(-2 * mi))
    x = rng.normal(size=(n, 1))
    return x, rho * x + math.sqrt(1 - rho**2) * rng.normal(size=(n, 1))


def measure(n: int, k: int, mi: float, draws: int = 60) -> dict:
    full, stderrs = [], {"fixed": [], "scaled": []}
    subsets = min(10, n // max(20, k + 2))
    size = n // subsets
    for draw in range(draws):
        rng = np.random.default_rng([n, k, draw])
        x, y = pair(n, mi, rng)
        full.append(ksg(x, y, k=k, normalise="rank"))
        order = rng.permutation(n)
        for name, values in stderrs.items():
            neighbours = max(1, round(k * size / n)) if name == "scaled" else k
            parts = [order[j * size : (j + 1) * size] for j in range(subsets)]
            spread = [ksg(x[rows], y[rows], k=neighbours, normalise="rank") for rows in parts]
            values.append(np.std(spread, ddof=1) * math.sqrt(size / n))
    return {"n": n, "k": k, "mi": mi, "subsets": subsets, "size": size, "sd": float(np.std(full)),
            **{name: float(np.median(values)) for name, values in stderrs.items()}}  # fmt: skip


def main(out: str) -> None:
    rows = []
    for n in (100, 178, 300, 1000, 2000, 5000):
        for k in (3, 5, 10, 20):
            for mi in (0.3, 1.0):
                row = measure(n, k, mi)
                rows.append(row)
                print(f"n {n} k {k} MI {mi}: s / k {row['size'] / k:.1f}, sd {row['sd']:.4f}, over the "
                      f"standard error with k kept {row['sd'] / row['fixed']:.2f}, with k scaled "
                      f"{row['sd'] / row['scaled']:.2f}", flush=True)  # fmt: skip
    with open(out, "w") as file:
        json.dump(rows, file, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
