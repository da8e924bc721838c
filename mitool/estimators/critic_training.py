"""Training and scoring the critics of the neural estimators (:mod:`mitool.estimators.neural`).

Training (:func:`train_critics`): R critics (R data sets, or R members of an ensemble) trained
together as one model (:class:`mitool.stacked.StackedCritics`) with Adam on a bound's loss, each
step a random batch of B fit pairs scored all-pairs, K = B - 1 in-batch negatives. Every
``eval_every`` steps the validation pairs are scored as the test pairs will be; each critic is
kept at its best validation value and training stops after ``patience`` scores without
improvement (a flexible critic otherwise overfits small data sets and its held-out value falls,
even below zero). Runs may be grouped (the critics of one estimate: its folds and ensemble
members): a group stops when each of its runs has gone ``patience`` scores without improvement,
and from then on its runs are neither trained nor scored, so that each group ends as it would
have trained alone (a data set of :func:`mitool.estimate_many`, or one preparation of the data).

Scoring (:func:`held_out_values`): the held-out pairs are cut into blocks of at most ``block``
pairs; in each block every anchor is scored against all the other rows of the block
(K = block - 1), and the anchors are grouped into chunks; the evaluation bound on each chunk gives
one value.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mitool import bounds
from mitool._infra.lazy import lazy_import

if TYPE_CHECKING:
    from torch import Tensor, nn

    from mitool.critics.gaussian import GaussianCritics
    from mitool.stacked import StackedCritics

torch = lazy_import("torch")  # the registry of estimators imports this module without training anything

__all__ = [
    "MIN_CHUNKS",
    "FitRows",
    "MeanCritic",
    "Schedule",
    "Training",
    "all_pairs_scores",
    "held_out_values",
    "mi_of",
    "run_critics",
    "train_critics",
    "training_values",
]

MIN_CHUNKS = 10
"""A block is cut into at least this many chunks (of at least 5 anchors) when it is large enough,
so that small test sets still give an interval."""


def training_values(name: str, options: Mapping[str, float]) -> Callable:
    """(pos (R, B), neg (R, B, K), state (R,)) -> (loss (R,), mi (R,), new state): the bound's
    training loss and estimate per run, in one call (the bounds take leading dimensions); the state
    is MINE's log moving average (NaN: not started), passed through unchanged for the other bounds."""
    if bounds.BOUNDS[name].stateful:

        def values(pos: Tensor, neg: Tensor, state: Tensor) -> tuple[Tensor, Tensor, Tensor]:
            result, updated = bounds.mine(pos, neg, state, **options)
            return result.loss, result.mi, updated

    else:
        function = bounds.get(name, **options)

        def values(pos: Tensor, neg: Tensor, state: Tensor) -> tuple[Tensor, Tensor, Tensor]:
            result = function(pos, neg)
            return result.loss, result.mi, state

    return values


def mi_of(name: str, options: Mapping[str, float]) -> Callable[[Tensor, Tensor], float]:
    """The evaluation bound's value (a float) on scores that need no gradient."""
    if bounds.BOUNDS[name].stateful:  # evaluation: the plain DV value, no moving average

        def value(pos: Tensor, neg: Tensor) -> float:
            return float(bounds.mine(pos, neg, None, **options)[0].mi)

        return value
    function = bounds.get(name, **options)
    return lambda pos, neg: float(function(pos, neg).mi)


def all_pairs_scores(
    critic: Callable[[Tensor, Tensor], Tensor], x: Tensor, y: Tensor, rows: int = 64
) -> Tensor:
    """The (b, b) matrix f(x_i, y_j), computed ``rows`` anchors at a time (a concat critic's hidden
    layer for b^2 pairs at once would not fit in memory)."""
    return torch.cat([critic(x[start : start + rows], y) for start in range(0, len(x), rows)])


