"""The MI of paired samples: ``estimate(x, y) -> Estimate``, no file I/O.

    from mitool.estimate import estimate
    result = estimate(x, y)                    # x (n, dx), y (n, dy): row i of x goes with row i of y
    print(result.value, result.ci_low, result.ci_high)

Neural estimators (``estimator`` one of :data:`mitool.bounds.NAMES`) are made in four small steps,
each a function of this module:

1. :func:`split_pairs`: the pairs are shuffled and cut into a fit part (the critic trains on it),
   a validation part (early stopping) and a test part (the estimate), by ``validation_fraction``
   of the training pairs and ``test_fraction`` of all pairs.
2. :func:`normal_scores` (the default, ``normalise="rank"``): each coordinate is replaced by the
   normal score of its rank among the training pairs, Phi^-1((rank + 1/2) / n), interpolated for
   new rows; or :func:`standardise` (``"standard"``): shifted and scaled with the training pairs'
   mean and standard deviation. Both are invertible maps per coordinate: the MI does not change.
   On the benchmark suite, rank scores lowered the mean absolute error from 0.204 to 0.171 nats
   (docs/mi-benchmark.md): long tails and monotone maps no longer reach the critic.
3. :func:`train_critics`: ``ensemble`` critics per data set (1 by default; more: other initial
   weights and batches, the estimate scores their mean), Adam on the chosen bound's loss, each
   step a random batch of B fit pairs scored all-pairs, K = B - 1 in-batch negatives. Every
   ``eval_every`` steps the validation pairs are scored as the test pairs will be; the critic is
   kept at its best validation value and training stops after ``patience`` scores without
   improvement (a flexible critic otherwise overfits small data sets and its held-out estimate
   falls, even below zero). Several runs (R
   seeds, or R data sets of one size) train together as one model
   (:class:`mitool.stacked.StackedCritics`).
4. :func:`held_out_values`: the test pairs are cut into blocks of at most ``eval_block`` pairs; in
   each block every anchor is scored against all the other rows of the block (K = block - 1), and
   the anchors are grouped into chunks of about ``chunk`` (at least :data:`MIN_CHUNKS` chunks of 5
   or more anchors where the block allows). The evaluation bound on each chunk gives
   one value e_c; the estimate is mean_c(e_c), its standard error std(e_c) / sqrt(C), and
   :func:`confidence_interval` gives mean +- t_{C-1} * standard error. This interval covers the
   noise of the held-out evaluation of the one trained critic: not the spread over retraining
   with other seeds, and not the bound's own bias (InfoNCE's cap, for one). Chunks of one block
   share their negatives, so it is approximate (a little optimistic).

Which bound may evaluate a critic trained with which: training with bound A drives the critic to
A's optimum (:attr:`mitool.bounds.Bound.critic_optimum`); only the bounds that are tight there
(:func:`mitool.bounds.evaluators_for`) give a sensible value: a critic trained with infonce is
optimal only up to a function c(x) of the anchor, which the InfoNCE family ignores and NWJ does
not (NWJ on an InfoNCE critic gave -4.4e19). NWJ is tight at 1 + log p(y|x)/p(y): the js bound is
NWJ evaluated at the JS-trained critic shifted by +1, and the way to score a js or smile critic
with NWJ. ``evaluator`` outside that list is refused.

InfoNCE-type values cannot exceed their ceiling log(K + 1) (EqCo: log(alpha + 1)); an estimate
within :data:`CEILING_MARGIN` of it is flagged ``at_ceiling``: it is a lower bound at its ceiling,
and the MI may be far larger.

Non-neural estimators (``"ksg"``, ``"gaussian"``): :mod:`mitool.baselines`, standard errors from
disjoint subsets.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields

import numpy as np
import torch
from scipy import stats
from torch import Tensor, nn
from torch.func import vmap

from mitool import baselines, bounds, checks, critics
from mitool.stacked import StackedCritics

__all__ = [
    "CEILING_MARGIN",
    "DEFAULT_CRITIC",
    "DEFAULT_ESTIMATOR",
    "DIVERGENCE_THRESHOLD",
    "ESTIMATORS",
    "DivergenceError",
    "Estimate",
    "MeanCritic",
    "Settings",
    "Split",
    "Training",
    "as_pairs",
    "canonical_maps",
    "check_evaluator",
    "confidence_interval",
    "estimate",
    "estimate_runs",
    "held_out_values",
    "minimum_pairs",
    "split_pairs",
    "standardise",
    "train_critics",
]

ESTIMATORS: tuple[str, ...] = bounds.NAMES + tuple(baselines.BASELINES)
"""Every estimator: the bounds of :mod:`mitool.bounds` (a trained critic) and the baselines."""

DEFAULT_ESTIMATOR = "infonce"
"""The estimator of :func:`estimate` when none is given (see docs/mi-benchmark.md for the choice)."""

DEFAULT_CRITIC = "separable"
"""The critic of the neural estimators when none is given."""

CEILING_MARGIN = 0.05
"""An InfoNCE-type estimate within this many nats of its ceiling is reported as at the ceiling."""

DIVERGENCE_THRESHOLD = 1000.0
"""A training or held-out estimate that is NaN, infinite or beyond this many nats stops the run."""


class DivergenceError(ValueError):
    """The estimate ran away (not finite, or beyond :data:`DIVERGENCE_THRESHOLD`); the message names
    the cause and what to use instead."""


def _setting(default: object, meaning: str) -> object:
    return field(default=default, metadata={"help": meaning})


@dataclass(frozen=True)
class Settings:
    """How a neural estimate is made: every default lives here, each field's meaning in its
    ``help`` (which the command line shows)."""

    steps: int = _setting(2000, "Most training steps.")
    batch_size: int = _setting(128, "Training batch B (K = B - 1 in-batch negatives).")
    lr: float = _setting(5e-4, "Adam learning rate.")
    test_fraction: float = _setting(0.2, "Share of the pairs held out for the estimate.")
    validation_fraction: float = _setting(
        0.15, "Share of the training pairs scored for early stopping (the critic is kept at its best value)."
    )
    eval_every: int = _setting(50, "Steps between validation scores.")
    patience: int = _setting(10, "Stop after this many validation scores without improvement.")
    hidden: int = _setting(256, "Width of the critic's MLPs.")
    hidden_layers: int = _setting(2, "Hidden layers of the critic's MLPs.")
    embed_dim: int = _setting(32, "Embedding size of the separable and cosine critics.")
    temperature: float = _setting(0.1, "Temperature of the cosine critic (scores in [-1/T, 1/T]).")
    eval_block: int = _setting(1024, "Most held-out pairs scored together (K = block - 1 negatives).")
    chunk: int = _setting(50, "Held-out anchors per value of the interval.")
    level: float = _setting(0.95, "Confidence level of the interval.")
    ensemble: int = _setting(
        1,
        "Critics trained on each data set (other initial weights and batches); the estimate scores "
        "their mean score, whose estimate is at least their mean estimate (the bounds are concave).",
    )
    canonical: bool = _setting(
        False,
        "Turn X and Y to their canonical (CCA) coordinates, fitted on the training rows (invertible "
        "linear maps: the MI is unchanged; the linear dependence lands in the first coordinates).",
    )
    normalise: str = _setting(
        "rank",
        "How each coordinate is prepared, fitted on the training rows: standard (z-scores) or rank "
        "(normal scores of the ranks); both are invertible per coordinate and keep the MI.",
    )

    def __post_init__(self) -> None:
        for name in ("steps", "eval_every", "patience", "hidden", "embed_dim", "ensemble"):
            checks.whole_number(name, getattr(self, name), 1)
        checks.whole_number("batch_size", self.batch_size, 2)
        checks.whole_number("hidden_layers", self.hidden_layers, 0)
        checks.whole_number("eval_block", self.eval_block, 2)
        checks.whole_number("chunk", self.chunk, 1)
        checks.positive("lr", self.lr)
        checks.positive("temperature", self.temperature)
        for name in ("test_fraction", "validation_fraction", "level"):
            checks.fraction(name, getattr(self, name))
        checks.choice("normalise", self.normalise, PREPARATIONS)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(item.name for item in fields(cls))

    @classmethod
    def help(cls) -> dict[str, tuple[object, str]]:
        """Each field's (default, meaning)."""
        return {item.name: (item.default, item.metadata["help"]) for item in fields(cls)}

    def critic_options(self, critic: str) -> dict[str, object]:
        """The keyword options of :func:`mitool.critics.make_critic` that ``critic`` takes."""
        return critics.pick_options(critic, asdict(self))


