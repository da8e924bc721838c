"""Fuzz every estimator and the test with odd input: random shapes and dtypes, scales from 1e-300 to
1e300, an extreme outlier, NaN, inf, constant and duplicated columns, labels, few rows. Each case
must end in a result whose value and interval ends are numbers or an open end (inf above a lower
bound), never NaN, never below 0 from ``mitool.estimate`` (a negative raw value is reported as 0
with a note), and a test's p-value in (0, 1]; or in a one-line ParameterError (or DivergenceError).
Anything else (another exception, a NaN printed as a number) is a failure, printed with its case.
A share of the cases also runs through the command line (``mitool estimate``/``mitool test`` on
.npy files): exit 0, or exit 2 with one line; never a traceback.

    python bench/fuzz.py --cases 400 --seed 0
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from harness import argument_parser  # noqa: E402

FAST = {"steps": 20, "hidden": 8, "batch_size": 32, "eval_every": 10, "ensemble": 1, "subsets": 3}
"""Neural estimators at a toy size: the fuzz is about input, not accuracy."""


def odd_data(rng: np.random.Generator) -> tuple[str, np.ndarray, np.ndarray, np.ndarray | None]:
    """A case: (description, x, y, z or None)."""
    n = int(rng.choice([1, 2, 3, 5, 20, 40, 200, 600]))
    dx, dy = int(rng.integers(1, 4)), int(rng.integers(1, 3))
    x = rng.normal(size=(n, dx))
    y = x[:, :1] * rng.normal() + rng.normal(size=(n, dy))
    parts = [f"n={n} dx={dx} dy={dy}"]
    twist = rng.choice(["scale", "outlier", "nan", "inf", "constant", "duplicate", "labels", "integers",
                        "float32", "plain"])  # fmt: skip
    parts.append(str(twist))
    if twist == "scale":
        scale = 10.0 ** float(rng.choice([-300, -200, -150, 150, 200, 300]))
        x, y = x * scale, y * scale
        parts.append(f"x{scale:.0e}")
    elif twist == "outlier":
        x[int(rng.integers(n)), 0] = float(rng.choice([1e308, -1e308, 1e200]))
    elif twist == "nan":
        x[rng.random(size=x.shape) < 0.1] = np.nan
    elif twist == "inf":
        y[int(rng.integers(n)), 0] = np.inf
    elif twist == "constant":
        x[:, 0] = 3.0
    elif twist == "duplicate":
        x = np.repeat(x[: max(1, n // 4)], 4, axis=0)[:n]
        y = np.repeat(y[: max(1, n // 4)], 4, axis=0)[:n]
        x, y = (x, y) if len(x) == n else (x[:n], y[: len(x)])
    elif twist == "labels":
        y = np.array(["a", "b", "c"], dtype=object)[rng.integers(0, 3, size=n)]
    elif twist == "integers":
        x = np.round(x * 3).astype(np.int64)
    elif twist == "float32":
        x, y = x.astype(np.float32), y.astype(np.float32)
    z = rng.normal(size=(len(x), 1)) if rng.random() < 0.15 else None
    return " ".join(parts), x, y, z


def check_estimate(result) -> str:
    """'' where the estimate is sound, else what is wrong."""
    values = [result.value, result.ci_low]
    if any(math.isnan(value) for value in (*values, result.ci_high)):
        return f"NaN in the result: {result!r}"
    if result.value < 0:
        return f"a negative MI reported: {result!r}"
    if math.isinf(result.ci_high) and "open above" not in result.interval:
        return f"an infinite upper end with no reason: {result!r}"
    return ""


def check_test(result) -> str:
    if not (0 < result.pvalue <= 1) or math.isnan(result.statistic):
        return f"p = {result.pvalue}, statistic {result.statistic}"
    return ""


def run_case(name: str | None, x, y, z) -> tuple[str, str]:
    """(outcome, problem): outcome 'ok', 'refused' or 'failed'."""
    import mitool
    from mitool import estimators
    from mitool.checks import ParameterError
    from mitool.estimators.base import DivergenceError

    settings = {}
    if name not in (None, "test"):
        known = estimators.estimator_class(name).Settings.names()
        settings = {key: value for key, value in FAST.items() if key in known}
        if name in ("dcl", "dclw"):
            settings["critic"] = "cosine"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if name == "test":
                return "ok", check_test(mitool.independence_test(x, y, z, permutations=19))
            return "ok", check_estimate(mitool.estimate(x, y, z, estimator=name, **settings))
    except (ParameterError, DivergenceError) as error:
        text = str(error)
        return (
            ("refused", "")
            if text and "\n" not in text
            else ("failed", f"a message of {len(text.splitlines())} lines")
        )
    except Exception:  # anything else is what the fuzz looks for
        return "failed", traceback.format_exc(limit=3).strip().splitlines()[-1]


def run_command(x, y, folder: Path, command: str) -> str:
    """'' where ``mitool COMMAND x.npy y.npy`` exits 0, or 2 with one line; else what happened."""
    from click.testing import CliRunner

    from mitool.cli.main import main

    if x.dtype == object or y.dtype == object:
        return ""
    np.save(folder / "x.npy", x)
    np.save(folder / "y.npy", y)
    extra = ["--permutations", "19"] if command == "test" else ["--quiet", "--estimator", "ksg"]
    result = CliRunner().invoke(main, [command, str(folder / "x.npy"), str(folder / "y.npy"), *extra])
    lines = result.output.strip().splitlines()
    if result.exit_code == 0 and "nan" not in result.stdout.lower():
        return ""
    if result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("Error: "):
        return ""
    return f"exit {result.exit_code}: {result.output.strip()[-300:]}"


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--cases", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args()
    from mitool import estimators
    from mitool.runtime import set_threads_to_free_cores

    set_threads_to_free_cores()
    rng = np.random.default_rng(arguments.seed)
    names = [None, "test", *estimators.names()]
    counts = {"ok": 0, "refused": 0, "failed": 0}
    failures = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        for case in range(arguments.cases):
            described, x, y, z = odd_data(rng)
            name = names[case % len(names)]
            outcome, problem = run_case(name, x, y, z)
            if outcome == "ok" and problem:
                outcome = "failed"
            counts[outcome] += 1
            if outcome == "failed":
                failures.append(f"{name or 'default'} on {described}: {problem}")
            if case % 10 == 0 and z is None:
                for command in ("estimate", "test"):
                    problem = run_command(x, y, Path(folder), command)
                    counts["failed" if problem else "ok"] += 1
                    if problem:
                        failures.append(f"mitool {command} on {described}: {problem}")
    print(f"{sum(counts.values())} cases in {time.perf_counter() - start:.0f} s: {counts['ok']} answered, "
          f"{counts['refused']} refused in one line, {counts['failed']} failed")  # fmt: skip
    for failure in failures:
        print("FAILED", failure)


if __name__ == "__main__":
    main()
