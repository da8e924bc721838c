"""Calibration, power and speed of mitool's permutation tests of independence
(:func:`mitool.independence_test`), with peers side by side when they are installed.

Calibration: on null scenarios (X and Y independent, or independent given Z), the share of
replicates rejected at alpha = 0.01, 0.05, 0.1 should be at most alpha (up to the binomial noise of
the replicates: each rate comes with the band that a test of exact size alpha stays in with
probability 0.99). Power: the same shares on alternatives. Speed: one test at n = 10 000 with 1000
permutations, wall and CPU seconds.

    python bench/independence.py --list                              # the scenarios
    python bench/independence.py --replicates 50 --no-peers           # a reduced run
    python bench/independence.py --scenarios heavy-tailed,circle      # a chunk: one file per scenario
    python bench/independence.py --timing-only                        # the speed alone
    python bench/independence.py --summary-only                       # the summary of the files there

Each scenario writes ``<out>/<scenario>.json`` (its p-values, rejection rates, bands, seconds, and
the command that made it), so the full run can go in chunks; every run rewrites ``<out>/summary.md``
from the files present. Peers (``pip install hyppo tigramite``): hyppo's HSIC, distance correlation
(their default fast chi-square approximations) and KCI (its gamma approximation), and tigramite's
CMIknn (Runge 2018: k = 0.2 n, 5 shuffle neighbours, its shuffle test with the same number of
permutations), unconditional and given Z. hyppo's ConditionalDcorr is left out: 98 CPU seconds per
test at n = 400 with 199 permutations on this project's machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import argument_parser, write_json  # noqa: E402

from mitool.independence import independence_test  # noqa: E402

OUT = "bench/results/independence"
ALPHAS = (0.01, 0.05, 0.1)

Draw = Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray, np.ndarray | None]]


@dataclass(frozen=True)
class Scenario:
    """A law of (X, Y) or (X, Y, Z): ``null`` when X and Y are independent (given Z)."""

    null: bool
    about: str
    draw: Draw

    @property
    def conditional(self) -> bool:
        return self.draw(np.random.default_rng(0), 30)[2] is not None


def _normal(rng: np.random.Generator, n: int, d: int = 1) -> np.ndarray:
    return rng.normal(size=(n, d))


def _labels(classes: np.ndarray) -> np.ndarray:
    return np.array(["setosa", "versicolor", "virginica", "other"])[classes]


SCENARIOS: dict[str, Scenario] = {
    # --- nulls, unconditional
    "heavy-tailed": Scenario(True, "x Cauchy, y Student t(2), independent",
                             lambda r, n: (r.standard_cauchy(n), r.standard_t(2, n), None)),
    "discrete": Scenario(True, "x categorical (5 unequal classes), y Poisson(1.5): the plug-in statistic",
                         lambda r, n: (r.choice(5, n, p=[0.4, 0.3, 0.15, 0.1, 0.05]), r.poisson(1.5, n),
                                       None)),
    "counts-with-ties": Scenario(True, "x Poisson(40), y negative binomial (mean 45): many repeated values",
                                 lambda r, n: (r.poisson(40, n), r.negative_binomial(5, 0.1, n), None)),
    "rounded": Scenario(True, "x, y normal rounded to one decimal",
                        lambda r, n: (np.round(r.normal(size=n), 1), np.round(r.normal(size=n), 1), None)),
    "5d": Scenario(True, "x 5-D (correlated, one log-normal coordinate), y Student t(3)",
                   lambda r, n: (_five(r, n), r.standard_t(3, n), None)),
    "labels": Scenario(True, "x 2-D normal, y labels (3 classes 0.5/0.3/0.2): Ross's statistic",
                       lambda r, n: (_normal(r, n, 2), _labels(r.choice(3, n, p=[0.5, 0.3, 0.2])), None)),
    "zero-inflated": Scenario(True, "x normal, y 30% zeros else log-normal: the statistic for atoms",
                              lambda r, n: (r.normal(size=n), _zero_inflated(r, r.normal(size=n)), None)),
    "mixed-scales-2d": Scenario(True, "x (uniform, log-normal), y exponential",
                                lambda r, n: (np.c_[r.uniform(size=n), r.lognormal(size=n)],
                                              r.exponential(size=n), None)),
    # --- nulls, conditional
    "cond-common-cause": Scenario(True, "z normal; x = sin 2z + z + noise, y = tanh 2z + z^2 / 2 + noise",
                                  lambda r, n: _common_cause(r, n, 0.0)),
    "cond-chain": Scenario(True, "x -> z -> y: z = x + noise, y = exp(z / 2) + noise",
                           lambda r, n: _chain(r, n)),
    "cond-3d-z": Scenario(True, "z 3-D; x = z1 + z2^2 / 2 + noise, y = z1 z3 + sin z2 + noise",
                          lambda r, n: _three_z(r, n, 0.0)),
    "cond-discrete-z": Scenario(True, "z in 0..3; x = z + noise, y = (z - 1.5)^2 + noise: within groups",
                                lambda r, n: _discrete_z(r, n, 0.0)),
    # --- alternatives, unconditional
    "weak-linear": Scenario(False, "y = 0.15 x + noise (correlation 0.15, MI 0.011 nats)",
                            lambda r, n: _weak_linear(r, n)),
    "non-monotone": Scenario(False, "y = x^2 + 2 noise (no correlation)",
                             lambda r, n: _non_monotone(r, n)),
    "circle": Scenario(False, "(cos t, sin t) + 0.3 noise each",
                       lambda r, n: _circle(r, n)),
    "one-of-five": Scenario(False, "x 5-D normal, y = 0.3 x3 + noise (the other four independent)",
                            lambda r, n: _one_of_five(r, n)),
    "labels-small-shifts": Scenario(False, "3 labels, x normal shifted by 0.25 per class",
                                    lambda r, n: _shifted_labels(r, n)),
    "heteroscedastic": Scenario(False, "y = x noise: dependence in the spread only",
                                lambda r, n: _heteroscedastic(r, n)),
    # --- alternatives, conditional
    "cond-direct-linear": Scenario(False, "z normal; x = z + noise, y = z + 0.25 x + noise",
                                   lambda r, n: _direct_linear(r, n)),
    "cond-nonlinear-direct": Scenario(False, "the common cause plus 0.3 x^2 in y",
                                      lambda r, n: _common_cause(r, n, 0.3)),
    "cond-3d-z-direct": Scenario(False, "the 3-D z plus 0.4 x in y",
                                 lambda r, n: _three_z(r, n, 0.4)),
    "cond-discrete-z-direct": Scenario(False, "the discrete z plus 0.3 x in y",
                                       lambda r, n: _discrete_z(r, n, 0.3)),
}  # fmt: skip
"""The scenarios by name, nulls first."""


def _five(r: np.random.Generator, n: int) -> np.ndarray:
    base = r.normal(size=(n, 5)) @ np.triu(np.full((5, 5), 0.5)) + r.normal(size=(n, 5))
    base[:, 4] = np.exp(base[:, 4])
    return base


def _zero_inflated(r: np.random.Generator, noise: np.ndarray) -> np.ndarray:
    return np.where(r.uniform(size=len(noise)) < 0.3, 0.0, np.exp(noise))


def _common_cause(r: np.random.Generator, n: int, direct: float):
    z = r.normal(size=n)
    x = np.sin(2 * z) + z + 0.4 * r.normal(size=n)
    return x, np.tanh(2 * z) + z**2 / 2 + direct * x**2 + 0.3 * r.normal(size=n), z


def _chain(r: np.random.Generator, n: int):
    x = r.normal(size=n)
    z = x + 0.5 * r.normal(size=n)
    return x, np.exp(z / 2) + 0.3 * r.normal(size=n), z


def _three_z(r: np.random.Generator, n: int, direct: float):
    z = r.normal(size=(n, 3))
    x = z[:, 0] + z[:, 1] ** 2 / 2 + 0.5 * r.normal(size=n)
    return x, z[:, 0] * z[:, 2] + np.sin(z[:, 1]) + direct * x + 0.5 * r.normal(size=n), z


def _discrete_z(r: np.random.Generator, n: int, direct: float):
    z = r.integers(0, 4, size=n)
    x = z + r.normal(size=n)
    return x, (z - 1.5) ** 2 + direct * x + r.normal(size=n), z


def _weak_linear(r: np.random.Generator, n: int):
    x = r.normal(size=n)
    return x, 0.15 * x + np.sqrt(1 - 0.15**2) * r.normal(size=n), None


def _non_monotone(r: np.random.Generator, n: int):
    x = r.normal(size=n)
    return x, x**2 + 2 * r.normal(size=n), None


def _circle(r: np.random.Generator, n: int):
    angle = r.uniform(0, 2 * np.pi, n)
    return np.cos(angle) + 0.3 * r.normal(size=n), np.sin(angle) + 0.3 * r.normal(size=n), None


def _one_of_five(r: np.random.Generator, n: int):
    x = r.normal(size=(n, 5))
    return x, 0.3 * x[:, 2] + r.normal(size=n), None


def _shifted_labels(r: np.random.Generator, n: int):
    classes = r.choice(3, n)
    return r.normal(size=n) + 0.25 * classes, _labels(classes), None


def _heteroscedastic(r: np.random.Generator, n: int):
    x = r.normal(size=n)
    return x, x * r.normal(size=n), None


def _direct_linear(r: np.random.Generator, n: int):
    z = r.normal(size=n)
    x = z + r.normal(size=n)
    return x, z + 0.25 * x + r.normal(size=n), z


# --- peers ----------------------------------------------------------------------------------------------


def _numeric(data: np.ndarray | None) -> np.ndarray | None:
    """(n, d) floats for the peers: labels as codes."""
    if data is None:
        return None
    array = np.asarray(data)
    if array.dtype.kind in "USO":
        array = np.unique(array, return_inverse=True)[1]
    array = array.astype(float)
    return array[:, None] if array.ndim == 1 else array


def peer_tests(permutations: int) -> tuple[dict[str, Callable], list[str]]:
    """The peers installed that find a plain dependence (y = x + 0.1 noise, n = 200, p <= 0.05):
    name -> test(x, y, z, seed) -> p-value (None where it does not apply), and notes on those left
    out (hyppo 0.5.2's KCI gave p = 1.0 there with numpy 2.4 and scipy 1.17)."""
    tests: dict[str, Callable] = {}
    notes = []
    try:
        from hyppo.conditional import KCI
        from hyppo.independence import Dcorr, Hsic

        tests["hyppo-hsic"] = lambda x, y, z, seed: None if z is not None else Hsic().test(x, y)[1]
        tests["hyppo-dcorr"] = lambda x, y, z, seed: None if z is not None else Dcorr().test(x, y)[1]
        tests["hyppo-kci"] = lambda x, y, z, seed: None if z is not None else KCI().test(x, y)[1]
        notes.append(
            "hyppo's ConditionalDcorr left out: 98 CPU seconds per test at n = 400, 199 permutations"
        )
    except ImportError as error:
        notes.append(f"hyppo not installed ({error}): its HSIC, Dcorr and KCI skipped")
    try:
        from tigramite.independence_tests.cmiknn import CMIknn

        def cmiknn(x, y, z, seed):
            test = CMIknn(sig_samples=permutations, sig_blocklength=1, workers=1, seed=seed)
            return test.run_test_raw(x, y, z)[1]

        tests["tigramite-cmiknn"] = cmiknn
    except ImportError as error:
        notes.append(f"tigramite not installed ({error}): CMIknn skipped")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 1))
    y = x + 0.1 * rng.normal(size=(200, 1))
    for name in list(tests):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pvalue = tests[name](x, y, None, 0)
        if not pvalue <= 0.05:
            notes.append(f"{name} left out: p = {pvalue:.3g} for y = x + 0.1 noise at n = 200 (broken here)")
            tests.pop(name)
    return tests, notes


