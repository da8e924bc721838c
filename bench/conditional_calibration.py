"""Calibration and power of the conditional tests of independence (:func:`mitool.independence_test`
given a continuous Z) under strong confounding: X and Y both depend strongly on Z, X independent of
Y given Z (issue 52).

The null family: s = (z_1 + ... + z_d) / sqrt(d), Z standard normal in d = 1 .. 5 dimensions, and

    nonlinear: X = tanh(s) + sigma e_1,   Y = s^2 / 2 + s + sigma e_2
    linear:    X = s + sigma e_1,         Y = s + sigma e_2

(``strong-nonlinear-d3-s0.2``: d = 3, sigma = 0.2), beside held-out nulls of the same kind that were
not looked at while the test was chosen (other functions, unequal weights, two indices,
heteroscedastic and heavy-tailed noise) and alternatives (a direct effect of X on Y beside the
confounding). Each method's share of replicates with p <= alpha; a result with a warning (the
neighbourhood diagnostic, ``result.warnings``) is counted as not rejected in the column
"rejected, no warning", as the issue counts it.

    python bench/conditional_calibration.py --list
    python bench/conditional_calibration.py --cells strong-nonlinear-d3-s0.2 --n 200 --replicates 100
    python bench/conditional_calibration.py --cells grid --methods residual,gcm
    python bench/conditional_calibration.py --cells heldout --methods residual,gcm,local
    python bench/conditional_calibration.py --summary-only

Methods: ``residual`` (the default: local permutation of the residuals of regressions on Z, KSG on
the residuals), ``local`` (Runge's local permutation of X, Frenzel & Pompe's statistic: the default
before), ``gcm`` (Shah & Peters' generalised covariance measure), and ``tigramite`` (tigramite's
CMIknn, k = 0.2 n, 5 shuffle neighbours, the same number of shuffles; ``pip install tigramite``;
skipped without it). Each cell writes ``<out>/<cell>-n<n>.json``; every run rewrites
``<out>/summary.md`` from the files present. Single-threaded: set MITOOL_THREADS=1 and
OPENBLAS_NUM_THREADS=1 (the regressions' small SVDs are slower with threads on a busy machine).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import warnings
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import argument_parser, write_json  # noqa: E402

from mitool.independence import independence_test  # noqa: E402

OUT = "bench/results/independence/conditional"
ALPHAS = (0.01, 0.05, 0.1)
BAND = (0.02, 0.08)
"""The issue's band for the rejection rate at alpha = 0.05 on a null."""

Draw = Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray, np.ndarray]]


def _index(r: np.random.Generator, n: int, d: int, weights: np.ndarray | None = None):
    z = r.normal(size=(n, d))
    w = np.ones(d) if weights is None else weights
    return z, z @ (w / np.linalg.norm(w))


def strong(kind: str, d: int, sigma: float, direct: float = 0.0, square: float = 0.0) -> Draw:
    """The strong-confounding family (a direct effect ``direct`` x + ``square`` x^2 in Y makes it an
    alternative)."""

    def draw(r: np.random.Generator, n: int):
        z, s = _index(r, n, d)
        if kind == "nonlinear":
            x = np.tanh(s) + sigma * r.normal(size=n)
            y = s**2 / 2 + s
        else:
            x = s + sigma * r.normal(size=n)
            y = s.copy()
        y = y + direct * x + square * x**2 + sigma * r.normal(size=n)
        return x, y, z

    return draw


def _heldout_sine(r: np.random.Generator, n: int):
    z, s = _index(r, n, 4, np.array([2.0, 1.0, 1.0, 0.5]))
    return np.sin(1.5 * s) + 0.2 * r.normal(size=n), np.exp(s / 2) + 0.2 * r.normal(size=n), z


def _heldout_two_index(r: np.random.Generator, n: int):
    z = r.normal(size=(n, 3))
    a, b = (z[:, 0] + z[:, 1]) / np.sqrt(2), (z[:, 1] - z[:, 2]) / np.sqrt(2)
    x = np.tanh(a) + 0.5 * b + 0.2 * r.normal(size=n)
    return x, a * b + a + 0.2 * r.normal(size=n), z


def _heldout_heteroscedastic(r: np.random.Generator, n: int):
    z, s = _index(r, n, 2)
    scale = 0.1 + 0.4 * np.abs(s)
    return np.tanh(s) + scale * r.normal(size=n), s + scale * r.normal(size=n), z


def _heldout_student(r: np.random.Generator, n: int):
    z, s = _index(r, n, 3)
    return s**3 / 3 + 0.3 * r.standard_t(3, n), np.cos(s) + s + 0.3 * r.standard_t(3, n), z


