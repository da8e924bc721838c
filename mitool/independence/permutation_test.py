"""The test: :func:`independence_test`, the data prepared as :func:`mitool.estimate` prepares them,
the statistic chosen, the null drawn, the p-value and its words.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from mitool import checks, estimators
from mitool.estimation import Prepared, prepare
from mitool.estimators.base import ArrayLike
from mitool.independence.conditional import (
    REGRESSION_MODELS,
    Z_METHODS,
    diagnosed,
    gcm_statistic,
    regress_on_z,
)
from mitool.independence.permutations import (
    Z_NEIGHBOURS,
    completed_permutation,
    local_permutation,
    neighbours_in_z,
)
from mitool.independence.pvalues import min_p_combination, permutation_pvalue
from mitool.independence.results import Component, IndependenceTest, NullSummary
from mitool.independence.statistics import (
    POINT_STATISTICS,
    TEST_DEFAULTS,
    Statistic,
    conditional_statistic,
    ksg_statistic,
    ksg_statistics,
    linear_statistic,
    other_neighbours,
    unconditional_statistic,
)
from mitool.independence.tails import (
    TAIL_EXCEEDANCES,
    TAIL_MINIMUM,
    TAIL_REACHED,
    TailFit,
    bonferroni_tails,
    chosen_tail_pvalue,
    fit_tail,
)
from mitool.runtime import chosen_threads, threads_mapping

DEFAULT_PERMUTATIONS = 999
"""Permutations when none are asked for: the smallest p is then 1 / 1000, and the p-value's Monte
Carlo standard error sqrt(p (1 - p) / B) is 0.007 at p = 0.05."""


PERMUTATION_BLOCK = 8
"""Permutations drawn at a time per thread: the threads' work between two reports of progress."""

_PERMUTATION_STREAM = 0x1D7E
"""Keeps the permutations' random stream apart from the preparation's and the estimators'."""


def permutation_count(permutations: int | None, estimator: str | None) -> tuple[int, list[str]]:
    """B and a note when it is the default; a trained estimator needs B said."""
    if estimator is not None:
        estimators.estimator_class(estimator)  # an unknown name: the error naming the choices
        if estimator not in POINT_STATISTICS and permutations is None:
            raise checks.ParameterError(
                "permutations", f"must be given to test with {estimator}, which trains a network for each "
                f"permutation ({DEFAULT_PERMUTATIONS} trainings by default); pass a number knowingly "
                "(say 99), or leave the estimator unset for a k-NN statistic",
            )  # fmt: skip
    if permutations is None:
        return DEFAULT_PERMUTATIONS, [f"{DEFAULT_PERMUTATIONS} permutations (the default)"]
    return checks.whole_number("permutations", permutations, 1), []


def check_size(estimator: estimators.Estimator, prepared: Prepared) -> None:
    dims = [part.shape[1] for part in (prepared.x, prepared.y, prepared.z) if part is not None]
    needed = estimator.minimum_pairs(*dims)
    if len(prepared.x) < needed:
        raise checks.TooFewSamples(
            "x",
            f"has too few samples ({len(prepared.x)}; the test with {estimator.name} needs at least "
            f"{needed})",
        )


Progress = Callable[[int, int], None]
"""``progress(done, total)``: permutations done of the total, after each block of them."""


