"""The finished blocks assembled into a :class:`~mitool.matrix.result.MatrixResult`: the p-values
against the shared nulls and their tails, the q-values, the (p, p) matrices, the method and the notes."""

from __future__ import annotations

from typing import Any

import numpy as np

from mitool.independence.pvalues import FDR_NAMES, fdr_qvalues, min_p_combination
from mitool.independence.tails import TAIL_REACHED, TailFit, bonferroni_tails, fit_tail
from mitool.matrix.blocks import Job
from mitool.matrix.result import COMBINED_FLOOR, MatrixResult


def _assemble(names: tuple[str, ...], n: int, pairs: np.ndarray, blocks: list[slice], fast: np.ndarray,
              shared: np.ndarray, null_blocks: list, results: dict[str, Any], job: Job, null: str,
              reused: int, notes: list[str], seconds: float, tail: str = "none", fdr: str = "bh", *,
              labelled: np.ndarray, discrete_nulls: list[int],
              dequantised: tuple[str, ...]) -> MatrixResult:  # fmt: skip
    """The MatrixResult of the finished blocks' ``results`` (their notes added to ``notes``)."""
    width = len(names)
    per_pair = _per_pair(results, len(blocks))
    null_rows = _null_rows(results, null_blocks)
    reached = _shared_pvalues(per_pair, shared, null_rows)
    _discrete_pvalues(per_pair, results, labelled, discrete_nulls)
    tailed, fitted, unfitted = _tail_pvalues(per_pair, shared, null_rows, tail, reached)
    linear = per_pair.pop("linear")
    null_values = null_rows[:, 0]
    per_pair["qvalue"] = fdr_qvalues(per_pair["pvalue"], fdr)
    matrices = {name: _symmetric(values, pairs, width) for name, values in per_pair.items()}
    on_shared = shared | (labelled >= 0)  # a pair on the numeric columns' null or a discrete column's
    shared_matrix = _symmetric(on_shared, pairs, width, empty=False)
    tail_matrix = _symmetric(tailed, pairs, width, empty=False)
    for index in range(len(blocks)):
        notes.extend(note for note in results[f"pairs-{index:05d}"]["notes"] if note not in notes)
    scheme = "shared" if on_shared.all() else "pair" if not on_shared.any() else "mixed"
    count = job.permutations
    notes.extend(_tail_notes(names, pairs, tailed, unfitted, count, per_pair["pvalue"]))
    notes.extend(_resolution_notes(per_pair["pvalue"], per_pair["qvalue"], count, ~tailed))
    method = _method(job, fdr, len(pairs), shared, labelled, discrete_nulls, tailed, fitted)
    return MatrixResult(
        columns=names, statistic=matrices["statistic"], ci_low=matrices["ci_low"],
        ci_high=matrices["ci_high"], pvalue=matrices["pvalue"], qvalue=matrices["qvalue"],
        permutations=count, null=scheme, method=method, notes=tuple(notes), n_rows=n, seconds=seconds,
        reused_blocks=reused, shared_pairs=shared_matrix, null_values=null_values, tail=tail,
        tail_pairs=tail_matrix, tail_fit=fitted, linear_null_values=null_rows[:, 1],
        linear=_symmetric(linear, pairs, width), dequantised=dequantised,
    )  # fmt: skip


def _per_pair(results: dict[str, Any], blocks: int) -> dict[str, np.ndarray]:
    """Each pair's statistic, interval, p-value and linear statistic, the pair blocks' results joined."""
    return {name: np.concatenate([results[f"pairs-{index:05d}"][name] for index in range(blocks)])
            for name in ("statistic", "ci_low", "ci_high", "pvalue", "linear")}  # fmt: skip


def _null_rows(results: dict[str, Any], null_blocks: list) -> np.ndarray:
    """(B, 2): the shared null's rows (KSG, linear statistic), its blocks joined; (0, 2) without one."""
    return (np.concatenate([results[f"null-{block:05d}"] for block, _ in null_blocks])
            if null_blocks else np.zeros((0, 2)))  # fmt: skip


