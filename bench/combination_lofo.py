"""Which statistics the default test combines, and with what weights, chosen on the power curves
with each family left out in turn (issue 58: "a weighted combination that keeps the linear
statistic's power"; the large k measured at n = 2000).

Two steps:

* ``collect``: for every family, n, strength and replicate of bench/power_curves.py (the same
  data sets, drawn from the same seeds, so that the peers' p-values in its raw files are on the
  same replicates), the observed value and B permutation values of the linear statistic and of
  KSG on rank scores at each k of :func:`neighbour_grid` (one joint search for all k), on the
  same permutations. Kept in ``<out>/stats_<family>_n<n>.npz``. A candidate combination is then
  any subset of these columns with weights: its p-value on a replicate is
  ``mitool.independence.min_p_combination(observed[cols], null[:, cols], weights)``, exactly the
  test the library would run with those statistics, with no new permutations.
* ``choose``: each candidate's power curve and area per family (the trapezoid over the strengths,
  as bench/power_curves.py), then for each family left out the candidate with the largest mean
  area on the other families, its area on the left-out one beside the default's and the best
  peer's (peers read from bench/results/power_curves/raw). A family with several coordinates
  (one-of-five) takes only KSG at the default's k and the linear statistic, as the default does.

    python bench/combination_lofo.py collect --n 100 400 --replicates 50 --permutations 199
    python bench/combination_lofo.py collect --n 100 400 --scores uniform \
        --families periodic-f1,periodic-f2,periodic-f4,ring,heteroscedastic,mixture,linear
    python bench/combination_lofo.py collect --n 2000 --replicates 20 --permutations 199
    python bench/combination_lofo.py choose --n 100 400 2000          # -> lofo_n<n>.md
    python bench/combination_lofo.py choose --n 400 --weights 1,2,3   # the linear statistic's weights

The statistics (``stats_*.npz``, about 90 MB) are not kept in git; the areas computed from them
are (``areas_n<n>.json``), and ``choose`` reads those where the statistics are absent. Each
collect took 1.5 to 11 minutes a family on one core (n = 400: about 2; n = 2000: about 3.5).
Set MITOOL_THREADS=1 OMP_NUM_THREADS=1 on a shared machine.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from power_curves import ALPHA, FAMILIES, STRENGTHS, area, data_seed, test_seed  # noqa: E402

OUT = Path("bench/results/combination")
PEERS_RAW = Path("bench/results/power_curves/raw")
PEERS = ("hyppo-dcorr", "hyppo-hsic", "hsic-median", "cmiknn")
DEFAULT_K = 20


def neighbour_grid(n: int, dimensions: int) -> list[int]:
    """The numbers of neighbours measured: 5 to 160 by doublings and n / 5 (CMIknn's) where it is
    at most 160, each below n - 1; with several coordinates only the default's k."""
    if dimensions > 1:
        return [min(DEFAULT_K, n // 10)]
    grid = {5, 10, 20, 40, 80, 160} | ({n // 5} if n // 5 <= 160 else set())
    return sorted(k for k in grid if k < n - 1)


def collect(
    n: int, family: str, replicates: int, permutations: int, out: Path, scores: str = "normal"
) -> None:
    """The statistics of every strength and replicate of (family, n); ``scores`` "uniform": KSG on the
    ranks themselves (CMIknn's copula scores, both sides on one scale) instead of their normal scores."""
    from scipy.stats import rankdata

    from mitool.independence.statistics import _per_k, linear_statistic

    law = FAMILIES[family]
    observed, null, ks = [], [], None
    started = time.perf_counter()
    for strength in STRENGTHS:
        row_observed, row_null = [], []
        for replicate in range(replicates):
            x, y = law.draw(n, strength, np.random.default_rng(data_seed(family, n, strength, replicate)))
            ks = neighbour_grid(n, x.shape[1])
            if scores == "uniform":
                ksg = _per_k(rankdata(x, axis=0), rankdata(y, axis=0), ks, "standard")
            else:
                ksg = _per_k(x, y, ks, "rank")
            linear = linear_statistic(x, y)

            def statistics(order: np.ndarray, ksg=ksg, linear=linear) -> np.ndarray:
                return np.append(ksg(order), linear(order))

            rng = np.random.default_rng([test_seed(family, n, strength, replicate), 0xC0B])
            row_observed.append(statistics(np.arange(n)))
            row_null.append(np.array([statistics(rng.permutation(n)) for _ in range(permutations)]))
        observed.append(row_observed)
        null.append(row_null)
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / f"stats_{family}_n{n}.npz", observed=np.array(observed), null=np.array(null),
                        ks=np.array(ks), strengths=np.array(STRENGTHS))  # fmt: skip
    print(f"{family} n={n}: {time.perf_counter() - started:.0f} s", flush=True)


SCORES = {"N": "", "U": "uniform"}
"""The stored statistics' scores and their folders under ``--out``: N, KSG on the ranks' normal
scores (the default's); U, KSG on the ranks (``collect --scores uniform``)."""


def columns(family: str, n: int, out: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The labels of every stored statistic of (family, n) ("N20": KSG on normal scores at k = 20,
    "U40": on the ranks at k = 40, "L": the linear statistic), their observed values (S, R, J) and
    their permutation values (S, R, B, J), every scores' statistics on the same data sets and the
    same permutations (checked on the linear statistic, which each file holds)."""
    labels, observed, null = [], [], []
    linear: tuple[np.ndarray, np.ndarray] = (np.empty(0), np.empty(0))
    for prefix, folder in SCORES.items():
        path = out / folder / f"stats_{family}_n{n}.npz"
        if not path.exists():
            continue
        stored = np.load(path)
        if observed and not np.allclose(stored["null"][..., -1:], linear[1]):
            raise ValueError(f"{path}: not the permutations of the other scores' file")
        labels += [f"{prefix}{int(k)}" for k in stored["ks"]]
        observed.append(stored["observed"][..., :-1])
        null.append(stored["null"][..., :-1])
        linear = (stored["observed"][..., -1:], stored["null"][..., -1:])
    return labels + ["L"], np.concatenate([*observed, linear[0]], -1), np.concatenate([*null, linear[1]], -1)


def candidates(labels: list[str], weights: tuple[float, ...]) -> dict[str, tuple[list[str], list[float]]]:
    """name -> (the labels of its statistics, their weights): KSG at one, two or three of the stored
    (scores, k), the linear statistic beside at each weight of ``weights`` (or absent); the linear
    statistic alone."""
    chosen: dict[str, tuple[list[str], list[float]]] = {"L": (["L"], [1.0])}
    knn = [label for label in labels if label != "L"]
    for size in (1, 2, 3):
        for subset in itertools.combinations(knn, size):
            name = "+".join(subset)
            chosen[name] = (list(subset), [1.0] * size)
            for weight in weights:
                chosen[f"{name}+L" + (f"x{weight:g}" if weight != 1 else "")] = (
                    [*subset, "L"],
                    [1.0] * size + [weight],
                )
    return chosen


def default_name(n: int, dimensions: int) -> str:
    """The name in :func:`candidates` of today's default test: KSG on normal scores at 5, the
    default's k (20, at most n / 10) and min(n / 5, 80), and the linear statistic (with several
    coordinates, the default's k and the linear statistic)."""
    own = min(DEFAULT_K, n // 10)
    if dimensions > 1:
        return f"N{own}+L"
    return "+".join(f"N{k}" for k in sorted({5, own, min(n // 5, 80)})) + "+L"


def powers(family: str, n: int, out: Path, weights: tuple[float, ...]) -> tuple[dict[str, list[float]], int]:
    """Each candidate's rejection rate at every strength, and the dimensions of X (1 or more)."""
    from mitool.independence import min_p_combination

    labels, observed, null = columns(family, n, out)
    dimensions = 1 if len(labels) > 2 else 5
    rates: dict[str, list[float]] = {}
    for name, (parts, weight) in candidates(labels, weights).items():
        picked = [labels.index(label) for label in parts]
        rates[name] = [
            float(
                np.mean(
                    [
                        min_p_combination(observed[s, r, picked], null[s, r][:, picked], weight)[0] <= ALPHA
                        for r in range(observed.shape[1])
                    ]
                )
            )  # fmt: skip
            for s in range(observed.shape[0])
        ]
    return rates, dimensions


def peer_areas(family: str, n: int) -> dict[str, float]:
    path = PEERS_RAW / f"{family}_n{n}.json"
    if not path.exists():
        return {}
    record = json.loads(path.read_text())
    found = {}
    for name in PEERS:
        if name in record["tests"]:
            rates = [float(np.mean(np.asarray(row) <= ALPHA)) for row in record["tests"][name]["pvalues"]]
            found[name] = area(record["strengths"], rates)
    return found


def area_table(
    n: int, out: Path, weights: tuple[float, ...]
) -> tuple[dict[str, dict[str, float]], dict[str, str], dict[str, dict[str, float]]]:
    """Each family's area per candidate, its default's name, and the peers' areas (kept in
    ``<out>/areas_n<n>.json`` beside the statistics it was computed from)."""
    cache = out / f"areas_n{n}.json"
    files = sorted(path for folder in SCORES.values() for path in (out / folder).glob(f"stats_*_n{n}.npz"))
    stamps = {str(path): path.stat().st_mtime for path in files}
    key = {"stamps": stamps, "weights": list(weights)}
    kept_key = (
        {k: v for k, v in json.loads(cache.read_text()).items() if k in key} if cache.exists() else None
    )
    if cache.exists() and (kept_key == key or not stamps):  # no statistics here (not kept in git): the cache
        kept = json.loads(cache.read_text())
        return kept["table"], kept["defaults"], kept["peers"]
    table, defaults, peers = {}, {}, {}
    for family in FAMILIES:
        if not (out / f"stats_{family}_n{n}.npz").exists():
            continue
        rates, dimensions = powers(family, n, out, weights)
        table[family] = {name: area(STRENGTHS, rate) for name, rate in rates.items()}
        defaults[family] = default_name(n, dimensions)
        peers[family] = peer_areas(family, n)
    cache.write_text(json.dumps({**key, "table": table, "defaults": defaults, "peers": peers}))
    return table, defaults, peers


CRITERIA = {
    "mean area": lambda areas, peers: float(np.mean(areas)),
    "worst gap to the best peer": lambda areas, peers: float(np.min(np.asarray(areas) - np.asarray(peers))),
}
"""How a candidate is judged on the families it is chosen on: its mean area, or its smallest
difference of area to the best peer of each family (the issue's "not below any peer on any family")."""


def choose(n: int, out: Path, weights: tuple[float, ...]) -> str:
    table, defaults, peers = area_table(n, out, weights)
    several = {family for family in table if len(table[family]) < 10}  # one stored k: several coordinates
    one_a_side = [family for family in table if family not in several]
    names = [name for name in table[one_a_side[0]] if all(name in table[family] for family in one_a_side)]
    own_k = min(DEFAULT_K, n // 10)

    def area_of(family: str, name: str) -> float:
        """A family with several coordinates: KSG at the default's k, with the linear part of the name."""
        if family in one_a_side or name == "L":
            return table[family][name]
        linear = name[name.index("+L") :] if "+L" in name else ""
        return table[family][f"N{own_k}{linear}"]

    def best_peer(family: str) -> tuple[str, float]:
        name = max(peers[family], key=peers[family].get) if peers[family] else "-"
        return name, peers[family].get(name, float("nan"))

    lines = [f"n = {n}: {len(names)} candidates; areas under the power curves (strengths 0 to 1)"]
    for criterion, judge in CRITERIA.items():
        lines += ["", f"Chosen by {criterion} on the other families:", "",
                  "| left out | chosen on the others | its area | default's area | best peer | peer's area |",
                  "| --- | --- | ---: | ---: | --- | ---: |"]  # fmt: skip
        chosen_areas, default_areas = [], []
        for family in table:
            others = [other for other in table if other != family]
            best = max(names, key=lambda name: judge([area_of(o, name) for o in others],
                                                     [best_peer(o)[1] for o in others]))  # fmt: skip
            peer, peer_area = best_peer(family)
            chosen_areas.append(area_of(family, best))
            default_areas.append(table[family][defaults[family]])
            lines.append(f"| {family} | {best} | {chosen_areas[-1]:.3f} | {default_areas[-1]:.3f} | {peer} | "
                         f"{peer_area:.3f} |")  # fmt: skip
        lines.append(f"| mean | | {np.mean(chosen_areas):.3f} | {np.mean(default_areas):.3f} | | |")
        scored = sorted(names, key=lambda name: -judge([area_of(f, name) for f in table],
                                                       [best_peer(f)[1] for f in table]))[:6]  # fmt: skip
        lines += ["", f"In sample, all families, by {criterion}:", ""]
        for name in scored:
            lines.append(
                f"- {name}: {judge([area_of(f, name) for f in table], [best_peer(f)[1] for f in table]):+.3f}"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["collect", "choose"])
    parser.add_argument("--n", type=int, nargs="+", default=[400])
    parser.add_argument("--replicates", type=int, default=50)
    parser.add_argument("--permutations", type=int, default=199)
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--scores",
        choices=["normal", "uniform"],
        default="normal",
        help="collect: KSG on the ranks' normal scores (the default's) or on the ranks",
    )
    parser.add_argument(
        "--weights",
        default="1",
        help="choose: the linear statistic's weights tried, comma-separated (1,2,3 measured)",
    )
    arguments = parser.parse_args()
    for n in arguments.n:
        if arguments.step == "collect":
            for family in arguments.families.split(","):
                folder = arguments.out / SCORES["U" if arguments.scores == "uniform" else "N"]
                collect(n, family, arguments.replicates, arguments.permutations, folder, arguments.scores)
        else:
            text = choose(n, arguments.out, tuple(float(w) for w in arguments.weights.split(",")))
            print(text)
            (arguments.out / f"lofo_n{n}.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