@dataclass(frozen=True)
class Estimate:
    """An MI estimate in nats.

    value: the estimate. stderr: its standard error. ci_low, ci_high: the confidence interval at
    ``ci_level``; ``interval`` says how both were computed and what they cover. estimator: the
    training bound or baseline; evaluator: the bound scored on the held-out pairs (None for
    baselines). critic: the critic's name (None for baselines). n_pairs: all pairs given;
    n_fit, n_validation, n_test: the pairs that trained the critic, chose its step, gave the
    estimate (baselines: all in n_test). negatives_train, negatives_test: K in training and in the
    evaluation (the smallest K where the held-out blocks differ by a row). steps: training steps
    run; best_step: the step whose critic was kept. ceiling: the largest value the estimate can
    take (InfoNCE family: the mean over the chunks of log(K + 1) of each; EqCo: log(alpha + 1)) or
    None; at_ceiling: within
    :data:`CEILING_MARGIN` of it. seconds: wall time.
    """

    value: float
    stderr: float
    ci_low: float
    ci_high: float
    ci_level: float
    interval: str
    estimator: str
    evaluator: str | None
    critic: str | None
    n_pairs: int
    n_fit: int
    n_validation: int
    n_test: int
    negatives_train: int | None
    negatives_test: int | None
    steps: int
    best_step: int
    ceiling: float | None
    at_ceiling: bool
    seconds: float

    @property
    def n_train(self) -> int:
        """Pairs of the training split (fit + validation)."""
        return self.n_fit + self.n_validation

    def as_dict(self) -> dict:
        """Every field, ``value`` under the key ``estimate``, plus ``n_train``."""
        values = asdict(self)
        values = {"estimate": values.pop("value"), **values, "n_train": self.n_train}
        return values


