"""Power curves of tests of independence: mitool's default test and its candidate statistics beside
hyppo's distance correlation and HSIC, a median-heuristic HSIC and tigramite's CMIknn, on families
of alternatives whose signal strength is swept from undetectable to obvious (issue 58).

What it measures. Each family is a law of (X, Y) with a strength s in [0, 1]: s = 0 is a null (X
and Y independent draws with the marginals of the family at s = 1), s > 0 an alternative whose
signal grows with s. For every (family, n, s) the same ``--replicates`` data sets go to every test
(seeds fixed by family, n, s and replicate), each test gives a p-value, and the rejection rate at
alpha = 0.05 is the power (the level at s = 0). The figure of merit of a test on a family at one n
is the area under its power curve, the trapezoid over the strengths (s from 0 to 1, so an area of
1 is power 1 everywhere, and a test that never rejects beyond its level scores about 0.05). The
gap of mitool's default to the best peer is the difference of areas.

The signal amplitude of each family is ``a = A * s * (400 / n) ** r`` (``--absolute``: ``A * s``
at every n), the scaling of local alternatives: r = 1/2 where the dependence moves the first
moments in proportion to a (a shift of the mean or the spread of y given x: its effect on the MI
grows as a^2), r = 1/4 where the two signs or the angle cancel the first order (the mixture, the
ring: the MI grows as a^4). Then a statistic whose power rests on sqrt(n) averages keeps about the
same curve at every n, the curves at n = 100, 400, 2000 all run from undetectable to obvious, and
a curve that sinks as n grows shows a statistic slower than that.

Families (noise e ~ N(0, 1) throughout):

* ``periodic-f1``, ``periodic-f2``, ``periodic-f4``: x ~ U(-1, 1), y = a cos(f pi x) + e;
* ``ring``: angle t ~ U(0, 2 pi), x = a cos t + e1, y = a sin t + e2: the noisy ring of radius 1
  and noise 1 / a on each coordinate (rescaled: every test here is invariant to scaling X and Y by
  a common factor), the noise shrinking as s grows. Noise on the radius alone would never make X
  and Y independent, however large, so the noise is on each coordinate;
* ``heteroscedastic``: x ~ N(0, 1), y = e (1 + a |x|);
* ``mixture``: x ~ N(0, 1), y = c a x + e with c = +1 or -1 at random per row: two components of
  opposite correlations, none overall;
* ``one-of-five``: x ~ N(0, I_5), y = a x_3 + e (one dependent coordinate among five);
* ``linear``: x ~ N(0, 1), y = a x + e (the control).

Tests (``--tests``; a peer that is not installed is skipped with a note):

* ``mitool``: ``mitool.independence_test(x, y, permutations=B, seed=...)``, the default (KSG with
  k = 20, at most n / 10, on rank normal scores, the linear statistic beside, min-p);
  ``mitool[ksg]`` and ``mitool[linear]``: the p-values of its two components (its ``.components``,
  the same permutations, no extra cost);
* ``mitool-k5``, ``mitool-k10``, ``mitool-k40``: candidate statistics, KSG on rank scores with a fixed
  k and the linear statistic beside (``estimator="ksg", normalise="rank", k=K, linear=True``);
* ``mitool-multik``: a candidate (issue 58), KSG on rank scores at three numbers of neighbours, a
  small one (5), the default's (20, at most n / 10) and a large one (n / 5, at least 20, CMIknn's),
  with the linear statistic, all four on the same permutations and combined by min-p, computed
  here from mitool's pieces (one joint neighbour search for the three k);
* ``hyppo-dcorr``, ``hyppo-hsic``: hyppo's ``Dcorr().test`` and ``Hsic().test`` as a user gets them
  (``pip install hyppo``): their default fast chi-square approximation, no permutations; hyppo's
  HSIC takes the Gaussian kernel's bandwidth from the median distance of X and uses it for Y too;
* ``hsic-median``: a Gaussian-kernel HSIC written here (biased V-statistic), the bandwidth of each
  side the median of its own pairwise distances, with B permutations of Y;
* ``cmiknn``: tigramite's CMIknn (Runge 2018) unconditional, its defaults (k = 0.2 n, ranks) and its
  shuffle test with B shuffles (``sig_blocklength=1``: plain permutations).

How to run (set MITOOL_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 on a shared machine)::

    python bench/power_curves.py --list                                   # families and tests
    python bench/power_curves.py --n 100 --replicates 4 --permutations 19 # a smoke run
    python bench/power_curves.py --n 100 400 --replicates 50 --permutations 199
    python bench/power_curves.py --n 400 --tests cmiknn                   # a chunk: one test added
    python bench/power_curves.py --summary-only                           # tables and figures again

Each (family, n) keeps its p-values and seconds in ``<out>/raw/<family>_n<n>.json``; a run replaces
the tests it ran there and keeps the others (when replicates, permutations and strengths agree), so
a long grid can go in chunks. Every run rewrites from all the raw files ``<out>/power.csv`` (one row
per family, n, strength, test: rejection rate, seconds per test), ``<out>/summary.md`` (areas per
family and test at each n, power at each strength, level at s = 0, seconds) and
``<out>/power_n<n>.png`` (a panel per family, a line per test).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import time
import warnings
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

OUT = "bench/results/power_curves"
ALPHA = 0.05
SEED = 58
"""The root of every data set's and test's seed (the issue's number)."""
STRENGTHS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
REFERENCE_N = 400
"""The n at which the amplitude at s = 1 is ``A``; at other n it is scaled by (REFERENCE_N / n) ** r."""

Pair = tuple[np.ndarray, np.ndarray]
Law = Callable[[int, float, np.random.Generator], Pair]
"""(n, amplitude, rng) -> (x, y), shapes (n, dx) and (n, 1)."""
PTest = Callable[[np.ndarray, np.ndarray, int, int], dict[str, float]]
"""(x, y, seed, permutations) -> {test name: p-value}: one call may give several (mitool's components)."""


# --- families -------------------------------------------------------------------------------------------


def _column(values: np.ndarray) -> np.ndarray:
    return values.reshape(len(values), -1).astype(float)


def _periodic(frequency: float) -> Law:
    def law(n: int, amplitude: float, rng: np.random.Generator) -> Pair:
        x = rng.uniform(-1.0, 1.0, n)
        return _column(x), _column(amplitude * np.cos(frequency * np.pi * x) + rng.normal(size=n))

    return law


def _ring(n: int, amplitude: float, rng: np.random.Generator) -> Pair:
    angle = rng.uniform(0.0, 2 * np.pi, n)
    x = amplitude * np.cos(angle) + rng.normal(size=n)
    return _column(x), _column(amplitude * np.sin(angle) + rng.normal(size=n))


def _heteroscedastic(n: int, amplitude: float, rng: np.random.Generator) -> Pair:
    x = rng.normal(size=n)
    return _column(x), _column(rng.normal(size=n) * (1.0 + amplitude * np.abs(x)))


def _mixture(n: int, amplitude: float, rng: np.random.Generator) -> Pair:
    x = rng.normal(size=n)
    sign = rng.choice([-1.0, 1.0], n)
    return _column(x), _column(sign * amplitude * x + rng.normal(size=n))


def _one_of_five(n: int, amplitude: float, rng: np.random.Generator) -> Pair:
    x = rng.normal(size=(n, 5))
    return x, _column(amplitude * x[:, 2] + rng.normal(size=n))


def _linear(n: int, amplitude: float, rng: np.random.Generator) -> Pair:
    x = rng.normal(size=n)
    return _column(x), _column(amplitude * x + rng.normal(size=n))


@dataclass(frozen=True)
class Family:
    """A law of (X, Y) whose dependence grows with the amplitude ``a = full * s`` at n = 400, scaled
    by (400 / n) ** rate at other n."""

    law: Law
    full: float
    rate: float
    about: str

    def amplitude(self, n: int, strength: float, absolute: bool = False) -> float:
        scale = 1.0 if absolute else (REFERENCE_N / n) ** self.rate
        return self.full * strength * scale

    def draw(self, n: int, strength: float, rng: np.random.Generator, absolute: bool = False) -> Pair:
        """(x, y) at this strength; at s = 0 X and Y are independent draws with the marginals of
        the family at s = 1 (x from one data set, y from another)."""
        if strength > 0:
            return self.law(n, self.amplitude(n, strength, absolute), rng)
        full = self.amplitude(n, 1.0, absolute)
        x = self.law(n, full, rng)[0]
        return x, self.law(n, full, rng)[1]


FAMILIES: dict[str, Family] = {
    "periodic-f1": Family(_periodic(1.0), 0.5, 0.5, "x ~ U(-1, 1), y = a cos(pi x) + e"),
    "periodic-f2": Family(_periodic(2.0), 0.8, 0.5, "x ~ U(-1, 1), y = a cos(2 pi x) + e"),
    "periodic-f4": Family(_periodic(4.0), 3.5, 0.5, "x ~ U(-1, 1), y = a cos(4 pi x) + e"),
    "ring": Family(_ring, 2.6, 0.25, "t ~ U(0, 2 pi), x = a cos t + e1, y = a sin t + e2 (ring, noise 1/a)"),
    "heteroscedastic": Family(_heteroscedastic, 1.0, 0.5, "x ~ N(0, 1), y = e (1 + a |x|)"),
    "mixture": Family(
        _mixture, 1.0, 0.25, "x ~ N(0, 1), y = +-a x + e (opposite correlations, sign at random)"
    ),
    "one-of-five": Family(_one_of_five, 0.3, 0.5, "x ~ N(0, I_5), y = a x_3 + e"),
    "linear": Family(_linear, 0.3, 0.5, "x ~ N(0, 1), y = a x + e (control)"),
}
"""The families; ``full`` is the amplitude A at s = 1 and n = 400, ``rate`` the exponent r. A was
chosen after pilot runs at n = 400 (10 to 20 replicates), aiming at power near the level at s = 0.2
and near 1 at s = 1 for the better tests."""


def data_seed(family: str, n: int, strength: float, replicate: int) -> list[int]:
    """The seed of one data set: the same for every test, every run and every chunk."""
    return [SEED, zlib.crc32(family.encode()), n, round(strength * 1000), replicate]


def test_seed(family: str, n: int, strength: float, replicate: int) -> int:
    """The seed each test gets for its permutations (the same for every test)."""
    return int(np.random.default_rng(data_seed(family, n, strength, replicate) + [1]).integers(2**31 - 1))


# --- tests ---------------------------------------------------------------------------------------------


def _mitool_default(x: np.ndarray, y: np.ndarray, seed: int, permutations: int) -> dict[str, float]:
    import mitool

    result = mitool.independence_test(x, y, permutations=permutations, seed=seed)
    found = {"mitool": float(result.pvalue)}
    for component in getattr(result, "components", None) or ():
        found[f"mitool[{component.name}]"] = float(component.pvalue)
    return found


def _mitool_k(k: int) -> PTest:
    def test(x: np.ndarray, y: np.ndarray, seed: int, permutations: int) -> dict[str, float]:
        import mitool

        result = mitool.independence_test(
            x, y, permutations=permutations, seed=seed, estimator="ksg", normalise="rank", k=k, linear=True
        )
        return {f"mitool-k{k}": float(result.pvalue)}

    return test


def multi_k_ks(n: int) -> tuple[int, ...]:
    """The candidate's numbers of neighbours: a small k (5), the default's (20, at most n / 10) and a
    large one (n / 5, CMIknn's 0.2 n; at least 20)."""
    return tuple(sorted({5, min(20, n // 10), max(20, n // 5)}))


def mitool_multi_k(x: np.ndarray, y: np.ndarray, seed: int, permutations: int) -> dict[str, float]:
    """A candidate: KSG on rank scores at each k of :func:`multi_k_ks` (the joint search made once
    for all of them) and the linear statistic, on the same B permutations of Y, combined by min-p
    (mitool.independence.min_p_combination)."""
    from mitool.independence import min_p_combination
    from mitool.independence.statistics import ksg_statistics, linear_statistic

    n = len(x)
    ksg = ksg_statistics(_column(x), _column(y), multi_k_ks(n))
    linear = linear_statistic(_column(x), _column(y))

    def statistics(order: np.ndarray) -> list[float]:
        return [*ksg(order), linear(order)]

    rng = np.random.default_rng([seed, 0x3A17])
    observed = np.array(statistics(np.arange(n)))
    null = np.array([statistics(rng.permutation(n)) for _ in range(permutations)])
    return {"mitool-multik": float(min_p_combination(observed, null)[0])}


def _hyppo(name: str) -> PTest:
    def test(x: np.ndarray, y: np.ndarray, seed: int, permutations: int) -> dict[str, float]:
        from hyppo.independence import Dcorr, Hsic

        chosen = Dcorr() if name == "dcorr" else Hsic()
        return {f"hyppo-{name}": float(chosen.test(x, y)[1])}

    return test


def _median_kernel(values: np.ndarray) -> np.ndarray:
    """The Gaussian kernel exp(-d^2 / (2 h^2)), h the median of the nonzero pairwise distances."""
    squared = np.sum(values**2, axis=1)
    distance2 = np.maximum(squared[:, None] + squared[None, :] - 2.0 * values @ values.T, 0.0)
    off = distance2[~np.eye(len(values), dtype=bool)]
    positive = off[off > 0]
    bandwidth2 = float(np.median(positive)) if len(positive) else 1.0  # median of d^2 = (median d)^2
    return np.exp(-distance2 / (2.0 * bandwidth2))


def hsic_median_test(x: np.ndarray, y: np.ndarray, seed: int, permutations: int) -> dict[str, float]:
    """HSIC with Gaussian kernels, each side's bandwidth the median heuristic on its own distances,
    the biased statistic tr(K H L H) / n^2, and p = (1 + #{T_b >= T}) / (1 + B) over B permutations
    of Y's rows."""
    n = len(x)
    centred = _median_kernel(x)
    centred -= centred.mean(axis=0, keepdims=True)
    centred -= centred.mean(axis=1, keepdims=True)
    other = _median_kernel(y)
    observed = float(np.sum(centred * other)) / n**2
    rng = np.random.default_rng([seed, 0x4851])
    reached = 0
    for _ in range(permutations):
        order = rng.permutation(n)
        value = float(np.sum(centred * other[np.ix_(order, order)])) / n**2
        reached += value >= observed - 1e-12 * (1 + abs(observed))
    return {"hsic-median": (1 + reached) / (1 + permutations)}


def _cmiknn(x: np.ndarray, y: np.ndarray, seed: int, permutations: int) -> dict[str, float]:
    from tigramite.independence_tests.cmiknn import CMIknn

    test = CMIknn(sig_samples=permutations, sig_blocklength=1, workers=1, seed=seed)
    return {"cmiknn": float(test.run_test_raw(x, y, None)[1])}


@dataclass(frozen=True)
class Test:
    """One call that gives the p-values of ``gives`` (several where a test reports components)."""

    run: PTest
    needs: str | None
    gives: tuple[str, ...]
    about: str


TESTS: dict[str, Test] = {
    "mitool": Test(
        _mitool_default,
        "mitool",
        ("mitool", "mitool[ksg]", "mitool[linear]"),
        "mitool.independence_test, the default; and the p-values of its two components",
    ),
    "mitool-k5": Test(_mitool_k(5), "mitool", ("mitool-k5",), "KSG k = 5 on rank scores, linear beside"),
    "mitool-k10": Test(_mitool_k(10), "mitool", ("mitool-k10",), "KSG k = 10 on rank scores, linear beside"),
    "mitool-k40": Test(_mitool_k(40), "mitool", ("mitool-k40",), "KSG k = 40 on rank scores, linear beside"),
    "mitool-multik": Test(
        mitool_multi_k,
        "mitool",
        ("mitool-multik",),
        "KSG on rank scores at k = 5, 20 (at most n / 10) and n / 5 (at least 20), linear beside, min-p",
    ),
    "hyppo-dcorr": Test(
        _hyppo("dcorr"), "hyppo", ("hyppo-dcorr",), "hyppo Dcorr().test: its default chi-square approximation"
    ),
    "hyppo-hsic": Test(
        _hyppo("hsic"),
        "hyppo",
        ("hyppo-hsic",),
        "hyppo Hsic().test: default kernel (X's median distance for both), chi-square",
    ),
    "hsic-median": Test(
        hsic_median_test,
        None,
        ("hsic-median",),
        "Gaussian HSIC, each side's own median-heuristic bandwidth, permutations",
    ),
    "cmiknn": Test(_cmiknn, "tigramite", ("cmiknn",), "tigramite CMIknn (k = 0.2 n), shuffle test"),
}
DEFAULT_TESTS = ("mitool", "hyppo-dcorr", "hyppo-hsic", "hsic-median", "cmiknn")
MITOOL_DEFAULT = "mitool"
MITOOL_NAMES = (
    "mitool",
    "mitool[ksg]",
    "mitool[linear]",
    "mitool-k5",
    "mitool-k10",
    "mitool-k40",
    "mitool-multik",
)
"""Names of mitool's own statistics; the others are the peers."""


def available(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """The tests of ``names`` whose package imports, and a note for each one skipped."""
    chosen, notes = [], []
    for name in names:
        needs = TESTS[name].needs
        if needs is not None:
            try:
                __import__(needs)
            except ImportError as error:
                notes.append(f"{name} skipped: {needs} is not importable ({error})")
                continue
        chosen.append(name)
    return chosen, notes


def warm_up(names: Sequence[str]) -> None:
    """One small call of each test, so that imports and numba's compilation stay out of the timings."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 1))
    y = x + rng.normal(size=(120, 1))
    for name in names:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            TESTS[name].run(x, y, 0, 9)
            TESTS[name].run(rng.normal(size=(120, 5)), y, 0, 9)


# --- runs ---------------------------------------------------------------------------------------------


def raw_path(out: Path, family: str, n: int) -> Path:
    return out / "raw" / f"{family}_n{n}.json"


def run_cell(family: str, n: int, args: argparse.Namespace, tests: Sequence[str]) -> dict:
    """The p-values and seconds of ``tests`` on every strength and replicate of (family, n), merged
    into the raw file already there when its settings agree."""
    path = raw_path(args.out, family, n)
    settings = {
        "replicates": args.replicates,
        "permutations": args.permutations,
        "strengths": list(args.strengths),
        "absolute": args.absolute,
        "full_amplitude": FAMILIES[family].full,
        "rate": FAMILIES[family].rate,
    }
    record: dict = {"family": family, "n": n, **settings, "tests": {}, "commands": []}
    if path.exists():
        old = json.loads(path.read_text())
        if all(old.get(key) == value for key, value in settings.items()):
            record["tests"] = old["tests"]
            record["commands"] = old.get("commands", [])
        else:
            print(f"  {path}: settings differ, its tests are replaced", file=sys.stderr)
    started = time.perf_counter()
    fresh: dict[str, dict[str, list]] = {}
    for name in tests:
        for given in TESTS[name].gives:
            fresh[given] = {"pvalues": [[] for _ in args.strengths], "seconds": [[] for _ in args.strengths]}
    for index, strength in enumerate(args.strengths):
        for replicate in range(args.replicates):
            rng = np.random.default_rng(data_seed(family, n, strength, replicate))
            x, y = FAMILIES[family].draw(n, strength, rng, args.absolute)
            seed = test_seed(family, n, strength, replicate)
            for name in tests:
                begun = time.process_time()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        found = TESTS[name].run(x, y, seed, args.permutations)
                    except Exception as error:  # a failed test is recorded, not fatal
                        print(f"  {name} failed on {family} n={n} s={strength}: {error}", file=sys.stderr)
                        found = {}
                spent = time.process_time() - begun
                for given in TESTS[name].gives:
                    fresh[given]["pvalues"][index].append(found.get(given, float("nan")))
                    fresh[given]["seconds"][index].append(spent)
    for given, values in fresh.items():
        if all(math.isnan(p) for row in values["pvalues"] for p in row):
            continue  # a component that this test did not report (e.g. a 5-D X)
        record["tests"][given] = values
    record["commands"].append(" ".join(["python", *sys.argv]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1))
    print(f"{family} n={n}: {time.perf_counter() - started:.1f} s", flush=True)
    return record


# --- summaries ---------------------------------------------------------------------------------------


def rejection(pvalues: Sequence[float]) -> float:
    kept = [p for p in pvalues if not math.isnan(p)]
    return sum(p <= ALPHA for p in kept) / len(kept) if kept else float("nan")


def area(strengths: Sequence[float], powers: Sequence[float]) -> float:
    """The trapezoid under the power curve over the strengths."""
    total = 0.0
    for left in range(len(strengths) - 1):
        total += (strengths[left + 1] - strengths[left]) * (powers[left] + powers[left + 1]) / 2
    return total


def level_band(replicates: int, alpha: float = ALPHA, level: float = 0.99) -> float:
    """The largest rejection rate that a test of exact size alpha stays at or below with probability
    ``level`` over ``replicates`` data sets."""
    from scipy import stats

    return float(stats.binom.ppf(level, replicates, alpha)) / replicates


def load(out: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted((out / "raw").glob("*.json"))]


def rows_of(records: Sequence[dict]) -> list[dict]:
    """One row per family, n, strength and test."""
    rows = []
    for record in records:
        for test, values in record["tests"].items():
            for index, strength in enumerate(record["strengths"]):
                pvalues = values["pvalues"][index]
                rows.append(
                    {
                        "family": record["family"],
                        "n": record["n"],
                        "strength": strength,
                        "amplitude": round(
                            FAMILIES[record["family"]].amplitude(
                                record["n"], strength, record.get("absolute", False)
                            ),
                            6,
                        ),
                        "test": test,
                        "rejection_rate": rejection(pvalues),
                        "replicates": len(pvalues),
                        "permutations": record["permutations"],
                        "seconds_per_test": float(np.mean(values["seconds"][index])),
                    }
                )
    return rows


def _order(names: Sequence[str]) -> list[str]:
    known = [*MITOOL_NAMES, "hyppo-dcorr", "hyppo-hsic", "hsic-median", "cmiknn"]
    return sorted(names, key=lambda name: known.index(name) if name in known else len(known))


def _table(header: Sequence[str], lines: Sequence[Sequence[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(line) + " |" for line in lines),
    ]


def _number(value: float) -> str:
    return "" if value is None or math.isnan(value) else f"{value:.2f}"


def summary_markdown(records: Sequence[dict]) -> str:
    rows = rows_of(records)
    if not rows:
        return "# Power curves\n\nNo results yet.\n"
    sizes = sorted({row["n"] for row in rows})
    lines = [
        "# Power curves of tests of independence (bench/power_curves.py)",
        "",
        f"Rejection rates at alpha = {ALPHA}; area = trapezoid of power over the strengths "
        "s = 0 .. 1 (the s = 0 point is the level: X and Y independent draws with the marginals "
        "of s = 1). Amplitude a = A s (400 / n) ** r unless `--absolute`. Families:",
        "",
    ]
    lines += [
        f"* `{name}` (A = {family.full}, r = {family.rate}): {family.about}"
        for name, family in FAMILIES.items()
    ]
    lines += ["", "Tests:", ""]
    lines += [f"* `{name}`: {test.about}" for name, test in TESTS.items()]
    lines += ["", "Commands that wrote the raw files:", ""]
    commands = dict.fromkeys(command for record in records for command in record.get("commands", []))
    lines += [f"* `{command}`" for command in commands]
    for n in sizes:
        at_n = [row for row in rows if row["n"] == n]
        families = [name for name in FAMILIES if any(row["family"] == name for row in at_n)]
        tests = _order({row["test"] for row in at_n})
        areas: dict[tuple[str, str], float] = {}
        for family in families:
            for test in tests:
                curve = sorted(
                    (row["strength"], row["rejection_rate"])
                    for row in at_n
                    if row["family"] == family and row["test"] == test
                )
                if curve:
                    areas[family, test] = area([s for s, _ in curve], [p for _, p in curve])
        replicates = sorted({row["replicates"] for row in at_n})
        permutations = sorted({row["permutations"] for row in at_n})
        peers = [test for test in tests if test not in MITOOL_NAMES]
        lines += [
            "",
            f"## n = {n} (replicates {replicates}, permutations {permutations})",
            "",
            "### Area under the power curve",
            "",
        ]
        header = ["family", *tests, "best peer", f"{MITOOL_DEFAULT} - best peer"]
        body = []
        for family in families:
            line = [family, *(_number(areas.get((family, test), float("nan"))) for test in tests)]
            peer_areas = {test: areas[family, test] for test in peers if (family, test) in areas}
            if peer_areas and (family, MITOOL_DEFAULT) in areas:
                best = max(peer_areas, key=peer_areas.__getitem__)
                line += [best, f"{areas[family, MITOOL_DEFAULT] - peer_areas[best]:+.2f}"]
            else:
                line += ["", ""]
            body.append(line)
        means = []
        for test in tests:
            values = [areas[family, test] for family in families if (family, test) in areas]
            means.append(_number(float(np.mean(values))) if len(values) == len(families) else "")
        body.append(["mean", *means, "", ""])
        lines += _table(header, body)
        band = level_band(max(replicates))
        lines += [
            "",
            f"### Level at s = 0 (the nulls); above {band:.2f} is outside the 99% band of "
            f"a test of size {ALPHA} over {max(replicates)} replicates",
            "",
        ]
        body = []
        for family in families:
            line = [family]
            for test in tests:
                found = [
                    row["rejection_rate"]
                    for row in at_n
                    if row["family"] == family and row["test"] == test and row["strength"] == 0
                ]
                value = found[0] if found else float("nan")
                line.append(_number(value) + (" (!)" if found and value > band else ""))
            body.append(line)
        lines += _table(["family", *tests], body)
        lines += ["", "### Power at each strength", ""]
        body = []
        for family in families:
            strengths = sorted({row["strength"] for row in at_n if row["family"] == family})
            for strength in strengths:
                amplitude = next(
                    row["amplitude"]
                    for row in at_n
                    if row["family"] == family and row["strength"] == strength
                )
                line = [family, f"{strength:g}", f"{amplitude:.3g}" if strength > 0 else "null"]
                for test in tests:
                    found = [
                        row["rejection_rate"]
                        for row in at_n
                        if row["family"] == family and row["test"] == test and row["strength"] == strength
                    ]
                    line.append(_number(found[0]) if found else "")
                body.append(line)
        lines += _table(["family", "s", "a", *tests], body)
        lines += ["", "### CPU seconds per test (mean over all cells)", ""]
        body = [
            [test, f"{np.mean([row['seconds_per_test'] for row in at_n if row['test'] == test]):.3f}"]
            for test in tests
        ]
        lines += _table(["test", "seconds"], body)
        lines += [
            "",
            "(The components `mitool[ksg]` and `mitool[linear]` come from the same call as "
            "`mitool` and carry its seconds.)",
        ]
    return "\n".join(lines) + "\n"


def write_csv(rows: Sequence[dict], path: Path) -> None:
    if not rows:
        return
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def figures(rows: Sequence[dict], out: Path) -> list[Path]:
    """One figure per n: a panel per family, a line per test (mitool's solid, the peers dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for n in sorted({row["n"] for row in rows}):
        at_n = [row for row in rows if row["n"] == n]
        families = [name for name in FAMILIES if any(row["family"] == name for row in at_n)]
        tests = _order({row["test"] for row in at_n})
        columns = min(4, len(families))
        lines_ = math.ceil(len(families) / columns)
        figure, axes = plt.subplots(
            lines_, columns, figsize=(3.6 * columns, 3.0 * lines_), squeeze=False, sharey=True
        )
        colours = plt.get_cmap("tab10")
        for panel, family in zip(axes.flat, families, strict=False):
            for index, test in enumerate(tests):
                curve = sorted(
                    (row["strength"], row["rejection_rate"])
                    for row in at_n
                    if row["family"] == family and row["test"] == test
                )
                if curve:
                    style = "-" if test in MITOOL_NAMES else "--"
                    width = 2.2 if test == MITOOL_DEFAULT else 1.2
                    panel.plot(
                        *zip(*curve, strict=True),
                        style,
                        marker="o",
                        markersize=3,
                        linewidth=width,
                        color=colours(index % 10),
                        label=test,
                    )
            panel.axhline(ALPHA, color="grey", linewidth=0.6, linestyle=":")
            panel.set_title(family, fontsize=9)
            panel.set_xlabel("strength s", fontsize=8)
            panel.set_ylim(-0.02, 1.02)
        for panel in axes.flat[len(families) :]:
            panel.axis("off")
        for panel in axes[:, 0]:
            panel.set_ylabel(f"power at alpha = {ALPHA}", fontsize=8)
        handles, labels = axes.flat[0].get_legend_handles_labels()
        figure.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5), fontsize=8)
        figure.suptitle(f"Power curves, n = {n}", fontsize=10)
        figure.tight_layout(rect=(0, 0.08, 1, 0.96))
        path = out / f"power_n{n}.png"
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)
    return written


def write_outputs(out: Path) -> None:
    records = load(out)
    rows = rows_of(records)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, out / "power.csv")
    (out / "summary.md").write_text(summary_markdown(records))
    written = figures(rows, out) if rows else []
    print(f"wrote {out / 'power.csv'}, {out / 'summary.md'}, " + ", ".join(map(str, written)))


# --- command line ------------------------------------------------------------------------------------


def _names(text: str, known: dict, what: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)} (known: {', '.join(known)})")
    return names


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--n", type=int, nargs="+", default=[100, 400, 2000], help="sample sizes")
    parser.add_argument("--replicates", type=int, default=50, help="data sets per (family, n, strength)")
    parser.add_argument("--permutations", type=int, default=199, help="B of the permutation tests")
    parser.add_argument(
        "--strengths",
        type=float,
        nargs="+",
        default=list(STRENGTHS),
        help="strengths in [0, 1], 0 first (the null)",
    )
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated families")
    parser.add_argument(
        "--tests", default=",".join(DEFAULT_TESTS), help=f"comma-separated tests, of: {', '.join(TESTS)}"
    )
    parser.add_argument(
        "--absolute", action="store_true", help="amplitude A s at every n (no (400 / n) ** r)"
    )
    parser.add_argument("--out", type=Path, default=Path(OUT), help="output folder")
    parser.add_argument("--list", action="store_true", help="list the families and tests, and stop")
    parser.add_argument("--summary-only", action="store_true", help="rewrite the outputs from the raw files")
    args = parser.parse_args(argv)
    args.families = _names(args.families, FAMILIES, "families")
    args.tests = _names(args.tests, TESTS, "tests")
    args.strengths = sorted(args.strengths)
    if any(not 0 <= s <= 1 for s in args.strengths):
        raise SystemExit("--strengths must lie in [0, 1]")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.list:
        for name, family in FAMILIES.items():
            print(f"{name:16s} A = {family.full:<4g} r = {family.rate:<5g} {family.about}")
        for name, test in TESTS.items():
            print(f"{name:16s} {test.about}")
        return 0
    if not args.summary_only:
        tests, notes = available(args.tests)
        for note in notes:
            print(note, file=sys.stderr)
        threads = os.environ.get("MITOOL_THREADS", "unset")
        print(f"tests {tests}; MITOOL_THREADS={threads}", flush=True)
        warm_up(tests)
        for n in args.n:
            for family in args.families:
                run_cell(family, n, args, tests)
            write_outputs(args.out)
    if args.summary_only:
        write_outputs(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
