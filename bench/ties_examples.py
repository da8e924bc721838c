"""The cases of the issue on data from elsewhere, as a user meets them: scikit-learn's tables, a
Gaussian pair written to CSV with 2 decimals, float32 draws and a pandas CSV with its index column,
each through `mitool.estimate` or `mitool estimate` with the defaults. Needs the extra `.[compare]`.

    python bench/ties_examples.py --json bench/results/benchmark/ties_examples.json
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import argument_parser, write_json  # noqa: E402

import mitool  # noqa: E402
from mitool.runtime import set_threads_to_free_cores  # noqa: E402


def row(case: str, result: mitool.Estimate, reference: str) -> dict:
    line = (
        f"{case}: {result:.3f} [{result.ci_low:.3f}, {result.ci_high:.3f}] ({result.estimator}); {reference}"
    )
    print(line, flush=True)
    return {"case": case, "value": result.value, "ci_low": result.ci_low, "ci_high": result.ci_high,
            "estimator": result.estimator, "reference": reference}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    from sklearn.datasets import load_breast_cancer, load_iris, load_wine
    from sklearn.feature_selection import mutual_info_classif, mutual_info_regression

    parser = argument_parser(__doc__)
    parser.add_argument("--json", default=None)
    arguments = parser.parse_args(argv)
    set_threads_to_free_cores()
    rows = []
    wine = load_wine()
    for name in ("alcohol", "magnesium"):
        column = wine.data[:, wine.feature_names.index(name)]
        theirs = mutual_info_classif(column[:, None], wine.target, random_state=0)[0]
        rows.append(row(f"wine {name} against the class", mitool.estimate(column, wine.target),
                        f"scikit-learn {theirs:.3f}"))  # fmt: skip
    cancer = load_breast_cancer()
    column = cancer.data[:, list(cancer.feature_names).index("worst perimeter")]
    theirs = mutual_info_classif(column[:, None], cancer.target, random_state=0)[0]
    result = mitool.estimate(column, cancer.target)
    rows.append(row("breast cancer worst perimeter against the class", result, f"scikit-learn {theirs:.3f}"))
    iris = load_iris()
    theirs = mutual_info_regression(iris.data[:, :1], iris.data[:, 1], random_state=0)[0]
    result = mitool.estimate(iris.data[:, 0], iris.data[:, 1])
    rows.append(row("iris sepal length against sepal width", result, f"scikit-learn {theirs:.3f}"))
    truth = 0.511
    rho = math.sqrt(1 - math.exp(-2 * truth))
    rng = np.random.default_rng(0)
    x = rng.normal(size=5000)
    y = rho * x + math.sqrt(1 - rho**2) * rng.normal(size=5000)
    with tempfile.TemporaryDirectory() as folder:
        np.savetxt(Path(folder) / "x.csv", x, fmt="%.2f")
        np.savetxt(Path(folder) / "y.csv", y, fmt="%.2f")
        rounded = [np.loadtxt(Path(folder) / name) for name in ("x.csv", "y.csv")]
        rows.append(row("a Gaussian pair written to CSV with 2 decimals", mitool.estimate(*rounded),
                        f"truth {truth}"))  # fmt: skip
        result = mitool.estimate(x.astype(np.float32), y.astype(np.float32))
        rows.append(row("the same pair in float32", result, f"truth {truth}"))
        index = Path(folder) / "x_pandas.csv"  # DataFrame.to_csv: an unnamed index column first
        index.write_text(",x\n" + "".join(f"{i},{value}\n" for i, value in enumerate(x)))
        y_file = str(Path(folder) / "y.csv")
        command = [
            sys.executable,
            "-m",
            "mitool.cli.main",
            "estimate",
            str(index),
            y_file,
            "--json",
            "--quiet",
        ]
        result = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
        print(f"mitool estimate on a pandas CSV with its index column: {result['value']:.3f}; notes: "
              f"{[note for note in result['notes'] if 'index' in note]}")  # fmt: skip
        rows.append({"case": "mitool estimate x_pandas.csv y.csv (index column first)",
                     "value": result["value"], "notes": result["notes"],
                     "reference": f"truth {truth} (of the unrounded pair)"})  # fmt: skip
    if arguments.json:
        write_json(arguments.json, {"rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
