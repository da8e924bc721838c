"""The false discovery rate of the q-values of :func:`mitool.matrix.mi_matrix` with block-correlated
columns: Benjamini-Hochberg (``fdr="bh"``) beside Benjamini-Yekutieli (``fdr="by"``), on the same
p-values (issue 52).

Each data set has ``--columns`` Gaussian columns in blocks of ``--block``: within a block every pair
has correlation rho (column = sqrt(rho) f + sqrt(1 - rho) e, f the block's factor), across blocks the
columns are independent. The pairs within blocks are the true dependencies, the pairs across blocks
the true nulls; the null pairs' p-values are dependent (pairs sharing a column, or columns of one
block, and the shared null of permutations). Over ``--datasets`` data sets: the false discovery
proportion V / max(R, 1) of the pairs with q <= alpha, its mean (the FDR) with its standard error,
and the share of the true dependencies found.

    python bench/fdr_simulation.py --datasets 100
    python bench/fdr_simulation.py --columns 24 --block 6 --rho 0.2 --datasets 100

BY's guarantee, FDR <= alpha m_0 / m, holds under any dependence between the p-values; BH's needs
them independent or positively regression dependent (PRDS), which these are not known to be.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import argument_parser, write_json  # noqa: E402

from mitool.independence import fdr_qvalues  # noqa: E402
from mitool.matrix import mi_matrix  # noqa: E402

OUT = "bench/results/independence/fdr_block.json"


def blocks(rng: np.random.Generator, rows: int, columns: int, block: int, rho: float) -> np.ndarray:
    """Gaussian columns, correlation rho within each block of ``block`` columns, 0 across."""
    factors = rng.normal(size=(rows, -(-columns // block)))
    which = np.arange(columns) // block
    return np.sqrt(rho) * factors[:, which] + np.sqrt(1 - rho) * rng.normal(size=(rows, columns))


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("--columns", type=int, default=20)
    parser.add_argument("--block", type=int, default=5)
    parser.add_argument("--rho", type=float, default=0.15)
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--datasets", type=int, default=100)
    parser.add_argument("--permutations", type=int, default=999)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=52)
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args(argv)
    upper = np.triu_indices(args.columns, 1)
    dependent = (upper[0] // args.block) == (upper[1] // args.block)
    found: dict[str, dict[str, list[float]]] = {
        name: {"fdp": [], "power": [], "rejected": []} for name in ("bh", "by")
    }
    start = time.perf_counter()
    for dataset in range(args.datasets):
        data = blocks(
            np.random.default_rng([args.seed, dataset]), args.rows, args.columns, args.block, args.rho
        )
        result = mi_matrix(data, permutations=args.permutations, seed=dataset, workers=1)
        pvalues = result.pvalue[upper]
        for name in ("bh", "by"):
            chosen = fdr_qvalues(pvalues, name) <= args.alpha
            false = int(np.count_nonzero(chosen & ~dependent))
            found[name]["fdp"].append(false / max(int(chosen.sum()), 1))
            found[name]["power"].append(float(np.mean(chosen[dependent])))
            found[name]["rejected"].append(int(chosen.sum()))
    summary = {}
    for name, record in found.items():
        fdp = np.array(record["fdp"])
        summary[name] = {
            "fdr": float(fdp.mean()),
            "standard_error": float(fdp.std(ddof=1) / np.sqrt(len(fdp))),
            "bound_alpha_m0_over_m": args.alpha * float(np.mean(~dependent)),
            "power": float(np.mean(record["power"])),
            "mean_rejected": float(np.mean(record["rejected"])),
            "share_with_a_false_discovery": float(np.mean(fdp > 0)),
            "fdp_each": record["fdp"],
        }
        summary[name]["within_target"] = (
            summary[name]["fdr"] <= args.alpha + 2 * summary[name]["standard_error"]
        )
    report = {
        "columns": args.columns, "block": args.block, "rho": args.rho, "rows": args.rows,
        "datasets": args.datasets, "permutations": args.permutations, "alpha": args.alpha, "seed": args.seed,
        "pairs": int(len(dependent)), "dependent_pairs": int(dependent.sum()),
        "seconds": time.perf_counter() - start, "methods": summary, "load_average": os.getloadavg(),
    }  # fmt: skip
    write_json(args.out, report)
    for name, record in summary.items():
        print(f"{name}: FDR {record['fdr']:.4f} +- {record['standard_error']:.4f} (target <= {args.alpha} "
              "+ 2 SE; "
              f"alpha m0/m = {record['bound_alpha_m0_over_m']:.4f}), power {record['power']:.3f}, "
              f"{record['mean_rejected']:.1f} pairs found per data set, a false one in "
              f"{record['share_with_a_false_discovery']:.0%} of the data sets")  # fmt: skip
    print(f"wrote {args.out} ({report['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