def _shared_pvalues(per_pair: dict[str, np.ndarray], shared: np.ndarray, null_rows: np.ndarray) -> np.ndarray:
    """How many null rows reach each pair on the shared null (else 0); its p-values put in ``per_pair``."""
    reached = np.zeros(len(shared), dtype=np.intp)
    if shared.any():
        _combined_against(per_pair, shared, null_rows)
        reached[shared] = np.round(per_pair["pvalue"][shared] * (len(null_rows) + 1)).astype(np.intp) - 1
    return reached


def _discrete_pvalues(per_pair: dict[str, np.ndarray], results: dict[str, Any], labelled: np.ndarray,
                      discrete_nulls: list[int]) -> None:  # fmt: skip
    """Write into ``per_pair`` the p-values of each discrete column's pairs against its own null."""
    for column in discrete_nulls:
        column_null = np.concatenate(
            [results[key] for key in sorted(results) if key.startswith(f"labels{column}-")]
        )
        _combined_against(per_pair, labelled == column, column_null)


def _combined_against(per_pair: dict[str, np.ndarray], rows: np.ndarray, null: np.ndarray) -> None:
    """Write into ``per_pair`` the p-values of the pairs ``rows``: the min-p combination of their
    statistic and linear statistic against the rows of ``null`` (B, 2)."""
    observed = np.column_stack([per_pair["statistic"][rows], per_pair["linear"][rows]])
    per_pair["pvalue"][rows] = min_p_combination(observed, null)[0]


def _method(job: Job, fdr: str, n_pairs: int, shared: np.ndarray, labelled: np.ndarray,
            discrete_nulls: list[int], tailed: np.ndarray, fitted: TailFit | None) -> str:  # fmt: skip
    """The result's ``method``: how each pair's p-value and q-value were computed."""
    count = job.permutations
    on_shared = shared | (labelled >= 0)
    method = (f"Each pair of columns a < b by independence_test (column a as X, b as Y; the pair's seed "
              f"pair_seed(seed, a, b)); p = (1 + #{{null >= observed}}) / (1 + {count}) (for a KSG or Ross "
              "statistic, its min-p combination with the linear statistic, as independence_test makes it), "
              f"never 0, at least 1/{count + 1}; q: {FDR_NAMES[fdr]} over the {n_pairs} "
              "pairs.")  # fmt: skip
    if shared.any():
        method += (f" {int(shared.sum())} pair(s) of tie-free numeric columns share one null: KSG (k = "
                   f"{job.ks[0]}) and the linear statistic on rank scores are distribution-free under "
                   f"independence, so {count} permutations of the ranks serve them all, and each pair's p "
                   "is the min-p combination of the two against them.")  # fmt: skip
    if discrete_nulls:
        method += (f" {int((labelled >= 0).sum())} pair(s) of a discrete column and a tie-free numeric one "
                   f"share their discrete column's null ({len(discrete_nulls)} null(s)): Ross's statistic "
                   f"(k = {job.label_k}) and Wilks' linear statistic on the numeric column's rank scores see "
                   f"it only through its ranks, so {count} permutations of the discrete column's classes "
                   "serve all of its pairs.")  # fmt: skip
    if not on_shared.all():
        method += f" The other pairs have their own {count} permutations each."
    if fitted is not None:
        method += (f" {int(tailed.sum())} of them, which fewer than {TAIL_REACHED} null values reach, have "
                   f"the p-value of the {fitted.describe()}: p = (N_exc / B) (1 - F(observed - threshold)) "
                   "(Knijnenburg et al. 2009; mitool.independence.tail_pvalue), an estimate that goes "
                   f"below 1/{count + 1}.")  # fmt: skip
    return method


def _symmetric(values: np.ndarray, pairs: np.ndarray, width: int, empty: float = np.nan) -> np.ndarray:
    """(width, width): the pairs' values at (a, b) and (b, a), ``empty`` elsewhere: floats with NaN,
    or flags (booleans) with ``empty=False``."""
    matrix = np.full((width, width), empty, dtype=bool if isinstance(empty, bool) else float)
    matrix[pairs[:, 0], pairs[:, 1]] = values
    matrix[pairs[:, 1], pairs[:, 0]] = values
    return matrix