def _heldout_scale_only(r: np.random.Generator, n: int):
    z, s = _index(r, n, 1)
    return np.abs(s) * r.normal(size=n), np.abs(s) * r.normal(size=n), z


CELLS: dict[str, tuple[bool, str, Draw]] = {}
"""name -> (null, about, draw)."""
for _kind in ("nonlinear", "linear"):
    for _d in (1, 2, 3, 4, 5):
        for _sigma in (0.1, 0.2, 0.3, 0.5, 1.0):
            _about = ("X = tanh s + sigma e, Y = s^2/2 + s + sigma e" if _kind == "nonlinear" else
                      "X = s + sigma e, Y = s + sigma e")  # fmt: skip
            CELLS[f"strong-{_kind}-d{_d}-s{_sigma:g}"] = (
                True, f"{_about}; s = sum z / sqrt d, d = {_d}, sigma {_sigma:g}", strong(_kind, _d, _sigma)
            )  # fmt: skip
CELLS.update({
    "heldout-sine-4d": (True, "s weighted (2, 1, 1, 0.5); X = sin 1.5s + 0.2e, Y = exp(s/2) + 0.2e",
                        _heldout_sine),
    "heldout-two-index": (
        True, "a = z1 + z2, b = z2 - z3 (scaled); X = tanh a + b/2 + 0.2e, Y = ab + a + 0.2e",
        _heldout_two_index),
    "heldout-heteroscedastic": (True, "d = 2; noise sd 0.1 + 0.4|s|; X = tanh s + noise, Y = s + noise",
                                _heldout_heteroscedastic),
    "heldout-student": (True, "d = 3; X = s^3/3 + 0.3 t3, Y = cos s + s + 0.3 t3",
                        _heldout_student),
    "heldout-scale-only": (True, "d = 1; X = |s| e1, Y = |s| e2: dependent only through the spread",
                           _heldout_scale_only),
    "alt-nonlinear-d3-s0.2-direct": (False, "strong-nonlinear-d3-s0.2 plus 0.15 x in Y",
                                     strong("nonlinear", 3, 0.2, direct=0.15)),
    "alt-nonlinear-d3-s0.2-square": (False, "strong-nonlinear-d3-s0.2 plus 0.3 x^2 in Y",
                                     strong("nonlinear", 3, 0.2, square=0.3)),
    "alt-linear-d5-s0.5-direct": (False, "strong-linear-d5-s0.5 plus 0.2 x in Y",
                                  strong("linear", 5, 0.5, direct=0.2)),
})  # fmt: skip

GROUPS = {
    "grid": [f"strong-nonlinear-d{d}-s{s:g}" for d in (1, 3, 5) for s in (0.1, 0.3, 1.0)]
    + ["strong-nonlinear-d2-s0.1", "strong-nonlinear-d4-s0.1", "strong-nonlinear-d3-s0.2"]
    + [f"strong-linear-d{d}-s{s:g}" for d in (1, 3, 5) for s in (0.1, 1.0)],
    "heldout": [name for name in CELLS if name.startswith("heldout")],
    "alternatives": [name for name, cell in CELLS.items() if not cell[0]],
}
"""The cells run together: the grid of the strong-confounding nulls at n = 400, the held-out nulls,
the alternatives."""


def tigramite_test(permutations: int) -> Callable | None:
    """tigramite's CMIknn (its defaults: k = 0.2 n, 5 shuffle neighbours) with ``permutations``
    shuffles, or None where tigramite is not installed."""
    try:
        from tigramite.independence_tests.cmiknn import CMIknn
    except ImportError:
        return None

    def test(x, y, z, seed):
        cmi = CMIknn(sig_samples=permutations, sig_blocklength=1, workers=1, seed=seed)
        return float(cmi.run_test_raw(x[:, None], y[:, None], z)[1])

    return test