def _chunk_count(anchors: int, chunk: int) -> int:
    return max(1, anchors // chunk, min(MIN_CHUNKS, anchors // 5))


def held_out_values(
    critic: Callable[[Tensor, Tensor], Tensor],
    x: Tensor,
    y: Tensor,
    evaluate: Callable[[Tensor, Tensor], float],
    block: int,
    chunk: int,
    extrapolate: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The bound on held-out pairs (see the module): one value per chunk of anchors, and each
    chunk's number of negatives K (blocks may differ in size by one row).

    With ``extrapolate``, each chunk's value is carried to infinitely many negatives by Richardson's
    rule, 2 I_K - I_K', where I_K' is the same chunk's value with each anchor scored against its own
    half of the block only (K' + 1 = (K + 1) / 2, halves differing by at most a row). The InfoNCE
    family's value for a fixed critic falls short of its limit as K -> oo (for InfoNCE the
    conditional Donsker-Varadhan value E f(x, y) - E_x log E_y' e^{f(x, y')}, itself <= I) by
    c / (K + 1) + O(1/K^2): the log of a mean of K + 1 terms sits below the log of their
    expectation; the rule cancels the c / (K + 1) term. Blocks of fewer than 4 pairs are not
    extrapolated (a half would have no negative)."""
    count = x.shape[0]
    values, negatives = [], []
    with torch.no_grad():
        for rows_of_block in np.array_split(np.arange(count), max(1, math.ceil(count / block))):
            index = torch.as_tensor(rows_of_block, device=x.device)
            scores = all_pairs_scores(critic, x[index], y[index])
            pos, neg = bounds.split_scores(scores)
            halves = _halves(scores) if extrapolate and len(rows_of_block) >= 4 else None
            for anchors in np.array_split(
                np.arange(len(rows_of_block)), _chunk_count(len(rows_of_block), chunk)
            ):
                rows = torch.as_tensor(anchors, device=x.device)
                value = evaluate(pos[rows], neg[rows])
                if halves is not None:
                    value = 2 * value - _value_in_halves(halves, anchors, evaluate)
                values.append(value)
                negatives.append(neg.shape[1])
    return np.array(values), np.array(negatives)


def _halves(scores: Tensor) -> list[tuple[int, Tensor, Tensor]]:
    """(first row, pos, neg) of each half of a block's (b, b) scores: its anchors scored against the
    rows of their own half only."""
    cut = scores.shape[0] // 2
    return [
        (start, *bounds.split_scores(scores[start:stop, start:stop]))
        for start, stop in ((0, cut), (cut, scores.shape[0]))
    ]


def _value_in_halves(
    halves: list[tuple[int, Tensor, Tensor]], anchors: np.ndarray, evaluate: Callable
) -> float:
    """The chunk's value with each anchor scored within its half of the block: the halves' values on
    their shares of the chunk, weighted by those shares (exact for the InfoNCE family, whose values
    are means over anchors)."""
    total = 0.0
    for start, pos, neg in halves:
        stop = start + pos.shape[0]
        share = anchors[(anchors >= start) & (anchors < stop)] - start
        if len(share):
            rows = torch.as_tensor(share, device=pos.device)
            total += len(share) * evaluate(pos[rows], neg[rows])
    return total / len(anchors)


class MeanCritic:
    """The mean score of several critics, f(x, y) = mean_m f_m(x, y): an ensemble. The bounds of
    :mod:`mitool.bounds` are concave in the critic's scores (a linear term minus a log-sum-exp or a
    mean of exponentials; SMILE's clipping is the exception), so their value at the mean critic is
    at least the mean of the members' values. Called as a critic, ``critic(x, y)`` -> (B, M); it is
    only scored, never trained."""

    def __init__(self, members: Sequence[nn.Module]) -> None:
        self.members = list(members)

    def __call__(self, x: Tensor, y: Tensor) -> Tensor:
        return torch.stack([member(x, y) for member in self.members]).mean(0)


@dataclass
class Training:
    """What :func:`train_critics` did, per run: the step of the kept critic, its validation value,
    the steps it ran (its group's), the step at which it diverged (None if it did not), and what
    ended its training (:data:`ENDINGS`)."""

    best_step: list[int]
    best_value: list[float]
    steps: list[int]
    diverged_step: list[int | None]
    diverged_value: list[float | None]
    ended_by: list[str]


ENDINGS = ("patience", "steps", "seconds", "diverged")
"""What ends a run's training: ``patience`` scores without a better one (the held-out value has
stopped rising), the most ``steps``, the time budget (``seconds``), or a training value that ran
away. Only the first says the critic had stopped improving."""


class _BestWeights:
    """Each run's weights at its best validation value so far, and its patience count."""

    def __init__(self, stack: StackedCritics) -> None:
        self.weights = {name: value.detach().clone() for name, value in stack.named_parameters().items()}
        runs = stack.runs
        self.value, self.step, self.stale = [-math.inf] * runs, [0] * runs, [0] * runs

    def update(
        self, stack: StackedCritics, step: int, values: Sequence[float], active: Sequence[bool]
    ) -> None:
        """Keep the weights of each active run whose validation value in ``values`` (any value for
        the others) is its best so far; count the others' scores without improvement."""
        improved = [active[r] and values[r] > self.value[r] for r in range(len(values))]
        for run, better in enumerate(improved):
            if better:
                self.value[run], self.step[run], self.stale[run] = values[run], step, 0
            elif active[run]:
                self.stale[run] += 1
        rows = torch.tensor(improved, device=next(iter(self.weights.values())).device)
        for name, value in stack.named_parameters().items():
            self.weights[name][rows] = value.detach()[rows]

    def load_into(self, stack: StackedCritics) -> None:
        with torch.no_grad():
            for name, value in stack.named_parameters().items():
                value.copy_(self.weights[name])