# ----------------------------------------------------------------------------------------------
# data


def as_pairs(x: object, y: object) -> tuple[np.ndarray, np.ndarray]:
    """x and y as float64 arrays of shape (n, d) (1-D data become one column), checked: the same
    number of rows, finite values."""
    arrays = []
    for name, data in (("x", x), ("y", y)):
        array = np.asarray(data.detach().cpu() if isinstance(data, Tensor) else data)
        if array.dtype.kind not in "biuf":
            raise checks.ParameterError(name, f"must hold numbers, got dtype {array.dtype}")
        array = (
            array.astype(np.float64).reshape(len(array), -1) if array.ndim == 1 else array.astype(np.float64)
        )
        if array.ndim != 2 or array.shape[0] < 1 or array.shape[1] < 1:
            raise checks.ParameterError(name, f"must have one row per sample (n, d), got shape {array.shape}")
        bad = ~np.isfinite(array)
        if bad.any():
            row = int(np.argwhere(bad)[0][0])
            raise checks.ParameterError(name, f"holds NaN or infinite values (first in row {row})")
        arrays.append(array)
    rows_x, rows_y = arrays[0].shape[0], arrays[1].shape[0]
    if rows_x != rows_y:
        raise checks.ParameterError(
            "y", f"must have the same number of rows (samples) as x: {rows_y} against {rows_x}"
        )
    return arrays[0], arrays[1]


@dataclass(frozen=True)
class Split:
    """Row indices of the fit, validation and test parts."""

    fit: np.ndarray
    validation: np.ndarray
    test: np.ndarray

    @property
    def train(self) -> np.ndarray:
        return np.concatenate([self.fit, self.validation])


def _part_sizes(n: int, settings: Settings) -> tuple[int, int, int]:
    n_test = int(round(n * settings.test_fraction))
    n_train = n - n_test
    n_validation = int(round(n_train * settings.validation_fraction))
    return n_train - n_validation, n_validation, n_test


def _sizes_work(n: int, settings: Settings) -> bool:
    n_fit, n_validation, n_test = _part_sizes(n, settings)
    return n_fit >= settings.batch_size and n_validation >= 2 and n_test >= 2


def minimum_pairs(settings: Settings) -> int:
    """The fewest pairs for which the split leaves a full training batch, two validation pairs and
    two test pairs."""
    n = settings.batch_size
    while not _sizes_work(n, settings):
        n += 1
    return n


def split_pairs(n: int, settings: Settings, seed: int) -> Split:
    """A seeded shuffle of n pairs cut into fit, validation and test parts (see the module).
    ParameterError ("x has too few samples ...") when n is below :func:`minimum_pairs`."""
    if not _sizes_work(n, settings):
        minimum = minimum_pairs(settings)
        held_out = f"{100 * settings.test_fraction:g}% held out for the estimate"
        validation = f"{100 * settings.validation_fraction:g}% of the rest for early stopping"
        raise checks.ParameterError(
            "x",
            f"has too few samples ({n}; at least {minimum} for a training batch of {settings.batch_size} "
            f"pairs with {held_out} and {validation})",
        )
    n_fit, n_validation, _ = _part_sizes(n, settings)
    order = np.random.default_rng(seed).permutation(n)
    return Split(order[:n_fit], order[n_fit : n_fit + n_validation], order[n_fit + n_validation :])