def _tail_pvalues(per_pair: dict[str, np.ndarray], shared: np.ndarray, null_rows: np.ndarray, tail: str,
                  reached: np.ndarray) -> tuple[np.ndarray, TailFit | None, np.ndarray]:  # fmt: skip
    """With ``tail="gpd"``, the p-values of the pairs on the shared null that fewer than
    :data:`~mitool.independence.TAIL_REACHED` null rows reach (``reached``: in the min-p order),
    from generalized Pareto tails fitted once to the shared null of each statistic (what
    :func:`mitool.independence.tail_pvalue` gives each), twice the smaller of the two (Bonferroni;
    a statistic whose tail does not fit keeps its permutation p-value there), written into
    ``per_pair``; returns (those pairs, the KSG statistic's fit, the pairs left with their
    permutation p-value because neither fit passed)."""
    statistic = per_pair["statistic"]
    far = np.zeros(len(statistic), dtype=bool)
    if tail == "gpd":
        far = shared & np.isfinite(statistic) & (reached < TAIL_REACHED)
    fits = [fit_tail(null_rows[:, column]) for column in range(2)] if far.any() else [None, None]
    if fits[0] is None and fits[1] is None:
        return np.zeros_like(far), None, far
    for row in np.flatnonzero(far):
        observed = (statistic[row], per_pair["linear"][row])
        per_pair["pvalue"][row] = bonferroni_tails(observed, null_rows, fits)[0]
    return far, fits[0], np.zeros_like(far)


def _tail_notes(names: tuple[str, ...], pairs: np.ndarray, tailed: np.ndarray, unfitted: np.ndarray,
                count: int, pvalues: np.ndarray) -> list[str]:  # fmt: skip
    """Which pairs have a tail p-value (``tail_pairs`` holds them all), or why none has."""
    notes = []
    if tailed.any():
        rows = np.flatnonzero(tailed)
        named = ", ".join(f"{names[pairs[row, 0]]} ~ {names[pairs[row, 1]]}" for row in rows[:10])
        more = f" and {len(rows) - 10} more" if len(rows) > 10 else ""
        notes.append(f"{len(rows)} pair(s) have a generalized Pareto tail p-value, estimated beyond the "
                     f"{count} permutations: {named}{more}")  # fmt: skip
        floored = int(np.count_nonzero(pvalues[tailed] <= COMBINED_FLOOR))
        if floored:
            notes.append(f"{floored} of them at the tails' floor, p = {COMBINED_FLOOR:.0e}: the tail "
                         "says only that p is below it")  # fmt: skip
    if unfitted.any():
        notes.append(f"{int(unfitted.sum())} pair(s) are reached by fewer than {TAIL_REACHED} of the {count} "
                     "null values, but no generalized Pareto tail fitted the shared null (it needs 397 "
                     "permutations or more): their p-value is the permutation one")  # fmt: skip
    return notes


def _resolution_notes(pvalues: np.ndarray, qvalues: np.ndarray, count: int,
                      permuted: np.ndarray | None = None) -> list[str]:  # fmt: skip
    """A note when pairs at the smallest p that ``count`` permutations give (among the ``permuted``
    ones: those without a tail p-value) miss q <= 0.05 for want of resolution (see
    :mod:`mitool.matrix`)."""
    floor = 1 / (count + 1)
    at_floor = pvalues <= floor * (1 + 1e-9)
    if permuted is not None:
        at_floor &= permuted
    missed = int(np.count_nonzero(at_floor & (qvalues > 0.05)))
    if not missed:
        return []
    note = (f"{int(at_floor.sum())} pair(s) have the smallest p that {count} permutations can give "
            f"(1/{count + 1}), and over {len(pvalues)} pairs {missed} of them have q > 0.05 for that "
            "alone: more permutations resolve smaller p-values (a shared null costs them once)")  # fmt: skip
    return [note]
