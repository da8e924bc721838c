"""MI matrices (issue 26): planted dependent pairs among independent columns, one mi_matrix run:
how many planted pairs Benjamini-Hochberg finds at q 0.05 with the tail p-values ("gpd", the
default) and without ("none": the plain permutation p-values, the min-p combination of KSG and
the linear statistic, recomputed from the same statistics and shared null), the false finds, and
the time.

    python bench/matrix_planted.py --columns 200 --rows 1000 --planted 20 --rho 0.3 --workers 2
"""

import argparse
import json
import time

import numpy as np

from mitool.independence import benjamini_hochberg, min_p_combination
from mitool.matrix import mi_matrix

parser = argparse.ArgumentParser()
parser.add_argument("--columns", type=int, default=60)
parser.add_argument("--rows", type=int, default=500)
parser.add_argument("--planted", type=int, default=6)
parser.add_argument("--rho", type=float, default=0.4)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--workers", type=int, default=1)
parser.add_argument("--permutations", type=int, default=999)
args = parser.parse_args()


def table(columns, rows, planted, rho, seed):
    rng = np.random.default_rng(seed)
    data = rng.normal(size=(rows, columns))
    for i in range(planted):
        a, b = 2 * i, 2 * i + 1
        x = data[:, a]
        kind = i % 3
        if kind == 0:  # linear, correlation rho
            data[:, b] = rho * x + np.sqrt(1 - rho**2) * rng.normal(size=rows)
        elif kind == 1:  # a sine
            data[:, b] = rho * np.sin(2 * x) / 0.6 + np.sqrt(1 - rho**2) * rng.normal(size=rows)
        else:  # a square
            data[:, b] = 1.6 * rho * (x**2 - 1) / np.sqrt(2) + np.sqrt(1 - rho**2) * rng.normal(size=rows)
    return data


data = table(args.columns, args.rows, args.planted, args.rho, args.seed)
start, wall = time.process_time(), time.perf_counter()
result = mi_matrix(data, permutations=args.permutations, workers=args.workers, seed=args.seed)
cpu, wall = time.process_time() - start, time.perf_counter() - wall
iu = np.triu_indices(args.columns, 1)
planted = {(2 * i, 2 * i + 1) for i in range(args.planted)}
is_planted = np.array([(a, b) in planted for a, b in zip(*iu, strict=True)])
p_gpd = result.pvalue[iu]
null_rows = np.column_stack([result.null_values, result.linear_null_values])
p_none = np.array([min_p_combination(np.array(pair), null_rows)[0]
                   for pair in zip(result.statistic[iu], result.linear[iu], strict=True)])  # fmt: skip
q_none = benjamini_hochberg(p_none)
q_gpd = result.qvalue[iu]
out = {
    "columns": args.columns,
    "rows": args.rows,
    "planted": args.planted,
    "rho": args.rho,
    "seed": args.seed,
    "cpu_s_main_process": round(cpu, 1),
    "wall_s": round(wall, 1),
    "workers": args.workers,
    "found_none": int((q_none[is_planted] <= 0.05).sum()),
    "false_none": int((q_none[~is_planted] <= 0.05).sum()),
    "found_gpd": int((q_gpd[is_planted] <= 0.05).sum()),
    "false_gpd": int((q_gpd[~is_planted] <= 0.05).sum()),
    "tail_pairs": int(result.tail_pairs[iu].sum()),
    "planted_mi": np.round(result.statistic[iu][is_planted], 3).tolist(),
    "planted_p_gpd": [float(f"{v:.2g}") for v in p_gpd[is_planted]],
    "min_null_pair_p_gpd": float(f"{p_gpd[~is_planted].min():.2g}"),
    "tail_fit": result.tail_fit.describe() if result.tail_fit else None,
}
print(json.dumps(out))