@dataclass(frozen=True)
class Draws:
    """How a test draws its null: ``count`` permutations from ``rng``, reported to ``progress``;
    ``parallel``: the statistics may run in threads (they compute on the rows and train nothing)."""

    count: int
    rng: np.random.Generator
    progress: Progress | None = None
    parallel: bool = True

    def run(
        self, statistics: Sequence[Statistic], draw: Callable[[], np.ndarray], n: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The observed statistics (J,) and ``count`` rows of null values (count, J), every
        statistic on the same fresh draw in each row. The draws are made in order in this thread
        (the same numbers whatever the threads), a block at a time; the statistics of a block run
        in threads where ``parallel`` (one thread's mapping is a plain loop)."""
        observed = np.array([statistic(np.arange(n)) for statistic in statistics])
        null = np.empty((self.count, len(statistics)))
        threads = chosen_threads() if self.parallel else 1
        block = PERMUTATION_BLOCK * threads

        def row(order: np.ndarray) -> list[float]:
            return [statistic(order) for statistic in statistics]

        with threads_mapping(threads) as mapping:
            for start in range(0, self.count, block):
                orders = [draw() for _ in range(min(block, self.count - start))]
                null[start : start + len(orders)] = mapping(row, orders)
                if self.progress is not None:
                    self.progress(start + len(orders), self.count)
        return observed, null


def plus_one(count: int) -> str:
    return (f"p = (1 + #{{null >= observed}}) / (1 + {count}), the +1 of Phipson & Smyth (2010): never 0, at "
            f"least 1/{count + 1}")  # fmt: skip


@dataclass(frozen=True)
class _Companion:
    """A statistic beside the k-NN one (the linear statistic, KSG at another k): its name, its
    value on the data and on each permutation, and its description."""

    name: str
    observed: float
    null: np.ndarray
    described: str


@dataclass(frozen=True)
class _Outcome:
    """A test's numbers and words, before they become an :class:`IndependenceTest`."""

    observed: float
    null: np.ndarray
    method: str
    scheme: str
    estimator: str
    notes: tuple[str, ...] = ()
    companions: tuple[_Companion, ...] = ()
    pvalue: float | None = None
    """A p-value that is not the permutation p-value of ``observed`` (the GCM's chi-square)."""
    z_method: str = "none"
    warnings: tuple[str, ...] = ()
    diagnostic: dict[str, float] = field(default_factory=dict)


LINEAR_COMPANIONS = ("ksg", "ross", "frenzel-pompe")
"""The k-NN statistics that :func:`linear_statistic` can go beside: by default KSG and Ross (the
unconditional tests); Frenzel & Pompe's given a continuous Z only when asked (``linear=True``):
under Runge's local permutation the partial correlation is not exactly calibrated, and the
combination rejected 2 of 100 nulls at 0.05 with a 3-D Z (bench/independence.py's cond-3d-z),
where Frenzel & Pompe's alone (k = 20) rejected 6.0% of 200."""


_Named = tuple[str, Statistic, str]
"""A statistic beside the test's own: its name, the statistic, its description."""


def _linear_companion(prepared: Prepared, linear: bool) -> list[_Named]:
    """[(name, the linear statistic, its description)] where the test combines it, else []."""
    if not linear or prepared.estimator.name not in LINEAR_COMPANIONS:
        return []
    sides = prepared.sides or {}
    conditional = prepared.z is not None  # a discrete side given Z was dequantised: its ranks
    discrete = {name: bool(sides.get(name)) and not conditional for name in ("x", "y")}
    statistic = linear_statistic(
        prepared.x, prepared.y, prepared.z, x_discrete=discrete["x"], y_discrete=discrete["y"]
    )
    kinds = ["category indicators" if discrete[name] else "rank normal scores" for name in ("x", "y")]
    given = " less their least-squares fit on Z's rank normal scores" if conditional else ""
    described = (f"the linear statistic -1/2 sum log(1 - rho^2) over the canonical correlations of X's "
                 f"{kinds[0]} and Y's {kinds[1]}{given}")  # fmt: skip
    return [("linear", statistic, described)]


def _other_scales(prepared: Prepared, default: bool) -> tuple[Statistic | None, list[_Named]]:
    """KSG at the other numbers of neighbours of :func:`other_neighbours`, for the ``default``
    unconditional statistic (no estimator named: KSG on rank scores, the linear statistic beside) of
    one coordinate a side, else []; with them, the default's own KSG from the same neighbour search
    (the same value as :func:`ksg_statistic`'s), else None."""
    chosen = prepared.estimator
    if not default or prepared.z is not None or chosen.name != "ksg" or chosen.settings.normalise != "rank":
        return None, []
    ks = other_neighbours(len(prepared.x), chosen.settings.k)
    one_a_side = prepared.x.shape[1] == prepared.y.shape[1] == 1  # one-of-five preferred one k; 6-D cost 7x
    if not ks or not one_a_side or chosen.settings.k_max > chosen.settings.k:
        return None, []
    statistics = ksg_statistics(prepared.x, prepared.y, (chosen.settings.k, *ks))
    companions = [(f"ksg k={k}", (lambda order, column=column: statistics(order)[column]), f"KSG at k = {k}")
                  for column, k in enumerate(ks, start=1)]  # fmt: skip
    return (lambda order: statistics(order)[0]), companions


def _outcome(observed: np.ndarray, null: np.ndarray, companions: list[_Named],
             **fields: Any) -> _Outcome:  # fmt: skip
    """The outcome of a run of the k-NN statistic (column 0) and its companions (the columns after)."""
    beside = tuple(_Companion(name, float(observed[column]), null[:, column], described)
                   for column, (name, _, described) in enumerate(companions, start=1))  # fmt: skip
    return _Outcome(float(observed[0]), null[:, 0], companions=beside, **fields)


def _combined_sentence(companions: tuple[_Companion, ...]) -> str:
    if not companions:
        return ""
    described = "; ".join(companion.described for companion in companions)
    return (f" Beside it, on the same permutations: {described}; p is the min-p combination of all "
            f"{len(companions) + 1} (min_p_combination: each statistic's permutation p-value, then the rank "
            "of the smallest among the permutations': valid as each alone, about as powerful as the best "
            "of them).")  # fmt: skip


def _unconditional(prepared: Prepared, draws: Draws, seed: int, linear: bool, scales: bool) -> _Outcome:
    check_size(prepared.estimator, prepared)
    statistic, described = unconditional_statistic(prepared.estimator, prepared.x, prepared.y, seed)
    shared, scales_beside = _other_scales(prepared, scales)
    statistic = shared or statistic
    companions = _linear_companion(prepared, linear) + scales_beside
    n, count = len(prepared.x), draws.count
    observed, null = draws.run(
        [statistic, *(each[1] for each in companions)], lambda: draws.rng.permutation(n), n
    )
    method = (f"Permutation test of independence: the statistic {described}, recomputed on {count} random "
              f"permutations of Y's rows; {plus_one(count)}.")  # fmt: skip
    return _outcome(observed, null, companions, method=method, scheme="permutations of Y",
                    estimator=prepared.estimator.name)  # fmt: skip


def _local(prepared: Prepared, draws: Draws, seed: int, z_neighbours: int, linear: bool) -> _Outcome:
    check_size(prepared.estimator, prepared)
    n, count = len(prepared.x), draws.count
    checks.whole_number("z_neighbours", z_neighbours, 2, n)
    statistic, described = conditional_statistic(prepared.estimator, prepared.x, prepared.y, prepared.z, seed)
    candidates = neighbours_in_z(prepared.z, z_neighbours)
    repeats: list[int] = []

    def draw() -> np.ndarray:
        drawn = local_permutation(candidates, draws.rng)
        repeats.append(n - len(np.unique(drawn)))
        return drawn

    companions = _linear_companion(prepared, linear)
    observed, null = draws.run([statistic, *(each[1] for each in companions)], draw, n)
    method = (f"Conditional permutation test (Runge 2018's local permutation): in each of {count} draws, "
              f"every row takes the X of one of its {z_neighbours} nearest rows in Z (max-norm on Z's rank "
              f"scores, itself included), without repeats where possible; the statistic {described}; "
              f"{plus_one(count)}.")  # fmt: skip
    notes = (f"local permutation: {np.mean(repeats) / n:.1%} of the rows took an X another row took too (all "
             f"{z_neighbours} candidates taken), on average over the draws",)  # fmt: skip
    fit_x, fit_y = regress_on_z(prepared.x, prepared.z), regress_on_z(prepared.y, prepared.z)
    diagnostic, warned = diagnosed(fit_x, fit_y, candidates, "local")
    return _outcome(observed, null, companions, method=method, scheme="local permutations of X within Z",
                    estimator=prepared.estimator.name, notes=notes, z_method="local", warnings=warned,
                    diagnostic=diagnostic)  # fmt: skip


def _residual(prepared: Prepared, draws: Draws, z_neighbours: int) -> _Outcome:
    """The residual scheme: X and Y less their regressions on Z, X's residuals drawn by Runge's
    local permutation within Z-neighbourhoods (made a permutation, :func:`completed_permutation`),
    KSG and the linear statistic on the residuals, combined by min-p."""
    from mitool.estimators.preparation import normal_scores

    check_size(prepared.estimator, prepared)
    n = len(prepared.x)
    checks.whole_number("z_neighbours", z_neighbours, 2, n)
    k = prepared.estimator.settings.k
    fit_x, fit_y = regress_on_z(prepared.x, prepared.z), regress_on_z(prepared.y, prepared.z)
    candidates = neighbours_in_z(prepared.z, z_neighbours)
    statistic = ksg_statistic(fit_y.residual, fit_x.residual, k)  # X's residual row order[i] with row i
    linear = linear_statistic(fit_y.residual, fit_x.residual)
    scores = normal_scores(prepared.z)[0]
    rng, count = draws.rng, draws.count
    draw = lambda: completed_permutation(local_permutation(candidates, rng), scores, rng)  # noqa: E731
    observed, null = draws.run([statistic, linear], draw, n)
    diagnostic, warned = diagnosed(fit_x, fit_y, candidates, "residual")
    combined, own = min_p_combination(observed, null)
    diagnostic.update(ksg_pvalue=float(own[0]), linear_pvalue=float(own[1]), combined_pvalue=float(combined))
    chosen = zip(fit_x.models + fit_y.models, fit_x.scales + fit_y.scales, fit_x.z_scales + fit_y.z_scales,
                 strict=True)  # fmt: skip
    fitted = ", ".join(f"{model} of the {scale} on Z's {given}" for model, scale, given in chosen)
    described = ("the linear statistic -1/2 sum log(1 - rho^2) over the canonical correlations of the "
                 "residuals' rank normal scores")  # fmt: skip
    method = (f"Conditional permutation test of residuals: X and Y less their regressions on Z "
              f"(each column's model and scales chosen by leave-one-out error among "
              f"{', '.join(REGRESSION_MODELS)}, of the values or their rank normal scores, on Z's values "
              f"or rank normal scores: {fitted}; "
              f"leave-one-out predictions), then in each of {count} draws every row takes the X-residual of "
              f"one of its {z_neighbours} nearest rows in Z (Runge 2018's local permutation; the rows that "
              "took an X another row took then take the nearest X in Z no row took); the statistic KSG "
              f"(k = {k}, max-norm) on the rank normal scores of the residuals; "
              f"{plus_one(count)}.")  # fmt: skip
    unexplained = ", ".join(f"{value:.2f}" for value in (*fit_x.unexplained, *fit_y.unexplained))
    notes = (f"regressions on Z: leave-one-out unexplained variance {unexplained} (X's columns, then Y's)",)
    fields = {"method": method, "scheme": "local permutations of X's residuals within Z",
              "estimator": "ksg", "notes": notes, "z_method": "residual", "warnings": warned,
              "diagnostic": diagnostic}  # fmt: skip
    return _outcome(observed, null, [("linear", linear, described)], **fields)


def _gcm(prepared: Prepared, z_neighbours: int) -> _Outcome:
    """Shah & Peters' generalised covariance measure of the residuals of the regressions on Z."""
    check_size(prepared.estimator, prepared)
    fit_x, fit_y = regress_on_z(prepared.x, prepared.z), regress_on_z(prepared.y, prepared.z)
    statistic, pvalue, degrees = gcm_statistic(fit_x.residual, fit_y.residual)
    method = (f"Generalised covariance measure (Shah & Peters 2020): X and Y less their regressions on Z "
              f"(models chosen by leave-one-out error among {', '.join(REGRESSION_MODELS)}), "
              "T = n Rbar' Sigma^-1 Rbar over the products R of the residuals, p from the chi-square law "
              f"with {degrees} degree(s) of freedom; valid as n grows when both regressions converge, blind "
              "to a dependence without a conditional covariance.")  # fmt: skip
    candidates = neighbours_in_z(prepared.z, min(z_neighbours, len(prepared.x)))
    diagnostic, warned = diagnosed(fit_x, fit_y, candidates, "gcm")
    return _Outcome(statistic, np.zeros(0), method, f"chi-square with {degrees} degree(s) of freedom", "gcm",
                    pvalue=pvalue, z_method="gcm", warnings=warned, diagnostic=diagnostic)  # fmt: skip


def _chosen_z_method(z_method: str, estimator: str | None, linear: bool | None) -> str:
    """The scheme for a continuous Z: "auto" is "residual" unless an estimator is named."""
    checks.choice("z_method", z_method, Z_METHODS)
    if z_method == "auto":
        return "local" if estimator is not None or linear else "residual"
    if z_method != "local" and estimator is not None:
        raise checks.ParameterError(
            "estimator", f"cannot be named with z_method={z_method!r}, whose statistic is its own (KSG on "
            "the residuals, or the GCM); use z_method='local' to test with a named statistic",
        )  # fmt: skip
    if z_method != "local" and linear:
        raise checks.ParameterError(
            "linear", f"cannot be True with z_method={z_method!r}: the partial correlation beside a "
            "statistic is made with z_method='local' only",
        )  # fmt: skip
    return z_method


def _within_groups(prepared: Prepared, draws: Draws, options: dict[str, Any], seed: int) -> _Outcome:
    """A discrete Z: the statistic within each group of Z, weighted by the groups' shares, and the
    permutations within the groups (as :func:`mitool.estimate` computes I(X; Y | Z))."""
    from mitool.estimators.rows import category_codes

    groups = category_codes(prepared.z)
    discrete = ",".join(name for name in ("x", "y") if prepared.sides[name]) or "none"
    parts: list[tuple[float, Statistic, int]] = []
    skipped, names, described = [], set(), ""
    for group in range(int(groups.max()) + 1):
        rows = np.flatnonzero(groups == group)
        share = len(rows) / len(groups)
        part = prepare(
            prepared.x[rows], prepared.y[rows], discrete=discrete, defaults=TEST_DEFAULTS, **options
        )
        if part.exact is not None:  # a side constant within the group: I = 0 there, whatever the order
            parts.append((share, lambda order: 0.0, len(rows)))
            continue
        dims = (part.x.shape[1], part.y.shape[1])
        if len(rows) < part.estimator.minimum_pairs(*dims):
            skipped.append(len(rows))
            continue
        statistic, described = unconditional_statistic(part.estimator, part.x, part.y, seed)
        parts.append((share, statistic, len(rows)))
        names.add(part.estimator.name)
    if not parts:
        raise checks.ParameterError("z", "has no group of Z with enough pairs for the estimator within it")
    weight = sum(share for share, _, _ in parts)

    offsets = np.cumsum([0, *(size for _, _, size in parts)])

    def combined(order: np.ndarray) -> float:
        """``order``: the rows laid out group after group, each group's permuted among its own."""
        pieces = zip(parts, offsets[:-1], offsets[1:], strict=True)
        return sum(share * statistic(order[a:b] - a) for (share, statistic, _), a, b in pieces) / weight

    def draw() -> np.ndarray:
        bounds = zip(offsets[:-1], offsets[1:], strict=True)
        return np.concatenate([a + draws.rng.permutation(b - a) for a, b in bounds])

    count = draws.count
    observed, null = (values[..., 0] for values in draws.run([combined], draw, int(offsets[-1])))
    notes = [
        f"z discrete: X permuted within each of its {len(parts)} groups, the statistic weighted by their "
        "shares"
    ]
    if skipped:
        notes.append(
            f"{len(skipped)} group(s) of Z with too few pairs ({', '.join(map(str, skipped))}) left out"
        )
    name = "/".join(sorted(names)) or "none"
    method = (f"Conditional permutation test for a discrete Z: X permuted within each group of Z ({count} "
              f"permutations), which keeps X's law given Z exactly; the statistic the MI within each group "
              f"({described or name}) weighted by the groups' shares; {plus_one(count)}.")  # fmt: skip
    return _Outcome(observed, null, method, f"permutations of X within the {len(parts)} groups of Z", name,
                    tuple(notes))  # fmt: skip


def _untied(prepared: Prepared, seed: int) -> Prepared:
    """For the k-NN statistic given a continuous Z: a discrete X or Y dequantised (random
    tie-breaking within its values, :func:`mitool.ties.dequantise`). It is recovered from the
    result, so I(X; Y | Z) and the null hypothesis are unchanged, and the statistic's distances are
    no longer 0."""
    if prepared.estimator.name != "frenzel-pompe" or not (prepared.sides["x"] or prepared.sides["y"]):
        return prepared
    from mitool.ties import treat_ties

    rng = np.random.default_rng([seed, _PERMUTATION_STREAM, 0x71E5])
    rows, notes = {"x": prepared.x, "y": prepared.y}, list(prepared.notes)
    for name in ("x", "y"):
        if prepared.sides[name]:
            rows[name] = treat_ties(name, rows[name], "dequantise", rng).rows
            notes.append(f"{name} is discrete: dequantised for the k-NN statistic (ties broken at random "
                         "within its values; the MI and the hypothesis unchanged)")  # fmt: skip
    return replace(prepared, x=rows["x"], y=rows["y"], notes=tuple(notes))


def _tail_sentence(used: str, fitted: TailFit | None) -> str:
    """What ``tail="gpd"`` did, in a sentence for the method."""
    if fitted is not None:
        return (f"Fewer than {TAIL_REACHED} null values reach the statistic, so p is the "
                f"{fitted.describe()}: p = (N_exc / B) (1 - F(observed - threshold)) (Knijnenburg et al. "
                "2009; see tail_pvalue).")  # fmt: skip
    if used == "permutation-no-fit":
        return (f"Fewer than {TAIL_REACHED} null values reach the statistic, but no generalized Pareto "
                f"tail fitted the null (from {TAIL_EXCEEDANCES} down to {TAIL_MINIMUM} exceedances, at "
                "most a quarter of the null): p is the permutation p-value, not extrapolated.")  # fmt: skip
    return f"At least {TAIL_REACHED} null values reach the statistic: p is the permutation p-value."


def _combined_tail(pvalue: float, components: tuple[Component, ...], count: int) -> tuple[float, str]:
    """``tail="gpd"`` for a combined test: where fewer than :data:`TAIL_REACHED` null rows reach
    the data in the min-p order, :func:`bonferroni_tails` of the statistics' tails; else the min-p
    p-value. Returns p and what was done (:data:`TAIL_METHODS`)."""
    if round(pvalue * (count + 1)) - 1 >= TAIL_REACHED:
        return pvalue, "permutation"
    null_rows = np.column_stack([part.null_values for part in components])
    fits = [fit_tail(null_rows[:, column], exceedances=TAIL_EXCEEDANCES) for column in range(len(components))]
    if all(fitted is None for fitted in fits):
        return pvalue, "permutation-no-fit"
    tailed, used_tail = bonferroni_tails([part.statistic for part in components], null_rows, fits)
    return tailed, "gpd" if used_tail else "permutation"


def _combined_tail_sentence(used: str) -> str:
    """What ``tail="gpd"`` did to a combined test, in a sentence for the method."""
    if used == "gpd":
        return (f"Fewer than {TAIL_REACHED} permutations reach the data in the min-p order, so p is the "
                "number of statistics times the smallest of their p-values from generalized Pareto tails "
                "fitted to their nulls (each its permutation p-value where 10 or more of its null values "
                "reach it; Bonferroni; bonferroni_tails).")  # fmt: skip
    if used == "permutation-no-fit":
        return (
            f"Fewer than {TAIL_REACHED} permutations reach the data, but no generalized Pareto tail "
            "fitted either statistic's null: p is the min-p permutation p-value, not extrapolated."
        )
    return f"At least {TAIL_REACHED} permutations reach the data: p is the min-p permutation p-value."


def _exact_outcome(prepared: Prepared, count: int, conditional: bool) -> _Outcome:
    """A constant side: the statistic is 0 on the data and on every permutation, so p = 1."""
    side = "X" if any("x is constant" in note for note in prepared.exact.notes) else "Y"
    method = (f"No test was needed: {side} is constant, so I = 0 on the data and on every permutation of it, "
              "and p = 1.")  # fmt: skip
    return _Outcome(
        0.0, np.zeros(0), method, f"{side} is constant", "none", ("a constant side: p = 1, exactly",)
    )


def _check_finite(outcome: _Outcome, prepared: Prepared) -> None:
    """A ParameterError where the statistic is not a finite number on the data or on a permutation:
    a NaN ranks against the null as no number does, so its p-value would mean nothing."""
    values = [outcome.observed, *outcome.null]
    for companion in outcome.companions:
        values += [companion.observed, *companion.null]
    if not np.isfinite(values).all():
        where = "on the data" if not np.isfinite(outcome.observed) else "on some permutations"
        raise checks.ParameterError(
            "estimator", f"{outcome.estimator} gives a statistic that is not a finite number {where} "
            f"({len(prepared.x)} pairs), so no p-value can be computed; use the default statistic (k-NN on "
            "ranks, which no scale or outlier can break) or look for extreme values in the data",
        )  # fmt: skip


def run_test(
    x: ArrayLike, y: ArrayLike, z: ArrayLike | None = None, *, estimator: str | None = None,
    permutations: int | None = None, seed: int = 0, ties: str = "auto", discrete: str = "auto",
    z_neighbours: int = Z_NEIGHBOURS, settings: dict[str, Any] | None = None, stream: tuple[int, ...] = (),
    tail: str = "none", linear: bool | None = None, z_method: str = "auto", progress: Progress | None = None,
) -> tuple[IndependenceTest, Prepared]:  # fmt: skip
    """The test and the prepared data; ``stream`` sets the permutations apart (one per column of
    :func:`feature_mi`); ``linear`` None: the linear companion with the default statistic only."""
    start = time.perf_counter()
    count, notes = permutation_count(permutations, estimator)
    combine = (estimator is None and z is None) if linear is None else bool(linear)
    options = {"estimator": estimator, "ties": ties, "seed": seed, **(settings or {})}
    prepared = prepare(x, y, z, discrete=discrete, defaults=TEST_DEFAULTS, **options)
    rng = np.random.default_rng([seed, _PERMUTATION_STREAM, *stream])
    conditional = z is not None
    draws = Draws(count, rng, progress, parallel=estimator is None or estimator in POINT_STATISTICS)
    if prepared.exact is not None:
        outcome = _exact_outcome(prepared, count, conditional)
    elif prepared.z_discrete:
        outcome = _within_groups(prepared, draws, options, seed)
    elif prepared.z is not None:
        prepared = _untied(prepared, seed)
        scheme = _chosen_z_method(z_method, estimator, linear)
        if scheme == "residual":
            outcome = _residual(prepared, draws, z_neighbours)
        elif scheme == "gcm":
            outcome = _gcm(prepared, z_neighbours)
        else:
            outcome = _local(prepared, draws, seed, z_neighbours, combine)
    else:
        outcome = _unconditional(prepared, draws, seed, combine, scales=estimator is None and linear is None)
    exact = prepared.exact is not None
    _check_finite(outcome, prepared)
    pvalue = 1.0 if exact else permutation_pvalue(outcome.observed, outcome.null)
    if outcome.pvalue is not None:
        pvalue, count = outcome.pvalue, 0
    method, used, components = outcome.method + _combined_sentence(outcome.companions), "none", ()
    method += (
        " The statistic is chosen for the test's power (more neighbours average over wider cells), "
        "not as the best estimate of the MI, which mitool.estimate gives (it may differ)."
    )
    if outcome.companions:
        beside = outcome.companions
        pvalue, own = min_p_combination(
            np.array([outcome.observed, *(each.observed for each in beside)]),
            np.column_stack([outcome.null, *(each.null for each in beside)]),
        )  # fmt: skip
        components = (Component(outcome.estimator, outcome.observed, float(own[0]), outcome.null),
                      *(Component(each.name, each.observed, float(p), each.null)
                        for each, p in zip(beside, own[1:], strict=True)))  # fmt: skip
    if outcome.pvalue is not None:
        used = "chi-square"
    elif tail == "gpd" and not exact and not outcome.companions:
        pvalue, used, fitted = chosen_tail_pvalue(outcome.observed, outcome.null, TAIL_EXCEEDANCES)
        method += " " + _tail_sentence(used, fitted)
    elif tail == "gpd" and not exact:
        pvalue, used = _combined_tail(pvalue, components, count)
        method += " " + _combined_tail_sentence(used)
    result = IndependenceTest(
        statistic=float(outcome.observed), pvalue=pvalue,
        permutations=0 if exact else count, null=NullSummary.of(outcome.null), method=method,
        notes=(*prepared.notes, *notes, *outcome.notes), estimator=outcome.estimator, conditional=conditional,
        n_pairs=len(prepared.x), seconds=time.perf_counter() - start, scheme=outcome.scheme,
        null_values=outcome.null, tail=used, components=components, z_method=outcome.z_method,
        warnings=outcome.warnings, diagnostic=outcome.diagnostic,
    )  # fmt: skip
    return result, prepared


def independence_test(
    x: ArrayLike,
    y: ArrayLike,
    z: ArrayLike | None = None,
    *,
    estimator: str | None = None,
    permutations: int | None = None,
    seed: int = 0,
    ties: str = "auto",
    discrete: str = "auto",
    z_neighbours: int = Z_NEIGHBOURS,
    tail: str = "none",
    linear: bool | None = None,
    missing: str = "drop",
    z_method: str = "auto",
    progress: Progress | None = None,
    **settings: Any,
) -> IndependenceTest:
    """A permutation test of H0: X and Y are independent (with ``z``: independent given Z), with
    the MI estimate as the statistic (see the module for the mathematics).

    p = (1 + #{b : T_b >= T}) / (1 + B) over B permutations (Phipson & Smyth 2010): valid at any n,
    never 0. Unconditional: the rows of Y permuted. Given a continuous Z (``z_method``): by default
    X and Y less their regressions on Z, X's residuals drawn by Runge's (2018) local permutation
    within Z-neighbourhoods, KSG on the residuals the statistic; or Runge's local permutation of X
    itself with Frenzel & Pompe's conditional KSG; or Shah & Peters' generalised covariance
    measure. Given a discrete Z: X permuted within each group of Z.

    Parameters
    ----------
    x, y : array_like, shape (n, dx) and (n, dy), or (n,)
        Row i of ``x`` goes with row i of ``y`` (as :func:`mitool.estimate` takes them: numbers,
        tensors, labels).
    z : array_like, shape (n, dz), optional
        The variables to condition on.
    estimator : str, optional
        The statistic: a name of :func:`mitool.estimators.names`; default: the k-NN statistic for
        the data (:data:`TEST_DEFAULTS`). An estimator that trains a network retrains for every
        permutation, so it is refused unless ``permutations`` is given.
    permutations : int, optional
        B; default :data:`DEFAULT_PERMUTATIONS` (999), with a note.
    seed : int
        All the randomness: the dequantisation of ties, the permutations, a trained estimator's.
    ties, discrete : str
        As :func:`mitool.estimate` reads them.
    z_neighbours : int
        k_perm of the local permutation (a continuous Z): the candidates of each row, itself included.
    tail : "none" or "gpd"
        "none" (default): the permutation p-value. "gpd": where fewer than 10 null values reach the
        statistic, the p-value of a generalized Pareto tail fitted to the null (:func:`tail_pvalue`:
        an estimate below 1 / (B + 1), not valid by construction; ``.tail`` says what was done).
    linear : bool, optional
        Whether to add :func:`linear_statistic` beside a k-NN statistic (KSG, Ross's, Frenzel &
        Pompe's) and combine the two by min-p (:func:`min_p_combination`); default: with the
        default statistic of an unconditional test (``estimator`` unset, no ``z``), not with a
        named one nor given Z (:data:`LINEAR_COMPANIONS`). ``.statistic`` stays the
        MI estimate; ``.components`` gives each statistic's value and own p-value.
    missing : str
        "drop" (default): rows with a missing value (NaN, None, pandas' NA) in x, y or z are left
        out, with a note; "refuse": a missing value is an error naming its row.
    z_method : "auto", "residual", "local" or "gcm"
        Given a continuous Z, how H0: X independent of Y given Z is tested (a discrete Z is always
        tested by permutations within its groups, exactly).

        * "residual" ("auto" when no estimator is named and ``linear`` is not True): each column of
          X and of Y is regressed on Z's rank scores by the model of smallest leave-one-out error
          (:func:`regress_on_z`), giving residuals r_X = X - f(Z), r_Y = Y - g(Z); each draw gives
          every row the r_X of one of its ``z_neighbours`` nearest rows in Z (Runge's local
          permutation), and the statistic is KSG on the rank scores of (r_X, r_Y). Under H0, r_X
          and r_Y are independent given Z; the draw keeps r_X's law given Z where that law changes
          little within a neighbourhood, which the regression makes so: what is left of X's
          dependence on Z is its regression's error, not the dependence itself (the Z-dependence
          that broke the "local" scheme, Kim, Neykov, Balakrishnan & Wasserman 2022).
        * "local" ("auto" with a named estimator, or ``linear=True``): Runge's local permutation of
          X itself, the statistic Frenzel & Pompe's I(X; Y | Z) (or the named estimator's). Valid
          where X's law given Z changes little within the neighbourhoods: not where X and Y both
          depend strongly on a Z of several dimensions.
        * "gcm": Shah & Peters' generalised covariance measure of the two residuals
          (:func:`gcm_statistic`): no permutations, p from a chi-square law; valid as n grows when
          both regressions converge fast enough; sees only a dependence with a conditional
          covariance.

        Every test given a continuous Z reports the neighbourhood diagnostic
        (:func:`neighbourhood_spread`) in ``.diagnostic`` and, where it exceeds
        :data:`CO_SPREAD_WARNING` for the scheme used, a warning in ``.warnings`` and ``str``: then the
        p-value may be too small. No test of conditional independence holds its level over every
        law (Shah & Peters 2020, No-free-lunch theorem); the warning says where this one is known not
        to.
    **settings
        The estimator's own settings (``k=8``).

    Returns
    -------
    IndependenceTest
        ``.statistic`` (nats), ``.pvalue``, ``.permutations``, ``.null`` (mean, std, quantiles),
        ``.method`` and ``.notes``; given a continuous Z, ``.z_method``, ``.diagnostic`` and
        ``.warnings``; ``str(result)`` says it in a sentence.

    Raises
    ------
    ParameterError
        Bad input, in one line naming the parameter: too few rows for the statistic, rows that do
        not pair, a trained estimator without ``permutations``.

    Examples
    --------
    >>> import numpy as np, mitool
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=300)
    >>> dependent = mitool.independence_test(x, x + rng.normal(size=300), permutations=199)
    >>> dependent.pvalue                          # the smallest p that 199 permutations can give
    0.005
    >>> independent = mitool.independence_test(x, rng.normal(size=300), permutations=199)
    >>> bool(independent.pvalue > 0.05)
    True
    >>> z = rng.normal(size=300)                  # a common cause: dependent, but not given Z
    >>> a, b = z + 0.5 * rng.normal(size=300), z + 0.5 * rng.normal(size=300)
    >>> bool(mitool.independence_test(a, b, z, permutations=99).pvalue > 0.05)
    True
    """
    checks.choice("tail", tail, ("none", "gpd"))
    checks.choice("z_method", z_method, Z_METHODS)
    return run_test(
        x,
        y,
        z,
        estimator=estimator,
        permutations=permutations,
        seed=seed,
        ties=ties,
        discrete=discrete,
        z_neighbours=z_neighbours,
        settings={**settings, "missing": missing},
        tail=tail,
        linear=linear,
        z_method=z_method,
        progress=progress,
    )[0]