# --- runs -------------------------------------------------------------------------------------------------


def band(replicates: int, alpha: float, level: float = 0.99) -> tuple[float, float]:
    """The rejection rates that a test of exact size alpha stays within with probability ``level``."""
    from scipy import stats

    tail = (1 - level) / 2
    return (float(stats.binom.ppf(tail, replicates, alpha)) / replicates,
            float(stats.binom.isf(tail, replicates, alpha)) / replicates)  # fmt: skip


def rates(pvalues: list[float], alphas: tuple[float, ...]) -> dict[str, float]:
    values = np.array([p for p in pvalues if p is not None and math.isfinite(p)])
    return {str(alpha): float(np.mean(values <= alpha)) if len(values) else math.nan for alpha in alphas}


def run_scenario(name: str, args: argparse.Namespace, peers: dict[str, Callable]) -> dict:
    scenario = SCENARIOS[name]
    stream = zlib.crc32(name.encode())
    variants: dict[str, dict] = {"mitool": {}, **{f"mitool-k{k}": {"k": k} for k in args.extra_k}}
    if args.knn_only:
        variants["mitool-knn"] = {"linear": False}
    if args.peers_only:
        variants = {}
    methods: dict[str, dict] = {name: {"pvalues": [], "seconds": [], "cpu_seconds": []} for name in variants}
    estimator = ""
    for replicate in range(args.replicates):
        x, y, z = scenario.draw(np.random.default_rng([args.seed, stream, replicate]), args.n)
        for variant, settings in variants.items():
            start, cpu = time.perf_counter(), time.process_time()
            result = independence_test(x, y, z, permutations=args.permutations, seed=replicate, **settings)
            record = methods[variant]
            record["pvalues"].append(result.pvalue)
            record["seconds"].append(time.perf_counter() - start)
            record["cpu_seconds"].append(time.process_time() - cpu)
            estimator = result.estimator
        if replicate >= args.peer_replicates:
            continue
        for peer, test in peers.items():
            record = methods.setdefault(peer, {"pvalues": [], "seconds": [], "cpu_seconds": []})
            start, cpu = time.perf_counter(), time.process_time()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    pvalue = test(_numeric(x), _numeric(y), _numeric(z), replicate)
            except Exception as error:  # a peer's failure is recorded, not fatal
                record.setdefault("errors", []).append(f"{type(error).__name__}: {str(error)[:200]}")
                pvalue = math.nan
            if pvalue is None:
                methods.pop(peer)
                continue
            record["pvalues"].append(float(pvalue))
            record["seconds"].append(time.perf_counter() - start)
            record["cpu_seconds"].append(time.process_time() - cpu)
    summary = {}
    for method, record in methods.items():
        summary[method] = {
            "rejection": rates(record["pvalues"], args.alphas),
            "replicates": len(record["pvalues"]),
            "seconds_per_test": float(np.mean(record["seconds"])),
            "cpu_seconds_per_test": float(np.mean(record["cpu_seconds"])),
            "pvalues": record["pvalues"],
            **(
                {"errors": record["errors"][:3], "failed": len(record["errors"])}
                if "errors" in record
                else {}
            ),
        }
        if scenario.null:
            bands = {str(alpha): band(summary[method]["replicates"], alpha) for alpha in args.alphas}
            summary[method]["band_99"] = bands
            summary[method]["within_band"] = {
                alpha: bool(rate <= bands[alpha][1]) for alpha, rate in summary[method]["rejection"].items()
            }
    return {
        "scenario": name, "null": scenario.null, "conditional": scenario.conditional, "about": scenario.about,
        "n": args.n, "replicates": args.replicates, "permutations": args.permutations,
        "alphas": list(args.alphas), "mitool_statistic": estimator, "methods": summary,
        "load_average": os.getloadavg(),
    }  # fmt: skip