def standardise(train: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    """``train`` and ``others`` shifted and scaled per column by ``train``'s mean and standard
    deviation (constant columns are only shifted)."""
    mean, scale = train.mean(axis=0), train.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    return [(array - mean) / scale for array in (train, *others)]


def normal_scores(train: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    """Each column of ``train`` and ``others`` through the training column's empirical CDF and the
    normal quantile: z = Phi^-1(F(v)), with F linear between the sorted training values at levels
    (i + 1/2) / n and held at the end levels beyond them. A strictly increasing map per
    coordinate within the training range (ties and the few values beyond it are merged), so the MI
    is unchanged; the marginals become standard normal, which undoes monotone distortions of the
    coordinates and tames long tails."""
    from scipy.special import ndtri

    count = len(train)
    levels = (np.arange(count) + 0.5) / count
    ordered = np.sort(train, axis=0)
    return [
        np.stack(
            [ndtri(np.interp(array[:, j], ordered[:, j], levels)) for j in range(train.shape[1])], axis=1
        )
        for array in (train, *others)
    ]


def _inverse_root(covariance: np.ndarray) -> np.ndarray:
    values, vectors = np.linalg.eigh(covariance)
    values = np.maximum(values, 1e-9 * max(values.max(), 1e-300))
    return (vectors / np.sqrt(values)) @ vectors.T


def canonical_maps(x_train: np.ndarray, y_train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Invertible linear maps A (dx, dx) and B (dy, dy) to canonical coordinates: x -> A x and
    y -> B y whiten each side and turn it so that the cross-covariance of the training rows is
    diagonal, the canonical correlations in decreasing order (CCA). With W_x = S_xx^-1/2,
    W_y = S_yy^-1/2 and the SVD W_x S_xy W_y = U D V', A = U' W_x and B = V' W_y. Invertible maps
    of X and of Y leave the MI unchanged; the linear dependence is then in the first coordinates."""
    x_centred, y_centred = x_train - x_train.mean(0), y_train - y_train.mean(0)
    count = len(x_train) - 1
    white_x = _inverse_root(x_centred.T @ x_centred / count)
    white_y = _inverse_root(y_centred.T @ y_centred / count)
    left, _, right = np.linalg.svd(white_x @ (x_centred.T @ y_centred / count) @ white_y)
    return left.T @ white_x, right @ white_y


PREPARATIONS: dict[str, Callable[..., list[np.ndarray]]] = {"standard": standardise, "rank": normal_scores}
"""How the coordinates are prepared before training (``Settings.normalise``): both are invertible
per coordinate and fitted on the training rows only."""


# ----------------------------------------------------------------------------------------------
# training and evaluation


def check_evaluator(estimator: str, evaluator: str) -> str:
    """``evaluator`` when it is tight for a critic trained with ``estimator``
    (:func:`mitool.bounds.evaluators_for`), else ParameterError saying which are."""
    checks.choice("evaluator", evaluator, bounds.NAMES)
    allowed = bounds.evaluators_for(estimator)
    if evaluator not in allowed:
        optimum = bounds.CRITIC_OPTIMA[bounds.BOUNDS[estimator].critic_optimum]
        raise checks.ParameterError(
            "evaluator",
            f"{evaluator!r} is not tight for a critic trained with {estimator!r} (which converges to "
            f"{optimum}) and can be arbitrarily wrong; use one of {', '.join(allowed)}",
        )
    return evaluator


def _training_values(name: str, options: Mapping[str, float]) -> Callable:
    """(pos (R, B), neg (R, B, K), state (R,)) -> (loss (R,), mi (R,), new state): the bound's
    training loss and estimate per run; the state is MINE's log moving average (NaN: not started),
    passed through unchanged for the other bounds."""
    if bounds.BOUNDS[name].stateful:

        def values(pos: Tensor, neg: Tensor, state: Tensor) -> tuple[Tensor, Tensor, Tensor]:
            result, updated = bounds.mine(pos, neg, state, **options)
            return result.loss, result.mi, updated

    else:
        function = bounds.get(name, **options)

        def values(pos: Tensor, neg: Tensor, state: Tensor) -> tuple[Tensor, Tensor, Tensor]:
            result = function(pos, neg)
            return result.loss, result.mi, state

    return vmap(values)


def _mi_of(name: str, options: Mapping[str, float]) -> Callable[[Tensor, Tensor], float]:
    """The evaluation bound's value (a float) on scores that need no gradient."""
    if bounds.BOUNDS[name].stateful:  # evaluation: the plain DV value, no moving average

        def value(pos: Tensor, neg: Tensor) -> float:
            return float(bounds.mine(pos, neg, None, **options)[0].mi)

        return value
    function = bounds.get(name, **options)
    return lambda pos, neg: float(function(pos, neg).mi)


def all_pairs_scores(critic: nn.Module, x: Tensor, y: Tensor, rows: int = 64) -> Tensor:
    """The (b, b) matrix f(x_i, y_j), computed ``rows`` anchors at a time (a concat critic's hidden
    layer for b^2 pairs at once would not fit in memory)."""
    return torch.cat([critic(x[start : start + rows], y) for start in range(0, len(x), rows)])


MIN_CHUNKS = 10
"""A block is cut into at least this many chunks (of at least 5 anchors) when it is large enough,
so that small test sets still give an interval."""


def _chunk_count(anchors: int, chunk: int) -> int:
    return max(1, anchors // chunk, min(MIN_CHUNKS, anchors // 5))


def held_out_values(
    critic: nn.Module,
    x: Tensor,
    y: Tensor,
    evaluate: Callable[[Tensor, Tensor], float],
    eval_block: int,
    chunk: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The bound on held-out pairs (see the module, step 4): one value per chunk of anchors, and
    each chunk's number of negatives K (blocks may differ in size by one row)."""
    count = x.shape[0]
    values, negatives = [], []
    with torch.no_grad():
        for block in np.array_split(np.arange(count), max(1, math.ceil(count / eval_block))):
            index = torch.as_tensor(block, device=x.device)
            pos, neg = bounds.split_scores(all_pairs_scores(critic, x[index], y[index]))
            for anchors in np.array_split(np.arange(len(block)), _chunk_count(len(block), chunk)):
                rows = torch.as_tensor(anchors, device=x.device)
                values.append(evaluate(pos[rows], neg[rows]))
                negatives.append(neg.shape[1])
    return np.array(values), np.array(negatives)


def _ceiling_of_mean(evaluator: str, negatives: np.ndarray, options: Mapping[str, float]) -> float | None:
    """The largest value the mean over chunks can take: the mean of the chunks' ceilings
    (log(K_c + 1) for InfoNCE, K_c the chunk's negatives), None for a bound without one."""
    ceilings = [bounds.BOUNDS[evaluator].ceiling(int(k), options) for k in negatives]
    return None if ceilings[0] is None else float(np.mean(ceilings))


def confidence_interval(values: np.ndarray, level: float) -> tuple[float, float, float, float]:
    """(mean, standard error, low, high): the mean of ``values`` with the Student-t interval
    mean +- t_{C-1, (1+level)/2} * std / sqrt(C) over the C values (NaN spread for one value)."""
    mean = float(np.mean(values))
    if len(values) < 2:
        return mean, math.nan, math.nan, math.nan
    stderr = float(np.std(values, ddof=1) / math.sqrt(len(values)))
    half = float(stats.t.ppf(0.5 + level / 2, len(values) - 1)) * stderr
    return mean, stderr, mean - half, mean + half


@dataclass
class Training:
    """What :func:`train_critics` did, per run: the step of the kept critic, its validation value,
    the steps run, and the step at which the run diverged (None if it did not)."""

    best_step: list[int]
    best_value: list[float]
    steps: int
    diverged_step: list[int | None]
    diverged_value: list[float | None]


def _divergence_message(estimator: str, critic: str, step: int, value: float, where: str) -> str:
    advice = "use infonce (capped at log K, never runs away) or smile (bounded variance)"
    if bounds.BOUNDS[estimator].form in ("decoupled", "weighted"):
        advice = "use the bounded cosine critic (critic='cosine') or estimator='infonce'"
    return (
        f"the {estimator} estimate with the {critic} critic ran away {where} at step {step} "
        f"({value:.4g} nats: not finite or beyond {DIVERGENCE_THRESHOLD:g}); {advice}"
    )


def _validation_values(
    stack: StackedCritics, validation: tuple[Tensor, Tensor], evaluate: Callable, settings: Settings
) -> list[float]:
    x_validation, y_validation = validation
    return [
        float(np.mean(held_out_values(critic, x_validation[run], y_validation[run], evaluate,
                                      settings.eval_block, settings.chunk)[0]))
        for run, critic in enumerate(stack.critics())
    ]  # fmt: skip


class _BestWeights:
    """Each run's weights at its best validation value so far, and its patience count."""

    def __init__(self, stack: StackedCritics) -> None:
        self.weights = {name: value.detach().clone() for name, value in stack.named_parameters().items()}
        runs = stack.runs
        self.value, self.step, self.stale = [-math.inf] * runs, [0] * runs, [0] * runs

    def update(
        self, stack: StackedCritics, step: int, values: Sequence[float], active: Sequence[bool]
    ) -> None:
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


def train_critics(
    stack: StackedCritics,
    estimator: str,
    options: Mapping[str, float],
    fit: tuple[Tensor, Tensor],
    validation: tuple[Tensor, Tensor],
    evaluate: Callable[[Tensor, Tensor], float],
    settings: Settings,
    generators: Sequence[torch.Generator],
    progress: Callable[[int, float], None] | None = None,
) -> Training:
    """Train the R critics of ``stack`` with bound ``estimator`` on their fit pairs (x, y of shapes
    (R, n_fit, d)) and leave each at its best validation value (see the module, step 3); a run whose
    training estimate runs away stops there (its :class:`Training` entries say where)."""
    x_fit, y_fit = fit
    runs, n_fit = x_fit.shape[0], x_fit.shape[1]
    device = x_fit.device
    values_of = _training_values(estimator, options)
    state = torch.full((runs,), math.nan, device=device)
    optimiser = torch.optim.Adam(stack.parameters(), lr=settings.lr, fused=True)
    best = _BestWeights(stack)
    diverged: list[int | None] = [None] * runs
    diverged_value: list[float | None] = [None] * runs
    run_index = torch.arange(runs, device=device)[:, None]
    step = 0
    for step in range(1, settings.steps + 1):
        rows = torch.stack(
            [torch.randperm(n_fit, generator=generator)[: settings.batch_size] for generator in generators]
        )
        rows = rows.to(device)
        pos, neg = stack.scores(x_fit[run_index, rows], y_fit[run_index, rows])
        loss, mi, state = values_of(pos, neg, state)
        optimiser.zero_grad(set_to_none=True)
        loss.sum().backward()
        optimiser.step()
        for run, value in enumerate(mi.detach().tolist()):
            if diverged[run] is None and (not math.isfinite(value) or abs(value) > DIVERGENCE_THRESHOLD):
                diverged[run], diverged_value[run] = step, value
        active = [d is None for d in diverged]
        if step % settings.eval_every == 0 or step == settings.steps:
            values = _validation_values(stack, validation, evaluate, settings)
            best.update(stack, step, values, active)
            if progress is not None:
                progress(
                    step, float(np.mean([v for v, a in zip(values, active, strict=True) if a] or [math.nan]))
                )
        if not any(active) or all(
            s >= settings.patience for s, a in zip(best.stale, active, strict=True) if a
        ):
            break
    best.load_into(stack)
    if progress is not None:
        progress(settings.steps, float(np.mean(best.value)))
    return Training(best.step, best.value, step, diverged, diverged_value)


# ----------------------------------------------------------------------------------------------
# the estimators


BOUNDED_CRITICS = ("cosine",)
"""The critics whose scores are bounded (cos / temperature lies in [-1/T, 1/T])."""


def _check_bounded(estimator: str, critic: str) -> None:
    """DCL and DCLW drop the positive from the denominator: with unbounded scores their loss has
    no lower bound and the estimate runs away (+165 nats at 10 true nats in the toy demo)."""
    if bounds.BOUNDS[estimator].form in ("decoupled", "weighted") and critic not in BOUNDED_CRITICS:
        raise checks.ParameterError(
            "critic",
            f"{critic!r} has unbounded scores, with which {estimator}'s loss has no lower bound and its "
            "estimate runs away; use critic='cosine' (scores in [-1/T, 1/T]) or estimator='infonce'",
        )


def _seeded_critics(critic: str, dim_x: int, dim_y: int, settings: Settings, seeds: Sequence[int]) -> list:
    made = []
    for seed in seeds:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            made.append(critics.make_critic(critic, dim_x, dim_y, **settings.critic_options(critic)))
    return made


@dataclass(frozen=True)
class _Request:
    """A checked request for a neural estimate: the bounds, the critic and their options."""

    estimator: str
    critic: str
    evaluator: str
    settings: Settings
    train_options: dict[str, float]
    evaluation_options: dict[str, float]

    @classmethod
    def checked(cls, estimator: str, critic: str, evaluator: str | None, options: Mapping) -> _Request:
        checks.choice("estimator", estimator, bounds.NAMES)
        checks.choice("critic", critic, critics.NAMES)
        evaluator = check_evaluator(estimator, evaluator or estimator)
        _check_bounded(estimator, critic)
        overrides = {key: value for key, value in options.items() if key in Settings.names()}
        own = {key: value for key, value in options.items() if key not in overrides and value is not None}
        used = bounds.BOUNDS[estimator].option_names + bounds.BOUNDS[evaluator].option_names
        for key in own:
            if key not in used:
                accepted = ", ".join(sorted(set(used) | set(Settings.names())))
                raise checks.ParameterError(
                    key, f"is not an option of {estimator}/{evaluator} (options: {accepted})"
                )
        train_options = bounds.BOUNDS[estimator].pick_options(own)
        evaluation_options = bounds.BOUNDS[evaluator].pick_options(own)
        return cls(estimator, critic, evaluator, Settings(**overrides), train_options, evaluation_options)


@dataclass(frozen=True)
class _Parts:
    """R data sets split and standardised: ``x[part]``, ``y[part]`` of shape (R, rows, d) for part
    0 (fit), 1 (validation), 2 (test); the splits; the number of pairs of each data set."""

    x: tuple[Tensor, Tensor, Tensor]
    y: tuple[Tensor, Tensor, Tensor]
    splits: list[Split]
    n_pairs: int


def _prepared_run(x: np.ndarray, y: np.ndarray, split: Split, settings: Settings) -> list[list[np.ndarray]]:
    """One data set's [fit, validation, test] rows of x and of y, prepared (normalised, and in
    canonical coordinates when asked) by maps fitted on its training rows."""
    prepare = PREPARATIONS[settings.normalise]
    prepared = [
        prepare(data[split.train], data[split.fit], data[split.validation], data[split.test])
        for data in (x, y)
    ]
    if settings.canonical:
        map_x, map_y = canonical_maps(prepared[0][0], prepared[1][0])
        prepared = [[part @ map_x.T for part in prepared[0]], [part @ map_y.T for part in prepared[1]]]
    return [parts[1:] for parts in prepared]


def _prepare(
    datasets: Sequence[tuple[object, object]], seeds: Sequence[int], settings: Settings, device: str
) -> _Parts:
    pairs = [as_pairs(x, y) for x, y in datasets]
    if not pairs or len({(x.shape, y.shape) for x, y in pairs}) != 1 or len(seeds) != len(pairs):
        raise checks.ParameterError("datasets", "must be one or more (x, y) of one shape, with one seed each")
    splits = [split_pairs(len(x), settings, seed) for (x, _), seed in zip(pairs, seeds, strict=True)]
    runs = [_prepared_run(x, y, split, settings) for (x, y), split in zip(pairs, splits, strict=True)]

    def stacked(column: int) -> tuple[Tensor, ...]:
        return tuple(
            torch.as_tensor(np.stack([run[column][part] for run in runs]), dtype=torch.float32, device=device)
            for part in range(3)
        )

    return _Parts(stacked(0), stacked(1), splits, len(pairs[0][0]))  # type: ignore[arg-type]


class MeanCritic(nn.Module):
    """The mean score of several critics, f(x, y) = mean_m f_m(x, y): an ensemble. The bounds of
    :mod:`mitool.bounds` are concave in the critic's scores (a linear term minus a log-sum-exp or a
    mean of exponentials; SMILE's clipping is the exception), so their value at the mean critic is
    at least the mean of the members' values."""

    def __init__(self, members: Sequence[nn.Module]) -> None:
        super().__init__()
        self.members = nn.ModuleList(members)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return torch.stack([member(x, y) for member in self.members]).mean(0)


def _run_estimate(
    request: _Request, parts: _Parts, run: int, members: Sequence[int], trained: Sequence[nn.Module],
    training: Training, seconds: float,
) -> Estimate | DivergenceError:  # fmt: skip
    """Data set ``run``'s estimate with the mean of its trained critics (stack rows ``members``) on
    its test pairs, or the DivergenceError of a critic that ran away in training or of the estimate
    on the held-out pairs."""
    settings = request.settings
    for member in members:
        if training.diverged_step[member] is not None:
            step, value = training.diverged_step[member], training.diverged_value[member]
            message = _divergence_message(request.estimator, request.critic, step, value, "in training")
            return DivergenceError(message)
    critic = trained[members[0]] if len(members) == 1 else MeanCritic([trained[m] for m in members])
    evaluate = _mi_of(request.evaluator, request.evaluation_options)
    values, negatives = held_out_values(
        critic, parts.x[2][run], parts.y[2][run], evaluate, settings.eval_block, settings.chunk
    )
    bad = ~np.isfinite(values) | (np.abs(values) > DIVERGENCE_THRESHOLD)
    if bad.any():
        message = _divergence_message(
            request.estimator, request.critic, training.steps, values[bad][0], "on held-out pairs"
        )
        return DivergenceError(message)
    mean, stderr, low, high = confidence_interval(values, settings.level)
    ceiling = _ceiling_of_mean(request.evaluator, negatives, request.evaluation_options)
    split = parts.splits[run]
    return Estimate(
        value=mean, stderr=stderr, ci_low=low, ci_high=high, ci_level=settings.level,
        interval=f"Student-t interval over {len(values)} chunks of held-out anchors (noise of the "
        "held-out evaluation of this critic; not retraining, not the bound's bias)",
        estimator=request.estimator, evaluator=request.evaluator, critic=request.critic,
        n_pairs=parts.n_pairs, n_fit=len(split.fit), n_validation=len(split.validation),
        n_test=len(split.test), negatives_train=settings.batch_size - 1, negatives_test=int(negatives.min()),
        steps=training.steps, best_step=max(training.best_step[m] for m in members), ceiling=ceiling,
        at_ceiling=ceiling is not None and mean >= ceiling - CEILING_MARGIN, seconds=seconds,
    )  # fmt: skip


def _member_seed(seed: int, member: int) -> int:
    """The seed of critic ``member`` of a data set's ensemble: the data set's own seed for the first."""
    return seed if member == 0 else int(np.random.SeedSequence([seed, member]).generate_state(1)[0])


def estimate_runs(
    datasets: Sequence[tuple[object, object]],
    estimator: str = DEFAULT_ESTIMATOR,
    critic: str = DEFAULT_CRITIC,
    evaluator: str | None = None,
    seeds: Sequence[int] | None = None,
    device: str = "cpu",
    progress: Callable[[int, float], None] | None = None,
    **options: object,
) -> list[Estimate | DivergenceError]:
    """:func:`estimate` of R data sets of one shape (R seeds of a benchmark task) with their R
    critics trained together as one model; ``seeds`` (default 0..R-1) fix each run's split,
    initial weights and batches. A run that ran away gives its :class:`DivergenceError` in place
    of an Estimate."""
    start = time.perf_counter()
    request = _Request.checked(estimator, critic, evaluator, options)
    seeds = list(range(len(datasets))) if seeds is None else list(seeds)
    parts = _prepare(datasets, seeds, request.settings, device)
    members = request.settings.ensemble
    member_seeds = [_member_seed(seed, member) for seed in seeds for member in range(members)]
    x_parts, y_parts = (
        [part.repeat_interleave(members, dim=0) for part in data] for data in (parts.x, parts.y)
    )
    dim_x, dim_y = parts.x[0].shape[-1], parts.y[0].shape[-1]
    made = _seeded_critics(critic, dim_x, dim_y, request.settings, member_seeds)
    stack = StackedCritics([c.to(device) for c in made])
    training = train_critics(
        stack, estimator, request.train_options, (x_parts[0], y_parts[0]), (x_parts[1], y_parts[1]),
        _mi_of(request.evaluator, request.evaluation_options), request.settings,
        [torch.Generator().manual_seed(seed) for seed in member_seeds], progress,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    trained = stack.critics()
    return [
        _run_estimate(
            request, parts, run, range(run * members, (run + 1) * members), trained, training, seconds
        )
        for run in range(len(seeds))
    ]


def _baseline_estimate(
    name: str, x: np.ndarray, y: np.ndarray, seed: int, level: float, **options
) -> Estimate:
    start = time.perf_counter()
    result = baselines.estimate_baseline(name, x, y, seed=seed, **options)
    half = float(stats.norm.ppf(0.5 + level / 2)) * result.stderr
    return Estimate(
        value=result.value, stderr=result.stderr, ci_low=result.value - half, ci_high=result.value + half,
        ci_level=level,
        interval=f"normal interval from {result.subsets} disjoint subsets (sampling noise of the pairs; "
        "not the estimator's bias)",
        estimator=name, evaluator=None, critic=None, n_pairs=len(x), n_fit=0, n_validation=0, n_test=len(x),
        negatives_train=None, negatives_test=None, steps=0, best_step=0, ceiling=None, at_ceiling=False,
        seconds=time.perf_counter() - start,
    )  # fmt: skip


def estimate(
    x: object,
    y: object,
    estimator: str = DEFAULT_ESTIMATOR,
    critic: str = DEFAULT_CRITIC,
    evaluator: str | None = None,
    seed: int = 0,
    device: str = "cpu",
    progress: Callable[[int, float], None] | None = None,
    **options: object,
) -> Estimate:
    """I(X; Y) in nats from paired samples x (n, dx) and y (n, dy) (numpy arrays, tensors or
    nested lists; row i of x goes with row i of y).

    estimator: a bound of :data:`mitool.bounds.NAMES` (a critic is trained with it) or a baseline,
    "ksg" or "gaussian". critic: :data:`mitool.critics.NAMES`. evaluator: the bound scored on the
    held-out pairs (default: the estimator; only those of
    ``mitool.bounds.evaluators_for(estimator)``). seed: the split, initial weights and batches.
    options: any field of :class:`Settings` (steps=500, batch_size=64, ...), the bound's options
    (alpha for eqco, clip for smile, ...) or the baseline's (k for ksg). ``progress(step, value)``
    is called after each validation score. Raises ParameterError for bad input and
    DivergenceError when the estimate runs away.
    """
    checks.choice("estimator", estimator, ESTIMATORS)
    if estimator in baselines.BASELINES:
        x_array, y_array = as_pairs(x, y)
        level = options.pop("level", Settings.level)
        return _baseline_estimate(
            estimator, x_array, y_array, seed, checks.fraction("level", level), **options
        )
    (result,) = estimate_runs([(x, y)], estimator, critic, evaluator, [seed], device, progress, **options)
    if isinstance(result, DivergenceError):
        raise result
    return result
