"""Where KSG (1 + 1 dimensions, rank scores) starts to fall short of the MI, by n and k: the mean
estimate per truth on correlated Gaussians (max(3, 40 000 / n) draws each), for
mitool.estimators.ksg.SATURATION_GAP_PLANE. Writes the rows to OUT and prints, for each (n, k),
the ceiling C = psi(n) - psi(k), the last truth on the grid within max(0.1, 10%) before the first
that is not, and C minus its mean estimate.

    python bench/ksg_saturation.py 100,178,300,1000,3000,10000 3,5,10,20 bench/results/ksg_saturation.json

A fourth argument, 2, measures KSG's estimator II instead (its ceiling psi(n) - psi(k) - 1/k):

    python bench/ksg_saturation.py 100,1000,10000 3,5 bench/results/ksg_saturation_ii.json 2
"""

import json
import sys

import numpy as np

from mitool.estimators.ksg import ksg, ksg_ceiling

TRUTHS = [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0]


def measure(n: int, k: int, variant: int = 1) -> list[dict]:
    rows, draws = [], max(3, int(40_000 / n))
    for truth in TRUTHS:
        rho = np.sqrt(1 - np.exp(-2 * truth))
        values = []
        for draw in range(draws):
            rng = np.random.default_rng([n, k, int(truth * 100), draw])
            x = rng.normal(size=(n, 1))
            y = rho * x + np.sqrt(1 - rho**2) * rng.normal(size=(n, 1))
            values.append(ksg(x, y, k=k, normalise="rank", variant=variant))
        mean, sd = float(np.mean(values)), float(np.std(values))
        rows.append(
            {
                "n": n,
                "k": k,
                "truth": truth,
                "mean": mean,
                "sd": sd,
                "reps": draws,
                "ceiling": ksg_ceiling(n, k, variant=variant),
                "variant": variant,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    sizes, ks = ([int(a) for a in argument.split(",")] for argument in sys.argv[1:3])
    variant = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    rows = [row for n in sizes for k in ks if k < n // 4 for row in measure(n, k, variant)]
    with open(sys.argv[3], "w") as file:
        json.dump(rows, file, indent=1)
    worst = 0.0
    for n, k in sorted({(row["n"], row["k"]) for row in rows}):
        these = [row for row in rows if (row["n"], row["k"]) == (n, k)]
        off = [
            i for i, row in enumerate(these) if abs(row["mean"] - row["truth"]) > max(0.1, row["truth"] / 10)
        ]
        if not off or off[0] == 0:
            print(n, k, "never off target" if not off else "off target from the first truth")
            continue
        last = these[off[0] - 1]
        worst = max(worst, last["ceiling"] - last["mean"])
        gap = last["ceiling"] - last["mean"]
        print(f"n {n} k {k}: C {last['ceiling']:.2f}, last truth within target {last['truth']:g} "
              f"(mean {last['mean']:.2f}, sd {last['sd']:.3f}), C - mean {gap:.2f}")  # fmt: skip
    print(f"largest C - mean: {worst:.2f}")


if __name__ == "__main__":
    main()
