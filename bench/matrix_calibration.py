"""The calibration of mi_matrix's shared null (issue 26), the figure kept in
:data:`mitool.matrix.CALIBRATION`: independent columns (Gaussian, Student t with 2 degrees of
freedom and exponential, in turn), every pair's p-value (the min-p combination of KSG and the
linear statistic against the shared null, ``tail="none"``), the share at or below 0.01, 0.05 and
0.1 over all pairs and seeds.

    python bench/matrix_calibration.py --columns 30 --rows 1000 --seeds 10 \
        --out bench/results/independence/matrix_calibration.json

``--real`` makes the columns as real tables have them (issue 54): in turn Gaussian rounded to one
decimal (ties of finite precision), zero-inflated exponential rounded to two decimals (30% of the
rows a point mass at 0), labels of 2 to 6 classes with unequal shares, Student t with 2 degrees of
freedom; every pair of numeric columns then shares the dequantised null and every pair of a label
column with a numeric one its label column's null, reported apart (pairs of two label columns keep
their own permutations):

    python bench/matrix_calibration.py --real --columns 24 --rows 500 --seeds 5 \
        --out bench/results/independence/matrix_calibration_real.json
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
parser.add_argument("--real", action="store_true", help="ties, point masses and labels (see above)")
args = parser.parse_args()


def label_column(rng: np.random.Generator, column: int) -> np.ndarray:
    classes = 2 + column % 5
    shares = rng.dirichlet(np.ones(classes))
    return np.array([f"c{label}" for label in rng.choice(classes, size=args.rows, p=shares)], dtype=object)


def real_law(rng: np.random.Generator, column: int) -> np.ndarray:
    kind = column % 4
    if kind == 0:
        return np.round(rng.normal(size=args.rows), 1)
    if kind == 1:
        return np.where(rng.random(args.rows) < 0.3, 0.0, np.round(rng.exponential(size=args.rows), 2))
    if kind == 2:
        return label_column(rng, column)
    return rng.standard_t(2, args.rows)


pvalues, by_kind, start = [], {"numeric-numeric": [], "labels-numeric": []}, time.perf_counter()
for seed in range(args.seeds):
    rng = np.random.default_rng([seed, 0xCA1])
    if args.real:
        data = np.column_stack([real_law(rng, column) for column in range(args.columns)]).astype(object)
        labelled = np.array([column % 4 == 2 for column in range(args.columns)])
    else:
        laws = (
            lambda r: r.normal(size=args.rows),
            lambda r: r.standard_t(2, args.rows),
            lambda r: r.exponential(size=args.rows),
        )
        data = np.column_stack([laws[column % 3](rng) for column in range(args.columns)])
        labelled = np.zeros(args.columns, dtype=bool)
    result = mi_matrix(data, permutations=args.permutations, workers=args.workers, seed=seed, tail="none")
    rows, columns = np.triu_indices(args.columns, 1)
    shared = result.shared_pairs[rows, columns]
    pvalues.extend(result.pvalue[rows, columns][shared].tolist())
    labels = labelled[rows] | labelled[columns]
    by_kind["numeric-numeric"].extend(result.pvalue[rows, columns][shared & ~labels].tolist())
    by_kind["labels-numeric"].extend(result.pvalue[rows, columns][shared & labels].tolist())
    print(
        f"seed {seed}: {len(pvalues)} p-values on shared nulls, {time.perf_counter() - start:.0f} s",
        flush=True,
    )
values = np.array(pvalues)
alphas = (0.01, 0.05, 0.1)
laws = ("Gaussian rounded to 0.1, zero-inflated exponential rounded to 0.01, labels of 2 to 6 classes, "
        "Student t with 2 degrees of freedom" if args.real else
        "Gaussian, Student t with 2 degrees of freedom, exponential")  # fmt: skip
out = {
    "setting": f"{args.columns} independent columns of {args.rows} rows ({laws}, in turn), "
    f"{args.columns * (args.columns - 1) // 2} pairs (those on a shared null counted), "
    f"{args.seeds} seeds ({len(values)} p-values), a shared null of {args.permutations} permutations each",
    "alpha": alphas,
    "rejection_rate": tuple(round(float(np.mean(values <= alpha)), 4) for alpha in alphas),
    **(
        {
            f"rejection_rate_{kind}": tuple(
                round(float(np.mean(np.array(found) <= alpha)), 4) for alpha in alphas
            )
            for kind, found in by_kind.items()
        }
        if args.real
        else {}
    ),
    **({f"pvalues_{kind}": len(found) for kind, found in by_kind.items()} if args.real else {}),
    "binomial_standard_error_at_0.05": round(float(np.sqrt(0.05 * 0.95 / len(values))), 4),
    "seconds": round(time.perf_counter() - start, 1),
    "command": "python " + " ".join(sys.argv),
}
print(json.dumps(out))
if args.out:
    write_json(args.out, out)