def run_cell(name: str, n: int, replicates: int, permutations: int, methods: list[str], seed: int,
             peer_replicates: int) -> dict:  # fmt: skip
    null, about, draw = CELLS[name]
    stream = zlib.crc32(name.encode())
    records: dict[str, dict[str, list]] = {}
    peer = tigramite_test(permutations) if "tigramite" in methods else None
    for replicate in range(replicates):
        x, y, z = draw(np.random.default_rng([seed, stream, n, replicate]), n)
        for method in methods:
            if method == "tigramite" and (peer is None or replicate >= peer_replicates):
                continue
            record = records.setdefault(
                method, {"pvalues": [], "warned": [], "cpu_seconds": [], "spread": []}
            )
            cpu = time.process_time()
            if method == "tigramite":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    pvalue, warned, spread = peer(x, y, z, replicate), False, {}
            else:
                result = independence_test(
                    x, y, z, permutations=permutations, seed=replicate, z_method=method
                )
                pvalue, warned, spread = result.pvalue, bool(result.warnings), result.diagnostic
            record["pvalues"].append(float(pvalue))
            record["warned"].append(warned)
            record["spread"].append(spread)
            record["cpu_seconds"].append(time.process_time() - cpu)
    summary = {}
    for method, record in records.items():
        p, warned = np.array(record["pvalues"]), np.array(record["warned"])
        summary[method] = {
            "replicates": len(p),
            "rejection": {str(a): float(np.mean(p <= a)) for a in ALPHAS},
            "rejection_without_warning": {str(a): float(np.mean((p <= a) & ~warned)) for a in ALPHAS},
            "warned": float(np.mean(warned)),
            "cpu_seconds_per_test": float(np.mean(record["cpu_seconds"])),
            "pvalues": record["pvalues"], "warned_each": record["warned"],
            "diagnostic_each": record["spread"],
        }  # fmt: skip
    return {"cell": name, "null": null, "about": about, "n": n, "replicates": replicates,
            "permutations": permutations, "seed": seed, "methods": summary,
            "tigramite": "installed" if tigramite_test(1) is not None else "not installed",
            "load_average": os.getloadavg()}  # fmt: skip


def diagnostics(name: str, n: int, replicates: int, seed: int, z_neighbours: int = 5) -> list[dict]:
    """The neighbourhood diagnostic of every replicate of a cell (the same data as :func:`run_cell`),
    computed again with the library's present code: regressions only, no permutations."""
    from mitool.independence.conditional import neighbourhood_spread, regress_on_z
    from mitool.independence.permutations import neighbours_in_z

    draw, stream, found = CELLS[name][2], zlib.crc32(name.encode()), []
    for replicate in range(replicates):
        x, y, z = draw(np.random.default_rng([seed, stream, n, replicate]), n)
        candidates = neighbours_in_z(z, z_neighbours)
        found.append(neighbourhood_spread(regress_on_z(x, z), regress_on_z(y, z), candidates))
    return found


def rediagnose(path: Path, remake: bool = False) -> None:
    """A cell's file with each method's warnings and rates without a warning recounted at the present
    thresholds (:data:`CO_SPREAD_WARNING`), from the diagnostics it holds or, with ``remake`` or where
    it holds none, from diagnostics made again (:func:`diagnostics`)."""
    from mitool.independence import CO_SPREAD_WARNING

    data = json.loads(path.read_text())
    stored = [record.get("diagnostic_each", []) for record in data["methods"].values()]
    made = [
        each for each in stored if len(each) == data["replicates"] and all("co_spread" in d for d in each)
    ]
    each = (
        made[0]
        if made and not remake
        else diagnostics(data["cell"], data["n"], data["replicates"], data["seed"])
    )
    for method, record in data["methods"].items():
        if method not in CO_SPREAD_WARNING:
            continue
        kept = record.get("diagnostic_each") or [{} for _ in range(record["replicates"])]
        record["diagnostic_each"] = [{**old, **new} for old, new in zip(kept, each, strict=False)]
        warned = np.array([d["co_spread"] > CO_SPREAD_WARNING[method] for d in record["diagnostic_each"]])
        if method == "residual" and all("combined_pvalue" in d for d in record["diagnostic_each"]):
            # the present default's p-value (KSG and the linear statistic by min-p), from those stored
            record["pvalues"] = [d["combined_pvalue"] for d in record["diagnostic_each"]]
            record["rejection"] = {str(a): float(np.mean(np.array(record["pvalues"]) <= a)) for a in ALPHAS}
        p = np.array(record["pvalues"])
        record["warned_each"] = warned.tolist()
        record["warned"] = float(np.mean(warned))
        record["rejection_without_warning"] = {str(a): float(np.mean((p <= a) & ~warned)) for a in ALPHAS}
    data["rediagnosed_at"] = dict(CO_SPREAD_WARNING)
    path.write_text(json.dumps(data, indent=1) + "\n")


def _median(record: dict, key: str) -> float:
    values = [each[key] for each in record.get("diagnostic_each", []) if key in each]
    return float(np.median(values)) if values else math.nan


def _parts(record: dict) -> str:
    """The residual scheme's rejection at 0.05 by KSG alone and by KSG with the linear statistic
    (min-p) on every replicate, whatever the co-spread."""
    each = record.get("diagnostic_each", [])
    if not each or not all("combined_pvalue" in d for d in each):
        return ""
    return " / ".join(
        f"{np.mean([d[key] <= 0.05 for d in each]):.3f}" for key in ("ksg_pvalue", "combined_pvalue")
    )