@dataclass(frozen=True)
class Schedule:
    """How long and how :func:`train_critics` trains: most ``steps``, batches of ``batch_size``,
    Adam's ``lr``, validation every ``eval_every`` steps scored in blocks of ``block`` with
    ``chunk`` anchors per value, stopping after ``patience`` scores without improvement, or at the
    first score after ``max_seconds`` of training; a run whose training value is not finite or
    beyond ``threshold`` nats stops there. ``weight_decay``: AdamW's
    decoupled decay; ``input_noise``: the standard deviation of Gaussian noise added to the training
    batches' inputs (a smoothing regulariser; validation and test rows are scored as they are)."""

    steps: int
    batch_size: int
    lr: float
    eval_every: int
    patience: int
    block: int
    chunk: int
    threshold: float = bounds.DIVERGENCE_THRESHOLD
    weight_decay: float = 0.0
    input_noise: float = 0.0
    max_seconds: float = math.inf


Critic = Callable[["Tensor", "Tensor"], "Tensor"]


@dataclass(frozen=True)
class FitRows:
    """The fit rows of R runs: x (R, N, dx) and y (R, N, dy), run r's first ``lengths[r]`` rows its
    own (the runs of a cross-fitting differ by a row; the rest is padding)."""

    x: Tensor
    y: Tensor
    lengths: Sequence[int]


def run_critics(stack: StackedCritics, base: GaussianCritics | None) -> list[Critic]:
    """Each run's critic as ``critic(x (B, dx), y (M, dy)) -> (B, M)``: the trained network, plus the
    run's base critic when there is one."""
    networks = stack.critics()
    if base is None:
        return list(networks)
    return [_with_base(network, base.run(index)) for index, network in enumerate(networks)]


def _with_base(network: Critic, base: Critic) -> Critic:
    return lambda x, y: network(x, y) + base(x, y)


def validation_values(
    critics: Sequence[Critic],
    validation: Sequence[tuple[Tensor, Tensor]],
    evaluate: Callable,
    schedule: Schedule,
    scored: Sequence[bool] | None = None,
) -> list[float]:
    """Each critic's mean held-out value (:func:`held_out_values`) on its validation pairs; NaN for
    those that ``scored`` leaves out (False)."""
    return [
        float(np.mean(held_out_values(critic, x, y, evaluate, schedule.block, schedule.chunk)[0]))
        if scored is None or scored[run]
        else math.nan
        for run, (critic, (x, y)) in enumerate(zip(critics, validation, strict=True))
    ]


def _batch_scores(
    stack: StackedCritics, base: GaussianCritics | None, x: Tensor, y: Tensor
) -> tuple[Tensor, Tensor]:
    """pos (R, B), neg (R, B, B - 1) of a batch of each run, the base's scores added."""
    scores = stack.all_pairs(x, y)
    if base is not None:
        scores = scores + base.all_pairs(x, y)
    return bounds.split_scores(scores)


def _batches(
    fit: FitRows, schedule: Schedule, generators: Sequence[torch.Generator], run_index: Tensor
) -> tuple[Tensor, Tensor]:
    """x, y (R, B, d): each run's batch of its own fit rows (with ``input_noise`` added)."""
    rows = torch.stack(
        [torch.randperm(length, generator=generator)[: schedule.batch_size]
         for length, generator in zip(fit.lengths, generators, strict=True)]
    ).to(fit.x.device)  # fmt: skip
    x_batch, y_batch = fit.x[run_index, rows], fit.y[run_index, rows]
    if schedule.input_noise:  # each run's noise from its own generator, never torch's process-wide one

        def noise(batch: Tensor) -> Tensor:
            drawn = [torch.randn(batch.shape[1:], generator=generator) for generator in generators]
            return torch.stack(drawn).to(device=batch.device, dtype=batch.dtype)

        x_batch = x_batch + schedule.input_noise * noise(x_batch)
        y_batch = y_batch + schedule.input_noise * noise(y_batch)
    return x_batch, y_batch


