"""The calibration of mi_matrix's shared null (issue 26), the figure kept in
:data:`mitool.matrix.CALIBRATION`: independent columns (Gaussian, Student t with 2 degrees of
freedom and exponential, in turn), every pair's p-value (the min-p combination of KSG and the
linear statistic against the shared null, ``tail="none"``), the share at or below 0.01, 0.05 and
0.1 over all pairs and seeds.

    python bench/matrix_calibration.py --columns 30 --rows 1000 --seeds 10 \
        --out bench/results/independence/matrix_calibration.json
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import write_json  # noqa: E402

from mitool.matrix import mi_matrix  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--columns", type=int, default=30)
parser.add_argument("--rows", type=int, default=1000)
parser.add_argument("--seeds", type=int, default=10)
parser.add_argument("--permutations", type=int, default=999)
parser.add_argument("--workers", type=int, default=1)
parser.add_argument("--out", default="")
args = parser.parse_args()

pvalues, start = [], time.perf_counter()
for seed in range(args.seeds):
    rng = np.random.default_rng([seed, 0xCA1])
    laws = (
        lambda r: r.normal(size=args.rows),
        lambda r: r.standard_t(2, args.rows),
        lambda r: r.exponential(size=args.rows),
    )
    data = np.column_stack([laws[column % 3](rng) for column in range(args.columns)])
    result = mi_matrix(data, permutations=args.permutations, workers=args.workers, seed=seed, tail="none")
    pvalues.extend(result.pvalue[np.triu_indices(args.columns, 1)].tolist())
    print(f"seed {seed}: {len(pvalues)} p-values, {time.perf_counter() - start:.0f} s", flush=True)
values = np.array(pvalues)
alphas = (0.01, 0.05, 0.1)
out = {
    "setting": f"{args.columns} independent columns of {args.rows} rows (Gaussian, Student t with 2 "
    f"degrees of freedom, exponential, in turn), {args.columns * (args.columns - 1) // 2} pairs, "
    f"{args.seeds} seeds ({len(values)} p-values), a shared null of {args.permutations} permutations each",
    "alpha": alphas,
    "rejection_rate": tuple(round(float(np.mean(values <= alpha)), 4) for alpha in alphas),
    "binomial_standard_error_at_0.05": round(float(np.sqrt(0.05 * 0.95 / len(values))), 4),
    "seconds": round(time.perf_counter() - start, 1),
    "command": "python " + " ".join(sys.argv),
}
print(json.dumps(out))
if args.out:
    write_json(args.out, out)