def summary_markdown(folder: Path) -> str:
    """The nulls (rejection at 0.05, and without a warning; the share warned; the median
    diagnostic) and the alternatives (power at 0.05 per method)."""
    data = [json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))]
    data = [record for record in data if "cell" in record]  # not earlier.json
    order = {name: index for index, name in enumerate(CELLS)}
    data.sort(key=lambda d: (not d["null"], order.get(d["cell"], 1e9), d["n"]))
    methods = ["residual", "local", "gcm", "tigramite"]
    lines = ["# Conditional tests under strong confounding", "",
             "Nulls: rejection rate at alpha = 0.05, and in brackets counting a warned result as not "
             f"rejected (the issue's band: [{BAND[0]}, {BAND[1]}]); `!` marks a rate above the band that no "
             "warning accounts for. S X, S Y, C: the medians of the diagnostic's spreads and co-spread "
             "(neighbourhood_spread); warned: the share of replicates warned, residual / local.", "",
             "| cell | n | replicates | " + " | ".join(methods) + " | residual: KSG / with linear | "
             "S X, S Y, C "
             "| warned |",
             "| --- | ---: | ---: |" + " ---: |" * len(methods) + " ---: | ---: | ---: |"]  # fmt: skip
    for record in (d for d in data if d["null"]):
        cells = []
        for method in methods:
            found = record["methods"].get(method)
            if not found:
                cells.append("")
                continue
            rate, kept = found["rejection"]["0.05"], found["rejection_without_warning"]["0.05"]
            mark = "!" if kept > BAND[1] else ""
            cells.append(f"{rate:.3f}" + (f" ({kept:.3f})" if kept != rate else "") + mark)
        base = record["methods"].get("residual") or record["methods"].get("local") or {}
        spread = ", ".join(f"{_median(base, key):.2g}" for key in ("spread_x", "spread_y", "co_spread"))
        warned = " / ".join(f"{record['methods'][m]['warned']:.2f}" if m in record["methods"] else "-"
                            for m in ("residual", "local"))  # fmt: skip
        replicates = max(found["replicates"] for found in record["methods"].values())
        parts = _parts(record["methods"].get("residual", {}))
        lines.append(f"| {record['cell']} | {record['n']} | {replicates} | " + " | ".join(cells)
                     + f" | {parts} | {spread} | {warned} |")  # fmt: skip
    lines += ["", "Alternatives: power at alpha = 0.05, replicates in brackets (tigramite: the first ones).",
              "", "| cell | n | " + " | ".join(methods)
              + " | residual - tigramite | residual: KSG / with linear |",
              "| --- | ---: |" + " ---: |" * (len(methods) + 2)]  # fmt: skip
    for record in (d for d in data if not d["null"]):
        power = {m: found["rejection"]["0.05"] for m, found in record["methods"].items()}
        cells = [
            f"{power[m]:.3f} ({record['methods'][m]['replicates']})" if m in power else "" for m in methods
        ]
        tied = {"residual", "tigramite"} <= set(power)
        gap = f"{power['residual'] - power['tigramite']:+.3f}" if tied else ""
        parts = _parts(record["methods"].get("residual", {}))
        lines.append(f"| {record['cell']} | {record['n']} | " + " | ".join(cells) + f" | {gap} | {parts} |")
    return "\n".join(lines) + "\n"