def train_critics(
    stack: StackedCritics,
    bound: str,
    options: Mapping[str, float],
    fit: FitRows,
    validation: Sequence[tuple[Tensor, Tensor]],
    evaluate: Callable[[Tensor, Tensor], float],
    schedule: Schedule,
    generators: Sequence[torch.Generator],
    progress: Callable[[int, int, float], None] | None = None,
    base: GaussianCritics | None = None,
    groups: Sequence[int] | None = None,
) -> Training:
    """Train the R critics of ``stack`` with the bound called ``bound`` (a name of
    :data:`mitool.bounds.BOUNDS`) on their fit rows and leave each at its best validation value (see
    the module); with a ``base``, run r's critic is base_r + network_r and its validation is scored
    before the first step too (the network starts at zero, so the base alone may be kept). Runs of
    one label in ``groups`` (R labels; default: one group) stop together. A run whose training
    estimate runs away stops there (its :class:`Training` entries say where)."""
    runs = fit.x.shape[0]
    members_of = _runs_of_groups(groups, runs)
    values_of = training_values(bound, options)
    state = torch.full((runs,), math.nan, device=fit.x.device)
    optimiser = torch.optim.AdamW(
        stack.parameters(), lr=schedule.lr, weight_decay=schedule.weight_decay, fused=True
    )
    best = _BestWeights(stack)
    diverged: list[int | None] = [None] * runs
    diverged_value: list[float | None] = [None] * runs
    run_index = torch.arange(runs, device=fit.x.device)[:, None]
    active = [True] * runs  # neither diverged nor in a stopped group: trained and scored
    stopped_at: dict[int, int] = {}  # group -> its last step

    def score(step: int) -> list[float]:
        values = validation_values(run_critics(stack, base), validation, evaluate, schedule, active)
        best.update(stack, step, values, active)
        return values

    if base is not None:
        score(0)
    step, started, out_of_time = 0, time.perf_counter(), False
    for step in range(1, schedule.steps + 1):
        batch = _batches(fit, schedule, generators, run_index)
        mi, state = _optimiser_step(stack, base, batch, values_of, state, optimiser, active)
        for run, value in enumerate(mi.detach().tolist()):
            if active[run] and (not math.isfinite(value) or abs(value) > schedule.threshold):
                diverged[run], diverged_value[run], active[run] = step, value, False
        if step % schedule.eval_every == 0 or step == schedule.steps:
            values = score(step)
            out_of_time = time.perf_counter() - started > schedule.max_seconds
            if progress is not None:
                latest = float(np.mean([v for v, a in zip(values, active, strict=True) if a] or [math.nan]))
                progress(step, schedule.steps, latest)
        _stop_stale_groups(members_of, best.stale, schedule.patience, active, stopped_at, step)
        if len(stopped_at) == len(members_of) or out_of_time:
            break
    best.load_into(stack)
    if progress is not None:
        progress(schedule.steps, schedule.steps, float(np.mean(best.value)))
    steps, ended_by = _endings(members_of, stopped_at, step, diverged, out_of_time, runs)
    return Training(best.step, best.value, steps, diverged, diverged_value, ended_by)


def _runs_of_groups(groups: Sequence[int] | None, runs: int) -> dict[int, list[int]]:
    """Each group's runs, by its label in ``groups`` (default: one group of all ``runs``)."""
    members_of: dict[int, list[int]] = {}
    for run, group in enumerate(groups if groups is not None else [0] * runs):
        members_of.setdefault(group, []).append(run)
    return members_of


def _optimiser_step(
    stack: StackedCritics, base: GaussianCritics | None, batch: tuple[Tensor, Tensor], values_of: Callable,
    state: Tensor, optimiser: torch.optim.Optimizer, active: Sequence[bool],
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """(each run's training estimate (R,), the bound's new state) after one Adam step on ``batch``."""
    pos, neg = _batch_scores(stack, base, *batch)
    loss, mi, state = values_of(pos, neg, state)
    optimiser.zero_grad(set_to_none=True)
    trained = torch.tensor(active, device=loss.device)  # a stopped run's loss adds no gradient
    torch.where(trained, loss, torch.zeros_like(loss)).sum().backward()
    optimiser.step()
    return mi, state


def _stop_stale_groups(
    members_of: Mapping[int, list[int]], stale: Sequence[int], patience: int, active: list[bool],
    stopped_at: dict[int, int], step: int,
) -> None:  # fmt: skip
    """Stop each group whose active runs are all ``patience`` scores stale (``stopped_at``, ``active``)."""
    for group, members in members_of.items():
        if group not in stopped_at and all(stale[run] >= patience for run in members if active[run]):
            stopped_at[group] = step
            for run in members:
                active[run] = False


def _endings(
    members_of: Mapping[int, list[int]], stopped_at: Mapping[int, int], last_step: int,
    diverged: Sequence[int | None], out_of_time: bool, runs: int,
) -> tuple[list[int], list[str]]:  # fmt: skip
    """Each of the ``runs`` runs' steps (its group's) and what ended its training (:data:`ENDINGS`)."""
    steps, ended_by = [0] * runs, ["steps"] * runs
    for group, members in members_of.items():
        for run in members:
            steps[run] = stopped_at.get(group, last_step)
            if diverged[run] is not None:
                ended_by[run] = "diverged"
            elif group in stopped_at:
                ended_by[run] = "patience"
            elif out_of_time:
                ended_by[run] = "seconds"
    return steps, ended_by
