"""The out-of-fold choice of the test's statistic on the power curves (issue 58): for each family
left out in turn, the mitool candidate with the largest mean area on the other families is chosen,
and its area on the left-out family is set beside the default's and the best peer's.

Reads bench/results/power_curves/power.csv (bench/power_curves.py); the candidates are the mitool
tests measured there (the default; KSG at k = 5, 10, 40 with the linear statistic beside; the
min-p of KSG at three k and the linear statistic, mitool-multik), the peers the others.

    python bench/power_lofo.py [--csv bench/results/power_curves/power.csv] [--n 400]
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

CANDIDATES = ("mitool", "mitool-k5", "mitool-k10", "mitool-k40", "mitool-multik")


def areas(table: pd.DataFrame) -> pd.DataFrame:
    """Area under each (family, test) power curve: the trapezoid over the strengths."""
    rows = []
    for (family, test), curve in table.groupby(["family", "test"]):
        curve = curve.sort_values("strength")
        area = np.trapezoid(curve.rejection_rate, curve.strength)
        rows.append({"family": family, "test": test, "area": area})
    return pd.DataFrame(rows).pivot(index="family", columns="test", values="area")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", default="bench/results/power_curves/power.csv")
    parser.add_argument("--n", type=int, default=400)
    arguments = parser.parse_args()
    table = pd.read_csv(arguments.csv)
    wide = areas(table[table.n == arguments.n])
    candidates = [name for name in CANDIDATES if name in wide and wide[name].notna().all()]
    peers = [name for name in wide if not name.startswith("mitool")]
    print(f"n = {arguments.n}: candidates {', '.join(candidates)}; peers {', '.join(peers)}")
    print("| left out | chosen on the others | its area | default's area | best peer | peer's area |")
    print("| --- | --- | ---: | ---: | --- | ---: |")
    chosen_areas, default_areas = [], []
    for family in wide.index:
        others = wide.drop(index=family)
        chosen = max(candidates, key=lambda name: others[name].mean())
        peer = wide.loc[family, peers].astype(float).idxmax()
        chosen_areas.append(wide.loc[family, chosen])
        default_areas.append(wide.loc[family, "mitool"])
        print(f"| {family} | {chosen} | {wide.loc[family, chosen]:.2f} | {wide.loc[family, 'mitool']:.2f} | "
              f"{peer} | {wide.loc[family, peer]:.2f} |")  # fmt: skip
    print(f"| mean | | {np.mean(chosen_areas):.3f} | {np.mean(default_areas):.3f} | | |")


if __name__ == "__main__":
    main()