def earlier_scenarios(before: Path, after: Path, out: Path) -> str:
    """bench/independence.py's scenarios with a continuous Z, side by side: the local scheme (the
    default before issue 52) and tigramite's CMIknn from ``before`` (its ``mitool`` and
    ``tigramite-cmiknn`` p-values), the residual scheme from ``after`` (a run of the present
    default on the same seeds), over the replicates both have; with the diagnostic of each
    replicate (made again here), the share the local scheme's threshold warns."""
    from independence import SCENARIOS

    from mitool.independence.conditional import CO_SPREAD_WARNING, neighbourhood_spread, regress_on_z
    from mitool.independence.permutations import neighbours_in_z

    rows, report = [], {}
    for name, scenario in SCENARIOS.items():
        if not (before / f"{name}.json").exists() or not (after / f"{name}.json").exists():
            continue
        old, new = (json.loads((folder / f"{name}.json").read_text()) for folder in (before, after))
        count = min(old["methods"]["mitool"]["replicates"], new["methods"]["mitool"]["replicates"])
        spreads = []
        for replicate in range(count):
            rng = np.random.default_rng([old.get("seed", 0), zlib.crc32(name.encode()), replicate])
            x, y, z = scenario.draw(rng, old["n"])
            if z is None or np.asarray(z).dtype.kind in "iu":
                break
            z = np.asarray(z, dtype=float).reshape(len(z), -1)
            fits = regress_on_z(x, z), regress_on_z(y, z)
            spreads.append(neighbourhood_spread(*fits, neighbours_in_z(z, 5))["co_spread"])
        if len(spreads) < count:
            continue
        warned = np.array(spreads) > CO_SPREAD_WARNING["local"]
        peer = old["methods"].get("tigramite-cmiknn", {"pvalues": [math.nan] * count})
        sources = {"local": old["methods"]["mitool"], "residual": new["methods"]["mitool"], "tigramite": peer}
        rate = {
            label: float(np.mean(np.array(record["pvalues"][:count]) <= 0.05))
            for label, record in sources.items()
        }
        local = np.array(old["methods"]["mitool"]["pvalues"][:count]) <= 0.05
        kept = float(np.mean(local & ~warned))
        report[name] = {
            "null": old["null"],
            "replicates": count,
            **rate,
            "local_without_warning": kept,
            "local_warned": float(np.mean(warned)),
            "median_co_spread": float(np.median(spreads)),
        }
        kind = "null" if old["null"] else "alternative"
        rows.append(
            f"| {name} | {kind} | {count} | {rate['residual']:.3f} | {rate['local']:.3f} ({kept:.3f}) | "
            f"{rate['tigramite']:.3f} | {rate['residual'] - rate['tigramite']:+.3f} | "
            f"{np.median(spreads):.2g} | {np.mean(warned):.2f} |"
        )
    write_json(str(out), {"before": str(before), "after": str(after), "scenarios": report})
    header = [
        "| scenario | kind | replicates | residual (default) | local (not warned) | tigramite | "
        "residual - tigramite | C | local warned |",
        "| --- | --- | ---: |" + " ---: |" * 6,
    ]
    return "\n".join(header + rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    parser.add_argument(
        "--cells", default="grid", help="comma-separated names, or grid, heldout, alternatives"
    )
    parser.add_argument("--methods", default="residual,gcm", help="residual, local, gcm, tigramite")
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--replicates", type=int, default=100)
    parser.add_argument("--peer-replicates", type=int, default=None, help="tigramite on the first N only")
    parser.add_argument("--permutations", type=int, default=99)
    parser.add_argument("--seed", type=int, default=52)
    parser.add_argument("--out", default=OUT)
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--summary-only", action="store_true")
    parser.add_argument(
        "--earlier",
        nargs=2,
        metavar=("BEFORE", "AFTER"),
        help="bench/independence.py's runs side by side: BEFORE (local, tigramite) and AFTER (the default)",
    )
    parser.add_argument(
        "--rediagnose", action="store_true", help="recompute every file's diagnostics and warnings, no tests"
    )
    args = parser.parse_args(argv)
    if args.list:
        for name, (null, about, _) in CELLS.items():
            print(f"{name:34s} {'null' if null else 'alternative':12s} {about}")
        return 0
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    if args.earlier:
        table = earlier_scenarios(Path(args.earlier[0]), Path(args.earlier[1]), folder / "earlier.json")
        (folder / "earlier.md").write_text(table)
        print(table)
        return 0
    if args.rediagnose:
        for path in sorted(folder.glob("*.json")):
            if "cell" in json.loads(path.read_text()):
                rediagnose(path)
    elif not args.summary_only:
        names = [n for part in args.cells.split(",") for n in GROUPS.get(part.strip(), [part.strip()])]
        unknown = [name for name in names if name not in CELLS]
        if unknown:
            parser.error(f"unknown cells {unknown}; --list shows them")
        methods = [m.strip() for m in args.methods.split(",") if m.strip()]
        peers = args.replicates if args.peer_replicates is None else args.peer_replicates
        for name in names:
            start = time.perf_counter()
            result = run_cell(name, args.n, args.replicates, args.permutations, methods, args.seed, peers)
            write_json(str(folder / f"{name}-n{args.n}.json"), result)
            shown = ", ".join(
                f"{m} {r['rejection']['0.05']:.3f} ({r['rejection_without_warning']['0.05']:.3f}) "
                f"warned {r['warned']:.2f}" for m, r in result["methods"].items()
            )  # fmt: skip
            print(f"{name} n={args.n}: {shown} ({time.perf_counter() - start:.0f} s)", flush=True)
    (folder / "summary.md").write_text(summary_markdown(folder))
    print(f"wrote {folder / 'summary.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