def timing(n: int, permutations: int, peers: bool = True) -> dict:
    """One test at n pairs (1 + 1 dimensions, a weak dependence) with ``permutations``, mitool's
    default and its k-NN statistic alone; the peers beside it (hyppo's tests as they run by default;
    tigramite's CMIknn on 10 shuffles, its time per shuffle times ``permutations`` reported as
    the estimate for as many)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=n)
    y = 0.05 * x + rng.normal(size=n)
    start = time.process_time()
    independence_test(x[:100], y[:100], permutations=9)  # imports and numba's compiled search, once
    rows: dict = {"warm_up_cpu_seconds": time.process_time() - start}
    for name, options in (("unconditional", {}), ("knn_only", {"linear": False})):
        start, cpu = time.perf_counter(), time.process_time()
        result = independence_test(x, y, None, permutations=permutations, **options)
        rows[name] = {
            "seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu,
            "pvalue": result.pvalue, "statistic": result.statistic, "summary": str(result),
        }  # fmt: skip
    if peers:
        rows["peers"] = _peer_timing(x[:, None], y[:, None], permutations)
    from mitool.estimators.ksg import ksg

    start = time.process_time()
    for _ in range(5):
        ksg(x[:, None], y[:, None], normalise="rank")
    rows["one_fresh_ksg_cpu_seconds"] = (time.process_time() - start) / 5
    return {"n": n, "permutations": permutations, "load_average": os.getloadavg(),
            "threads": os.environ.get("MITOOL_THREADS", "1 (library default)"), **rows}  # fmt: skip


def _peer_timing(x: np.ndarray, y: np.ndarray, permutations: int) -> dict:
    """CPU seconds of the peers on the timing data (see :func:`timing`); absent peers left out."""
    found: dict = {}
    try:
        from hyppo.independence import Dcorr, Hsic

        for name, test in (("hyppo-dcorr", Dcorr()), ("hyppo-hsic", Hsic())):
            cpu = time.process_time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pvalue = test.test(x, y)[1]
            how = "hyppo's default test (its chi-square approximation at this n)"
            found[name] = {"cpu_seconds": time.process_time() - cpu, "pvalue": float(pvalue), "how": how}
    except Exception as error:  # absent, or out of memory (HSIC's n x n kernels)
        found["hyppo"] = {"error": f"{type(error).__name__}: {str(error)[:200]}"}
    try:
        from tigramite.independence_tests.cmiknn import CMIknn

        shuffles = 10
        cpu = time.process_time()
        test = CMIknn(sig_samples=shuffles, sig_blocklength=1, workers=1, seed=0)
        pvalue = test.run_test_raw(x, y, None)[1]
        spent = time.process_time() - cpu
        found["tigramite-cmiknn"] = {
            "cpu_seconds_measured": spent, "shuffles_measured": shuffles, "pvalue": float(pvalue),
            "cpu_seconds_estimated": spent * (permutations + 1) / (shuffles + 1),
            "how": f"{shuffles} shuffles timed, the time for {permutations} scaled from them (k = 0.2 n)",
        }  # fmt: skip
    except Exception as error:
        found["tigramite-cmiknn"] = {"error": f"{type(error).__name__}: {str(error)[:200]}"}
    return found


def summary_markdown(folder: Path) -> str:
    """The table of every scenario file in ``folder``: rejection rates per method and alpha; a rate
    above the null's 99% binomial band is marked with !."""
    lines = ["# Independence tests: calibration, power, speed", "",
             "Rejection rates at alpha = 0.01 / 0.05 / 0.1 (nulls: should be at most alpha; `!` marks a rate "
             "above the band a test of exact size alpha stays in with probability 0.99).", "",
             "| scenario | kind | n | replicates | method | 0.01 | 0.05 | 0.1 | CPU s / test |",
             "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]  # fmt: skip
    files = sorted(folder.glob("*.json"), key=lambda path: (path.stem not in SCENARIOS, path.stem))
    ordered = [f for name in SCENARIOS for f in files if f.stem == name]
    for path in ordered:
        data = json.loads(path.read_text())
        kind = ("null" if data["null"] else "alternative") + (", given Z" if data["conditional"] else "")
        for method, record in data["methods"].items():
            cells = []
            for alpha in map(str, data["alphas"]):
                mark = "!" if data["null"] and not record["within_band"][alpha] else ""
                cells.append(f"{record['rejection'][alpha]:.3f}{mark}")
            label = f"{method} ({data['mitool_statistic']})" if method.startswith("mitool") else method
            lines.append(f"| {data['scenario']} | {kind} | {data['n']} | {record['replicates']} | {label} | "
                         f"{' | '.join(cells)} | {record['cpu_seconds_per_test']:.3f} |")  # fmt: skip
    timing_file = folder / "timing.json"
    if timing_file.exists():
        data = json.loads(timing_file.read_text())
        row = data["unconditional"]
        lines += ["", f"Speed: one test at n = {data['n']} with {data['permutations']} permutations: "
                  f"{row['seconds']:.1f} s wall, {row['cpu_seconds']:.1f} s CPU (load average "
                  f"{data['load_average'][0]:.1f}); one fresh KSG estimate: "
                  f"{data['one_fresh_ksg_cpu_seconds'] * 1000:.0f} ms CPU."]  # fmt: skip
        if "knn_only" in data:
            lines[-1] += f" The k-NN statistic alone: {data['knn_only']['cpu_seconds']:.1f} s CPU."
        for peer, record in data.get("peers", {}).items():
            seconds = record.get("cpu_seconds", record.get("cpu_seconds_estimated"))
            shown = f"{seconds:.1f} s CPU ({record['how']})" if seconds is not None else record.get("error")
            lines.append(f"- {peer}: {shown}")
    return "\n".join(lines) + "\n"


def compact_markdown(folder: Path, alpha: str = "0.05") -> str:
    """Two tables for the docs: the nulls (each method's rejection rate at 0.01 / 0.05 / 0.1) and the
    alternatives (the power at ``alpha`` side by side, the best peer, and mitool less it)."""
    data = [json.loads(path.read_text()) for name in SCENARIOS for path in [folder / f"{name}.json"]
            if path.exists()]  # fmt: skip
    data = [record for record in data if "mitool" in record["methods"]]  # not a peers-only run
    methods = ["mitool", "mitool-knn", "hyppo-hsic", "hyppo-dcorr", "tigramite-cmiknn"]
    lines = ["| null | n | replicates | " + " | ".join(methods) + " |",
             "| --- | ---: | ---: |" + " ---: |" * len(methods)]  # fmt: skip
    for record in (d for d in data if d["null"]):
        cells = []
        for method in methods:
            rates = record["methods"].get(method, {}).get("rejection")
            cells.append(" / ".join(f"{rates[a]:.3f}" for a in map(str, record["alphas"])) if rates else "")
        replicates = record["methods"]["mitool"]["replicates"]
        lines.append(f"| {record['scenario']} | {record['n']} | {replicates} | " + " | ".join(cells) + " |")
    lines += ["", "| alternative | " + " | ".join(methods) + " | best peer | mitool - best peer |",
              "| --- |" + " ---: |" * (len(methods) + 2)]  # fmt: skip
    for record in (d for d in data if not d["null"]):
        power = {m: record["methods"][m]["rejection"][alpha] for m in methods if m in record["methods"]}
        peers = {m: value for m, value in power.items() if not m.startswith("mitool")}
        best = max(peers.values()) if peers else math.nan
        cells = [f"{power[m]:.3f}" if m in power else "" for m in methods]
        lines.append(
            f"| {record['scenario']} | "
            + " | ".join(cells)
            + f" | {best:.3f} | {power['mitool'] - best:+.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    parser.add_argument(
        "--scenarios", default="all", help="comma-separated names, or all, nulls, alternatives"
    )
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--permutations", type=int, default=199)
    parser.add_argument("--alphas", default="0.01,0.05,0.1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-peers", action="store_true", help="mitool alone")
    parser.add_argument(
        "--extra-k",
        default="",
        help="comma-separated k: mitool with its statistic's k set so, one method each",
    )
    parser.add_argument(
        "--knn-only", action="store_true", help="also mitool's k-NN statistic alone (linear=False)"
    )
    parser.add_argument(
        "--peers-only", action="store_true", help="the peers alone (beside a mitool run, same seeds)"
    )
    parser.add_argument(
        "--peer-replicates", type=int, default=None, help="peers on the first N replicates only"
    )
    parser.add_argument("--timing-n", type=int, default=10_000)
    parser.add_argument("--timing-permutations", type=int, default=1000)
    parser.add_argument("--no-timing", action="store_true")
    parser.add_argument("--timing-only", action="store_true")
    parser.add_argument("--timing-no-peers", action="store_true", help="time mitool alone")
    parser.add_argument("--summary-only", action="store_true")
    parser.add_argument("--out", default=OUT)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args(argv)
    if args.list:
        for name, scenario in SCENARIOS.items():
            kind = ("null" if scenario.null else "alternative") + (
                ", given Z" if scenario.conditional else ""
            )
            print(f"{name:24s} {kind:24s} {scenario.about}")
        return 0
    args.alphas = tuple(float(alpha) for alpha in args.alphas.split(","))
    args.extra_k = tuple(int(k) for k in args.extra_k.split(",") if k.strip())
    args.peer_replicates = args.replicates if args.peer_replicates is None else args.peer_replicates
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    if not args.summary_only and not args.timing_only:
        groups = {"all": list(SCENARIOS), "nulls": [n for n, s in SCENARIOS.items() if s.null],
                  "alternatives": [n for n, s in SCENARIOS.items() if not s.null]}  # fmt: skip
        names = groups.get(args.scenarios) or [name.strip() for name in args.scenarios.split(",")]
        unknown = [name for name in names if name not in SCENARIOS]
        if unknown:
            parser.error(f"unknown scenarios {unknown}; --list shows them")
        peers, notes = ({}, ["--no-peers"]) if args.no_peers else peer_tests(args.permutations)
        for note in notes:
            print(f"peers: {note}", flush=True)
        for name in names:
            start = time.perf_counter()
            result = run_scenario(name, args, peers)
            result["peer_notes"] = notes
            write_json(str(folder / f"{name}.json"), result)
            shown = ", ".join(f"{method} {' / '.join(f'{r:.3f}' for r in record['rejection'].values())}"
                              for method, record in result["methods"].items())  # fmt: skip
            print(f"{name}: {shown} ({time.perf_counter() - start:.0f} s)", flush=True)
    if args.timing_only or not (args.no_timing or args.summary_only):
        measured = timing(args.timing_n, args.timing_permutations, not args.timing_no_peers)
        write_json(str(folder / "timing.json"), measured)
        print(f"timing: {json.dumps(measured['unconditional'])}", flush=True)
    (folder / "summary.md").write_text(summary_markdown(folder))
    (folder / "compact.md").write_text(compact_markdown(folder))
    print(f"wrote {folder / 'summary.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
