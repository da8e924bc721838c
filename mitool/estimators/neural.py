"""The neural estimators: a critic trained with one of the bounds of :mod:`mitool.bounds`, its
value on pairs it never saw. One estimator per bound, named after it (``infonce``, ``smile``, ...;
the classes :class:`InfoNCE`, :class:`SMILE`, ...).

An estimate is made in five steps:

1. :func:`mitool.estimators.preparation.split_pairs`: the pairs are shuffled and cut into a fit
   part (the critic trains on it), a validation part (it chooses the critic's step; at most 16384
   pairs) and a test part (it gives the estimate), by ``validation_fraction`` of the training
   pairs and ``test_fraction`` of all pairs; or, with ``folds`` = k, cross-fitting: k splits, each
   scored on one fold by critics trained on the others.
2. ``normalise``: each coordinate is replaced by the normal score of its rank among the training
   pairs (``"rank"``, the default) or by its z-score (``"standard"``), maps fitted on the training
   rows; both are increasing per coordinate, so the MI does not change. ``"auto"`` makes the
   estimate under both, on the same splits (their critics trained together, as one model), and
   keeps rank scores unless z-scores' critics score higher on the validation pairs by more than
   :data:`AUTO_MARGIN` standard errors: rank scores suit
   heavy tails (Student-t), z-scores keep the scale that carries the dependence in a scale mixture
   (bmi's concentric Gaussians). Each validation value is the best of many scores kept by early
   stopping, and the noisier critic can win it by a little and then fail on the test pairs: hence
   the margin, and the default's ``auto`` from 3000 pairs only (:data:`mitool.estimators.DEFAULTS`).
3. ``base``: the log density ratio of the Gaussian fitted to the training rows (in canonical
   coordinates, kept to the rank r, the number of canonical pairs, and to the share w of related
   pairs, the rest independent, whose validation InfoNCE is highest; with ``shrink_base``, also to
   the shrinkage of regularised CCA: :func:`mitool.critics.gaussian.fit_gaussian_critics`) is the
   critic's start, and the network, which starts at zero, learns the correction:
   f(x, y) = f_Gauss(x, y) + g(x) . h(y). With ``base="mixed"`` the ensemble's members alternate:
   the first on the base, the second alone (its base the zero critic), and so on, since a base
   fitted to a dependence it cannot express can hold the network back (bmi's spirals).
4. :func:`mitool.estimators.critic_training.train_critics`: ``ensemble`` critics per data set
   (other initial weights and batches; the estimate scores their mean, or with ``base="mixed"``
   the mean or one member, whichever scores highest on the validation pairs), Adam on the bound's
   loss, kept at their best validation value, stopped after ``patience`` scores without improvement.
   With ``radial``, the Gaussian critic on the radial features phi(x) = [x, x c, ..., x c^t]
   (c = |x|^2/d - 1, t of 1 .. ``radial_terms`` as its validation value says) is a second
   candidate, kept instead where its validation value is higher (an InfoNCE value on held-out
   pairs is a lower bound up to noise, so the higher is the tighter).
5. :func:`mitool.estimators.critic_training.held_out_values`: the test pairs in blocks of at most
   ``eval_block`` (each anchor scored against the other rows of its block, K = block - 1), the
   anchors in chunks of about ``chunk``; the evaluation bound on chunk c gives e_c, the estimate is
   mean_c(e_c); with ``extrapolate_negatives`` (the default's below 3000 pairs, where cross-fitted
   blocks of 200 give K = 199), e_c = 2 e_c(K) - e_c(K'), each anchor also scored against its own
   half of the block (K' + 1 = (K + 1) / 2): Richardson's rule, which cancels the c / (K + 1) by
   which the InfoNCE family's value for a fixed critic falls short of its limit in K. The interval
   (:func:`_interval`): over the chunks (the noise of the held-out evaluation), with the spread of
   the ensemble's critics added (the noise of training), or over the folds; never the bound's own
   bias (InfoNCE's cap, for one).

On bmi's 40 tasks (docs/mi-benchmark.md) these steps took the mean absolute error of a 256-wide ReLU
critic from 0.118 (2 seeds) to 0.041 (2 seeds; 0.039 with 5) at n = 5000.

Which bound may evaluate a critic trained with which (``evaluator``): training with bound A drives
the critic to A's optimum (:attr:`mitool.bounds.Bound.critic_optimum`); only the bounds tight there
(:func:`mitool.bounds.evaluators_for`) give a sensible value: a critic trained with infonce is
optimal only up to a function c(x) of the anchor, which the InfoNCE family ignores and NWJ does not
(NWJ on an InfoNCE critic gave -4.4e19). An ``evaluator`` outside that list is refused.

InfoNCE-type values cannot exceed log(K + 1) (EqCo: log(alpha + 1)); an estimate within
:data:`CEILING_MARGIN` of its ceiling is flagged ``at_ceiling``: it is a lower bound at its
ceiling, and the MI may be far larger.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, make_dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from mitool import bounds, checks, critics
from mitool.bounds import DEFAULT_ALPHA
from mitool.critics.gaussian import canonical_maps, fit_gaussian_critics
from mitool.estimators.base import (
    UNCAPPED_ADVICE,
    DivergenceError,
    Estimate,
    Estimator,
    Progress,
    normal_interval,
    standard_errors_above_zero,
)
from mitool.estimators.neural_settings import (
    AUTO_MARGIN,
    AUTO_PREPARATIONS,
    AUTO_SAME,
    BOUNDED_CRITICS,
    NeuralSettings,
    _check_bounded,
    _on_base,
    _option_field,
    _option_names,
    _uses_base,
    check_evaluator,
)
from mitool.estimators.preparation import (
    PREPARATIONS,
    Split,
    fold_sizes,
    fold_splits,
    part_sizes,
    split_pairs,
)

if TYPE_CHECKING:
    from mitool.estimators.critic_training import Training

__all__ = [
    "BOUNDED_CRITICS",
    "CEILING_MARGIN",
    "DCL",
    "DCLW",
    "DEFAULT_ALPHA",
    "DV",
    "JS",
    "MINE",
    "NWJ",
    "SMILE",
    "EqCo",
    "InfoNCE",
    "NeuralEstimator",
    "NeuralSettings",
    "check_evaluator",
]

CEILING_MARGIN = 0.05
"""An InfoNCE-type estimate within this many nats of its ceiling is reported as at the ceiling."""

SATURATION_GAP = 3.0
"""An InfoNCE-type estimate above its ceiling minus this many nats falls measurably short of the MI
and is reported as a lower bound (its interval open above). Where the shortfall starts, measured
with the default (``infonce``, two critics, K = 1023 held-out negatives, ceiling 6.91) on correlated
Gaussians, n = 10 000: 5 x 5, truth 3 -> 2.97, 4 -> 3.89, 5 -> 4.73, 6 -> 5.46; 20 x 20, 3 -> 2.96,
4 -> 3.84, 5 -> 4.61, 6 -> 5.26 (docs/mi-benchmark.md, "Strong dependence")."""


def _divergence_message(bound: str, critic: str, step: int, value: float, where: str) -> str:
    advice = "use infonce (capped at log K, never runs away) or smile (bounded variance)"
    if bounds.BOUNDS[bound].form in ("decoupled", "weighted"):
        advice = "use the bounded cosine critic (critic='cosine') or estimator='infonce'"
    return (
        f"the {bound} estimate with the {critic} critic ran away {where} at step {step} "
        f"({value:.4g} nats: not finite or beyond {bounds.DIVERGENCE_THRESHOLD:g}); {advice}"
    )


def _member_seed(seed: int, member: int) -> int:
    """The seed of critic ``member`` of a data set's ensemble: the data set's own seed for the first."""
    return seed if member == 0 else int(np.random.SeedSequence([seed, member]).generate_state(1)[0])


def _held_out(
    runs: _Runs, settings: NeuralSettings, evaluate: Callable, critic: Any, run: int,
    pairs: list | None = None,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The critic's chunk values and negatives on run ``run``'s test pairs, or on ``pairs`` (the
    validation pairs, never extrapolated: they are compared with the values kept in training)."""
    from mitool.estimators import critic_training

    extrapolate = settings.extrapolate_negatives and pairs is None
    return critic_training.held_out_values(
        critic, *(pairs or runs.test)[run], evaluate, settings.eval_block, settings.chunk, extrapolate
    )


def _mean_critic(critics: Sequence[Any], members: list[int]) -> Any:
    """The mean critic of these members (the member itself where there is one)."""
    from mitool.estimators import critic_training

    return critics[members[0]] if len(members) == 1 else critic_training.MeanCritic(
        [critics[m] for m in members]
    )  # fmt: skip


def _kept_of_split(
    members: list[int], critics: Sequence[Any], runs: _Runs, base: str, held_out: Callable
) -> tuple[Any, str, np.ndarray | None]:
    """The split's critic: its members' mean; with base="mixed" (members of two kinds, either of which
    may be much the worse) the mean or one member, the highest on the validation pairs (each member's
    value is its kept one, ``runs.kept_values``), with the mean's chunk values there where they were
    computed to choose it (else None); and which, "mean" or "member m"."""
    mean = _mean_critic(critics, members)
    if len(members) == 1 or base != "mixed":
        return mean, "mean", None
    mean_chunks = held_out(mean, members[0], runs.validation)[0]
    best = int(np.argmax([runs.kept_values[m] for m in members]))
    if np.mean(mean_chunks) >= runs.kept_values[members[best]]:
        return mean, "mean", mean_chunks
    return critics[members[best]], f"member {best}", None


class NeuralEstimator(Estimator):
    """A critic trained with the bound :attr:`bound` and scored on held-out pairs (see the module).
    One subclass per bound, made from the table of bounds (:data:`ESTIMATORS`)."""

    bound: str = "infonce"
    cases = frozenset({"continuous", "low-dimension", "surface"})
    Settings = NeuralSettings
    rank = 0
    trains_together = True

    def __init__(self, **settings: object) -> None:
        super().__init__(**settings)
        chosen = self.settings
        self.evaluator = check_evaluator(self.bound, chosen.evaluator or self.bound)
        _check_bounded(self.bound, chosen.critic)
        if chosen.base in ("gaussian", "mixed") and chosen.critic in BOUNDED_CRITICS:
            raise checks.ParameterError(
                "base", f"{chosen.base} needs a critic that can start at a zero score, not "
                f"{chosen.critic!r}; use base='none' with it, or another critic",
            )  # fmt: skip
        if chosen.extrapolate_negatives and not bounds.BOUNDS[self.evaluator].infonce_family:
            raise checks.ParameterError(
                "extrapolate_negatives", f"applies to the InfoNCE family's evaluators only ("
                f"{', '.join(name for name, bound in bounds.BOUNDS.items() if bound.infonce_family)}), not "
                f"{self.evaluator!r}",
            )  # fmt: skip
        given = {name: getattr(chosen, name) for name in _option_names(self.bound)}
        self.train_options = bounds.BOUNDS[self.bound].pick_options(given)
        self.evaluation_options = bounds.BOUNDS[self.evaluator].pick_options(given)

    def minimum_pairs(self, dim_x: int, dim_y: int, dim_z: int = 0) -> int:
        """The fewest pairs for which every split (the one split, or each of the ``folds``) leaves a
        full training batch, two validation pairs and two test pairs."""
        n = self.settings.batch_size
        while not self._sizes_work(n):
            n += 1
        return n

    def _sizes_work(self, n: int) -> bool:
        settings = self.settings
        if settings.folds >= 2:
            sizes = fold_sizes(n, settings.folds, settings.validation_fraction)
        else:
            sizes = [part_sizes(n, settings.test_fraction, settings.validation_fraction)]
        return bool(sizes) and all(
            n_fit >= settings.batch_size and n_validation >= 2 and n_test >= 2
            for n_fit, n_validation, n_test in sizes
        )

    def _check_size(self, rows: tuple[np.ndarray, ...]) -> None:
        n, settings = len(rows[0]), self.settings
        if not self._sizes_work(n):
            held_out = f"{100 * settings.test_fraction:g}% held out for the estimate"
            if settings.folds >= 2:
                held_out = f"{settings.folds} cross-fitting folds (each trained on the others)"
            validation = f"{100 * settings.validation_fraction:g}% of the training pairs for early stopping"
            raise checks.TooFewSamples(
                "x",
                f"has too few samples ({n}; at least {self.minimum_pairs(1, 1)} for a training batch of "
                f"{settings.batch_size} pairs with {held_out} and {validation})",
            )

    def _estimate(self, x, y, z, seed, progress) -> Estimate:
        (result,) = self._estimate_many([(x, y, z)], [seed], progress)
        if isinstance(result, DivergenceError):
            raise result
        return result

    def _estimate_many(
        self, rows: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]], seeds: list[int],
        progress: Progress | None, chunks_on_validation: bool = False,
        preparations: Sequence[str] | None = None,
    ) -> list[Estimate | DivergenceError]:  # fmt: skip
        """The estimates of R data sets of one shape (z is not used), their critics trained together
        as one model, each data set's stopping as it would alone; ``seeds`` fix each data set's
        split, initial weights and batches, ``preparations`` its ``normalise`` (default: the
        setting's). With ``chunks_on_validation``, each estimate's ``details["validation_chunks"]``:
        its kept critics' chunk values on its validation pairs (as on the test pairs), for a paired
        comparison."""
        from mitool.estimators import critic_training as training

        settings = self.settings
        if preparations is None and settings.normalise == "auto":
            return self._kept_by_validation(rows, seeds, progress)
        preparations = list(preparations or [settings.normalise] * len(rows))
        runs = _Runs.prepared([(x, y) for x, y, _ in rows], seeds, settings, preparations)
        stack = _stacked_critics(settings, runs.dims, runs.member_seeds, start_at_zero=runs.base is not None)
        schedule = training.Schedule(
            settings.steps, settings.batch_size, settings.lr, settings.eval_every, settings.patience,
            settings.eval_block, settings.chunk, weight_decay=settings.weight_decay,
            input_noise=settings.input_noise, max_seconds=settings.max_seconds,
        )  # fmt: skip
        evaluate = training.mi_of(self.evaluator, self.evaluation_options)
        result = training.train_critics(
            stack, self.bound, self.train_options, runs.fit, runs.validation, evaluate, schedule,
            _generators(runs.member_seeds), progress, runs.base, runs.dataset_of_run(),
        )  # fmt: skip
        critics = runs.chosen_critics(
            training.run_critics(stack, runs.base), result.best_value,
            partial(training.validation_values, evaluate=evaluate, schedule=schedule),
        )  # fmt: skip
        return [
            self._one_estimate(runs, dataset, critics, result, chunks_on_validation)
            for dataset in range(len(rows))
        ]

    def _kept_by_validation(
        self, rows: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]], seeds: list[int],
        progress: Progress | None,
    ) -> list[Estimate | DivergenceError]:  # fmt: skip
        """``normalise="auto"``: the estimates under each of :data:`AUTO_PREPARATIONS`, on the same
        splits (every preparation of every data set trained together, each stopping as it would
        alone: the same estimates as one at a time, in about the time of the longest), each data
        set keeping rank scores unless another preparation's kept critics score higher on its
        validation pairs by more than :data:`AUTO_MARGIN` standard errors of the paired
        difference of their chunk values (an InfoNCE-type value on held-out pairs is a lower bound up
        to noise: the higher is the tighter; the test pairs play no part in the choice). Where the
        preparations barely differ (:data:`AUTO_SAME`), rank scores alone."""
        names = AUTO_PREPARATIONS if _preparations_differ(rows) else AUTO_PREPARATIONS[:1]
        results = self._estimate_many(
            [row for row in rows for _ in names], [seed for seed in seeds for _ in names], progress,
            chunks_on_validation=True, preparations=[name for _ in rows for name in names],
        )  # fmt: skip
        return [
            _kept_preparation(dict(zip(names, results[first : first + len(names)], strict=True)))
            for first in range(0, len(results), len(names))
        ]

    def _one_estimate(
        self, runs: _Runs, dataset: int, critics: Sequence[Any], training: Training,
        chunks_on_validation: bool = False,
    ) -> Estimate | DivergenceError:  # fmt: skip
        """Data set ``dataset``'s estimate: on each of its splits the mean of the split's trained critics
        scored on its test pairs; or the DivergenceError of a critic that ran away in training or of
        the estimate on the held-out pairs."""
        from mitool.estimators import critic_training

        indices = runs.of_dataset(dataset)
        diverged = self._diverged_in_training(indices, training)
        if diverged is not None:
            return diverged
        evaluate = critic_training.mi_of(self.evaluator, self.evaluation_options)
        held_out = partial(_held_out, runs, self.settings, evaluate)
        kept = [_kept_of_split(members, critics, runs, self.settings.base, held_out) for members in indices]
        scored = [held_out(critic, members[0]) for (critic, *_), members in zip(kept, indices, strict=True)]
        member_values = [[float(np.mean(held_out(critics[m], m)[0])) for m in members]
                         for members in indices if len(members) > 1]  # fmt: skip
        diverged = self._diverged_on_held_out(scored, indices, training)
        if diverged is not None:
            return diverged
        ensemble_kept = [name for _, name, _ in kept]
        result = self._assembled(runs, dataset, scored, member_values, training, ensemble_kept)
        if not chunks_on_validation:
            return result
        chunks = [held_out(critic, members[0], runs.validation)[0] if chunks is None else chunks
                  for (critic, _, chunks), members in zip(kept, indices, strict=True)]  # fmt: skip
        return result.with_notes(validation_chunks=np.concatenate(chunks))

    def _diverged_in_training(self, indices: list[list[int]], training: Training) -> DivergenceError | None:
        """The DivergenceError of the first of these runs that ran away in training, else None."""
        for index in (i for split in indices for i in split):
            if training.diverged_step[index] is not None:
                step, value = training.diverged_step[index], training.diverged_value[index]
                return DivergenceError(
                    _divergence_message(self.bound, self.settings.critic, step, value, "in training")
                )
        return None

    def _diverged_on_held_out(
        self, scored: list[tuple[np.ndarray, np.ndarray]], indices: list[list[int]], training: Training
    ) -> DivergenceError | None:
        """The DivergenceError of a split's held-out value that ran away (``scored``), else None."""
        values = np.concatenate([value for value, _ in scored])
        bad = ~np.isfinite(values) | (np.abs(values) > bounds.DIVERGENCE_THRESHOLD)
        if not bad.any():
            return None
        message = _divergence_message(
            self.bound,
            self.settings.critic,
            max(training.steps[i] for split in indices for i in split),
            values[bad][0],
            "on held-out pairs",
        )
        return DivergenceError(message)

    def _assembled(
        self, runs: _Runs, dataset: int, scored: list[tuple[np.ndarray, np.ndarray]],
        member_values: list[list[float]], training: Training, ensemble_kept: list[str],
    ) -> Estimate:  # fmt: skip
        """The Estimate from each split's chunk values (see :func:`_interval`); ``ensemble_kept``: each
        split's critic, its members' "mean" or "member m"."""
        settings = self.settings
        folds = len(scored)
        mean, stderr, degrees, interval = _interval(scored, member_values)
        ceilings = [
            _ceiling_of_mean(self.evaluator, k, self.evaluation_options, settings.extrapolate_negatives)
            for _, k in scored
        ]
        ceiling = None if ceilings[0] is None else float(np.mean(ceilings))
        at_ceiling = ceiling is not None and mean >= ceiling - CEILING_MARGIN
        saturating = ceiling is not None and mean >= ceiling - SATURATION_GAP
        splits = runs.splits[dataset]
        indices = [i for split in runs.of_dataset(dataset) for i in split]
        details = {
            "critic": settings.critic, "evaluator": self.evaluator, "folds": folds,
            "n_fit": len(splits[0].fit), "n_validation": len(splits[0].validation),
            "n_test": sum(len(split.test) for split in splits),
            "negatives_train": settings.batch_size - 1,
            "negatives_test": int(min(negatives.min() for _, negatives in scored)),
            "negatives_extrapolated": settings.extrapolate_negatives,
            "steps": max(training.steps[i] for i in indices),
            "best_step": max(training.best_step[i] for i in indices),
            "base": "mixed" if settings.base == "mixed" else "gaussian" if runs.base is not None else "none",
            "kept": [runs.kept[i] for i in indices], "ensemble_kept": ensemble_kept,
            "normalise": runs.preparations[dataset],
            "validation_value": float(np.mean([runs.kept_values[i] for i in indices])),
            "ceiling": ceiling, "at_ceiling": at_ceiling, "saturating": saturating,
        }  # fmt: skip
        notes = (
            (_ceiling_note(self.evaluator, ceiling, at_ceiling, settings.extrapolate_negatives),)
            if saturating
            else ()
        )
        details["ended_by"] = sorted({training.ended_by[i] for i in indices})
        notes += _still_rising(training, indices, settings)
        if bounds.BOUNDS[self.evaluator].lower_bound and not settings.extrapolate_negatives:
            lowest = normal_interval(mean, stderr, 2 * settings.level - 1, degrees)[0]
            details["lower_confidence_bound"] = lowest
            notes += (f"a one-sided {settings.level:.0%} lower confidence bound on the MI: {lowest:.4f} nats "
                      f"(the held-out {self.evaluator} value, a lower bound of the MI for any fixed critic, "
                      f"less its standard error times Student's t {settings.level:.0%} point)",)  # fmt: skip
        result = Estimate.from_stderr(
            mean, stderr, settings.level, degrees, interval=interval, estimator=self.name,
            n_pairs=runs.n_pairs, notes=notes, details=details,
        )  # fmt: skip
        if saturating:
            return result.as_lower_bound(f"{self.evaluator} cannot exceed its ceiling of {ceiling:.4f} nats")
        return result


def _still_rising(training: Training, runs: Sequence[int], settings: NeuralSettings) -> tuple[str, ...]:
    """A note where a run's training ended at its cap of steps or its time budget with its best
    held-out value at the last score: the critic was still improving, so the estimate may be low."""
    cut = [run for run in runs if training.ended_by[run] in ("steps", "seconds")
           and training.best_step[run] > training.steps[run] - settings.eval_every]  # fmt: skip
    if not cut:
        return ()
    limits = {"steps": f"its cap of {settings.steps} steps", "seconds": f"its {settings.max_seconds:g} s"}
    limit = " or ".join(sorted({limits[training.ended_by[run]] for run in cut}))
    return (f"training ended at {limit} while the held-out value was still rising (its best at the "
            "last score): the estimate may be low; more steps= or max_seconds= may raise it",)  # fmt: skip


def _interval(
    scored: list[tuple[np.ndarray, np.ndarray]], member_values: list[list[float]]
) -> tuple[float, float, float, str]:
    """(mean, stderr, the degrees of freedom of its Student-t interval, what the interval covers)
    from each split's chunk values:

    * folds: the mean of the folds' means, and the Student-t interval over the folds (their
      critics differ, so training noise is in it);
    * one split, an ensemble of M critics: the mean critic's value, with the standard error
      sqrt(s_e^2 + s_m^2 / M) of the held-out evaluation (s_e, over the chunks of anchors) and of
      training (s_m, the spread of the M members' own values), and Student's t interval with the
      Welch-Satterthwaite degrees of freedom of that sum (M - 1 = 1 for the spread of two critics:
      the interval is wide when training noise dominates, as it must be with so few critics);
    * one split, one critic: the Student-t interval over the chunks (evaluation noise alone)."""
    from mitool.estimators.base import mean_and_stderr, satterthwaite

    if len(scored) > 1:
        mean, stderr = mean_and_stderr(np.array([np.mean(v) for v, _ in scored]))
        return mean, stderr, len(scored) - 1, (
            f"Student-t interval over the {len(scored)} folds, each scored by critics trained on the other "
            "folds (the noise of training and of the held-out evaluation; not the bound's bias)"
        )  # fmt: skip
    chunks = scored[0][0]
    mean, stderr = mean_and_stderr(chunks)
    if member_values:
        members = np.array(member_values[0])
        variances = [stderr**2, members.var(ddof=1) / len(members)]
        stderr = math.sqrt(sum(variances))
        degrees = satterthwaite(variances, [len(chunks) - 1, len(members) - 1])
        return mean, stderr, degrees, (
            f"Student-t interval ({degrees:.1f} degrees of freedom) from the noise of the held-out "
            f"evaluation ({len(chunks)} chunks of anchors) and of training (the spread of the "
            f"{len(members)} critics of the ensemble); not the bound's bias"
        )  # fmt: skip
    if len(chunks) < 2:
        return mean, stderr, math.inf, "none: too few held-out pairs for two chunks of anchors"
    return mean, stderr, len(chunks) - 1, (
        f"Student-t interval over {len(chunks)} chunks of held-out anchors (noise of the held-out "
        "evaluation of this critic; not retraining, not the bound's bias)"
    )  # fmt: skip


def _ceiling_note(evaluator: str, ceiling: float, at_ceiling: bool, extrapolated: bool = False) -> str:
    formula = "2 log(K + 1) - log(K' + 1), extrapolated in K"
    if not extrapolated:
        formula = "log(K + 1); eqco: log(alpha + 1)"
    where = (
        f"within {CEILING_MARGIN} of it, so this is a lower bound at its ceiling"
        if at_ceiling
        else f"within {SATURATION_GAP:g} nats of it, where such values fall short of the MI, so this is a "
        "lower bound"
    )
    return (
        f"{'at the ceiling' if at_ceiling else 'near the ceiling'}: {evaluator} cannot exceed {ceiling:.4f} "
        f"nats ({formula}) and this is {where}; the MI may be much larger: "
        f"{UNCAPPED_ADVICE}"
    )


def _ceiling_of_mean(
    evaluator: str, negatives: np.ndarray, options: dict[str, float], extrapolated: bool = False
) -> float | None:
    """The largest value the mean over chunks can take: the mean of the chunks' ceilings
    (log(K_c + 1) for InfoNCE, K_c the chunk's negatives), None for a bound without one. Extrapolated
    (:func:`mitool.estimators.critic_training.held_out_values`), an anchor's value 2 I_K - I_K' is at
    most 2 c(K) - c(K'): for InfoNCE, with A and B the sums of e^{f(x, y_j) - f(x, y)} over the
    negatives of its own half and of the other, it is 2 c(K) - c(K') - 2 log(1 + A + B) + log(1 + A)
    (K' + 1 = (K + 1) // 2, the smaller half, whose lower ceiling makes this the larger bound)."""
    bound = bounds.BOUNDS[evaluator]

    def ceiling(k: int) -> float | None:
        if not extrapolated or k + 1 < 4:
            return bound.ceiling(k, options)
        full, half = bound.ceiling(k, options), bound.ceiling((k + 1) // 2 - 1, options)
        return None if full is None else 2 * full - half

    ceilings = [ceiling(int(k)) for k in negatives]
    return None if ceilings[0] is None else float(np.mean(ceilings))


def _generators(seeds: Sequence[int]) -> list[Any]:
    import torch

    return [torch.Generator().manual_seed(seed) for seed in seeds]


def _stacked_critics(
    settings: NeuralSettings, dims: tuple[int, int], seeds: Sequence[int], start_at_zero: bool
) -> Any:
    """R critics, critic r initialised from a generator seeded with ``seeds[r]``
    (:func:`mitool._infra.seeding.seeded`; its output layer zero when ``start_at_zero``: it corrects a base
    critic), stacked on the device."""
    from mitool._infra.seeding import seeded
    from mitool.stacked import StackedCritics

    made = []
    options = critics.pick_options(settings.critic, vars(settings))
    for seed in seeds:
        with seeded(seed):
            critic = critics.make_critic(settings.critic, *dims, **options)
        made.append((critic.start_at_zero() if start_at_zero else critic).to(settings.device))
    return StackedCritics(made)


@dataclass
class _Runs:
    """The runs of an estimate: for each data set its splits (one, or the folds), for each split
    ``ensemble`` members; run r's prepared fit rows (stacked, padded), validation and test rows, its
    seed, and its Gaussian base (and what of it was kept) when there is one. ``base_ranks`` and
    ``radial_ranks``: each run's Gaussian critic's rank, the canonical pairs it keeps
    (:mod:`mitool.critics.gaussian`)."""

    fit: Any
    validation: list[tuple[Any, Any]]
    test: list[tuple[Any, Any]]
    splits: list[list[Split]]
    member_seeds: list[int]
    members: int
    n_pairs: int
    dims: tuple[int, int]
    base: Any = None
    base_ranks: list[int] = field(default_factory=list)
    radial: Any = None
    radial_ranks: list[int] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    kept_values: list[float] = field(default_factory=list)
    preparations: list[str] = field(default_factory=list)

    def chosen_critics(
        self, trained: Sequence[Any], trained_values: Sequence[float], score: Callable
    ) -> list[Any]:
        """Each run's critic: the trained one (on its base, ``trained_values`` on the validation pairs),
        or the Gaussian critic on the radial features where ``score`` (critics, validation pairs ->
        values) gives it more; ``kept`` says which, ``kept_values`` its validation value."""
        radial = [] if self.radial is None else [self.radial.run(run) for run in range(len(trained))]
        radial_values = score(radial, self.validation) if radial else []
        chosen, self.kept = [], []
        self.kept_values = [
            max(value, radial_values[run]) if radial else value for run, value in enumerate(trained_values)
        ]
        for run, critic in enumerate(trained):
            if radial and radial_values[run] > trained_values[run]:
                chosen.append(radial[run])
                terms = int(self.radial.terms[run])
                self.kept.append(
                    f"the gaussian critic on radial features{'' if terms == 1 else f' to c^{terms}'}, "
                    f"rank {self.radial_ranks[run]}"
                    f"{_related_words(self.radial, run)}"
                )
            else:
                chosen.append(critic)
                based = (
                    f"on the gaussian base of rank {self.base_ranks[run]}{_related_words(self.base, run)}"
                    if self.base is not None and self.base_ranks[run] > 0
                    else "alone"
                )
                self.kept.append(f"the network {based}")
        return chosen

    def dataset_of_run(self) -> list[int]:
        """Each run's data set."""
        per_dataset = len(self.splits[0]) * self.members
        return [run // per_dataset for run in range(len(self.member_seeds))]

    def of_dataset(self, dataset: int) -> list[list[int]]:
        """Data set ``dataset``'s runs, one list of member runs per split."""
        per_split = len(self.splits[0])
        first = dataset * per_split * self.members
        return [[first + split * self.members + member for member in range(self.members)]
                for split in range(per_split)]  # fmt: skip

    @classmethod
    def prepared(
        cls, rows: Sequence[tuple[np.ndarray, np.ndarray]], seeds: Sequence[int], settings: NeuralSettings,
        preparations: Sequence[str],
    ) -> _Runs:  # fmt: skip
        import torch

        from mitool.estimators.critic_training import FitRows

        splits = [_splits(len(x), settings, seed) for (x, _), seed in zip(rows, seeds, strict=True)]
        prepared, member_seeds = [], []
        for (x, y), own, seed, preparation in zip(rows, splits, seeds, preparations, strict=True):
            for number, split in enumerate(own):
                parts = _prepared_run(x, y, split, settings, preparation)
                for member in range(settings.ensemble):
                    prepared.append(parts)
                    member_seeds.append(_member_seed(_member_seed(seed, number), member))

        def tensor(array: np.ndarray) -> Any:
            return torch.as_tensor(array, dtype=torch.float32, device=settings.device)

        longest = max(len(parts[0][0]) for parts in prepared)
        padded = [np.stack([_padded(parts[side][0], longest) for parts in prepared])
                  for side in (0, 1)]  # fmt: skip
        fit = FitRows(tensor(padded[0]), tensor(padded[1]), [len(parts[0][0]) for parts in prepared])
        validation = [(tensor(parts[0][1]), tensor(parts[1][1])) for parts in prepared]
        test = [(tensor(parts[0][2]), tensor(parts[1][2])) for parts in prepared]
        runs = cls(fit, validation, test, splits, member_seeds, settings.ensemble, len(rows[0][0]),
                   (prepared[0][0][0].shape[1], prepared[0][1][0].shape[1]),
                   preparations=list(preparations))  # fmt: skip
        if _uses_base(settings) or settings.radial:
            runs.base, runs.base_ranks, runs.radial, runs.radial_ranks = _gaussian_critics(
                prepared, validation, settings
            )
        return runs


def _gaussian_critics(
    prepared: Sequence[tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]],
    validation: Sequence[tuple[Any, Any]],
    settings: NeuralSettings,
) -> tuple[Any, list[int], Any, list[int]]:
    """The Gaussian base and the radial candidate of each run (None and [] where not used), with
    their ranks. The members of an ensemble share their rows, so each split's critics are fitted
    once and repeated for its members (the same critics as fitting each member's)."""
    members = settings.ensemble
    fits = [(parts[0][0], parts[1][0]) for parts in prepared[::members]]
    fit_all = partial(
        fit_gaussian_critics, fits, validation[::members], settings.eval_block, settings.device,
        shrink=settings.shrink_base,
    )  # fmt: skip

    def each_member(critics: Any, ranks: list[int]) -> tuple[Any, list[int]]:
        return critics.repeat_interleave(members), [rank for rank in ranks for _ in range(members)]

    base, base_ranks = each_member(*fit_all()[:2]) if _uses_base(settings) else (None, [])
    alone = [run for run in range(len(base_ranks)) if not _on_base(settings, run % members)]
    if alone:  # base="mixed": these members' base is the zero critic (rank 0, every pair related)
        base = base.without(alone)
        base_ranks = [0 if run in alone else rank for run, rank in enumerate(base_ranks)]
    radial, radial_ranks = (None, [])
    if settings.radial:
        radial, radial_ranks = each_member(*fit_all(features="radial", terms=settings.radial_terms)[:2])
    return base, base_ranks, radial, radial_ranks


def _preparations_differ(rows: Sequence[tuple[np.ndarray, ...]]) -> bool:
    """Whether on some column of some data set's x or y the preparations of :data:`AUTO_PREPARATIONS`
    differ by :data:`AUTO_SAME` or more (root mean square over the rows, each fitted on all rows)."""
    for data in (side for row in rows for side in row[:2]):
        first, *others = (PREPARATIONS[name](data)[0] for name in AUTO_PREPARATIONS)
        if any(np.sqrt(np.mean((first - other) ** 2, axis=0)).max() >= AUTO_SAME for other in others):
            return True
    return False


def _kept_preparation(results: dict[str, Estimate | DivergenceError]) -> Estimate | DivergenceError:
    """One data set's estimate under ``normalise="auto"`` from its estimates under each preparation
    (each with ``details["validation_chunks"]``; the first, rank scores, is kept unless another
    finished and its advantage on the validation pairs exceeds :data:`AUTO_MARGIN` standard errors);
    ``details`` say which (``normalise``), each one's validation value and the advantage."""
    import dataclasses

    finished = {name: result for name, result in results.items() if not isinstance(result, DivergenceError)}
    if not finished:
        return next(iter(results.values()))
    chunks = {name: result.details["validation_chunks"] for name, result in finished.items()}
    first = next(iter(results))
    if first in finished:
        advantages = {
            name: float(standard_errors_above_zero(chunks[name] - chunks[first]))
            for name in finished
            if name != first
        }
        ahead = [name for name, advantage in advantages.items() if advantage > AUTO_MARGIN]
        name = max(ahead, key=advantages.__getitem__, default=first)
    else:  # rank scores ran away: the preparation that finished
        advantages, name = {}, next(iter(finished))
    kept = finished[name]
    details = {key: value for key, value in kept.details.items() if key != "validation_chunks"}
    values = {other: float(np.mean(chunks[other])) for other in finished}
    return dataclasses.replace(kept, details=details).with_notes(
        normalise=name, validation_by_normalise=values, advantage_by_normalise=advantages
    )


def _related_words(gaussian: Any, run: int) -> str:
    """ ", with w of the pairs related" where run ``run``'s Gaussian critic assumes a fraction w < 1
    of related pairs (:mod:`mitool.critics.gaussian`), else nothing."""
    weight = float(gaussian.weight[run])
    return "" if weight == 1.0 else f", with {weight:.0%} of the pairs related"


def _padded(rows: np.ndarray, length: int) -> np.ndarray:
    """``rows`` with zero rows appended up to ``length`` (the stacked fit rows of runs that differ by one)."""
    return np.pad(rows, ((0, length - len(rows)), (0, 0)))


def _splits(n: int, settings: NeuralSettings, seed: int) -> list[Split]:
    """The folds of cross-fitting (``folds`` >= 2), else the one split of ``test_fraction``."""
    if settings.folds >= 2:
        return fold_splits(n, settings.folds, settings.validation_fraction, seed)
    return [split_pairs(n, settings.test_fraction, settings.validation_fraction, seed)]


def _prepared_run(
    x: np.ndarray, y: np.ndarray, split: Split, settings: NeuralSettings, preparation: str
) -> list[list[np.ndarray]]:
    """One split's [fit, validation, test] rows of x and of y, prepared (by ``preparation``, a key of
    :data:`PREPARATIONS`, and in canonical coordinates when asked) by maps fitted on its training
    rows."""
    prepare = PREPARATIONS[preparation]
    prepared = [
        prepare(data[split.train], data[split.fit], data[split.validation], data[split.test])
        for data in (x, y)
    ]
    if settings.canonical:
        map_x, map_y = canonical_maps(prepared[0][0], prepared[1][0])
        prepared = [[part @ map_x.T for part in prepared[0]], [part @ map_y.T for part in prepared[1]]]
    return [parts[1:] for parts in prepared]


def _estimator_for(name: str, class_name: str) -> type[NeuralEstimator]:
    """The estimator of the bound called ``name``, the class ``class_name`` of this module: its
    settings (``class_name.Settings``) are :class:`NeuralSettings` plus the options of the bound
    and of its evaluators."""
    bound = bounds.BOUNDS[name]
    settings = make_dataclass(
        f"{class_name}Settings", [_option_field(option) for option in _option_names(name)],
        bases=(NeuralSettings,), frozen=True,
    )  # fmt: skip
    settings.__module__, settings.__qualname__ = __name__, f"{class_name}.Settings"  # importable, picklable
    settings.__doc__ = f"{NeuralSettings.__doc__} With the options of {name} and its evaluators."
    attributes = {"name": name, "bound": name, "summary": bound.summary, "value_is": bound.estimate,
                  "Settings": settings, "__doc__": _docstring(name), "__module__": __name__}  # fmt: skip
    return type(class_name, (NeuralEstimator,), attributes)


def _docstring(name: str) -> str:
    """The docstring of the estimator of the bound called ``name`` (its Parameters, the settings,
    are added by :class:`~mitool.estimators.base.Estimator`), with an example that trains for 50 steps."""
    bound = bounds.BOUNDS[name]
    critic = ', critic="cosine"' if name in ("dcl", "dclw") else ""  # their loss needs bounded scores
    return f"""{bound.summary}: {bound.estimate}.

    A critic trained with :func:`mitool.bounds.{name}` (its formula and paper) on part of the pairs and
    scored on the others with the ``evaluator`` (by default {name} itself); the module says how.

    Examples
    --------
    >>> import numpy as np
    >>> from mitool import estimators
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=300)
    >>> y = x + 0.5 * rng.normal(size=300)              # I(X; Y) = log(5) / 2 = 0.80 nats
    >>> estimator = estimators.get("{name}", steps=50, hidden=16, hidden_layers=1, batch_size=32{critic})
    >>> bool(abs(estimator.estimate(x, y).value - 0.80) < 0.35)
    True
    """


InfoNCE = _estimator_for("infonce", "InfoNCE")
EqCo = _estimator_for("eqco", "EqCo")
DCL = _estimator_for("dcl", "DCL")
DCLW = _estimator_for("dclw", "DCLW")
NWJ = _estimator_for("nwj", "NWJ")
DV = _estimator_for("dv", "DV")
MINE = _estimator_for("mine", "MINE")
JS = _estimator_for("js", "JS")
SMILE = _estimator_for("smile", "SMILE")

ESTIMATORS: list[type[Estimator]] = [InfoNCE, EqCo, DCL, DCLW, NWJ, DV, MINE, JS, SMILE]
"""One neural estimator per bound of :data:`mitool.bounds.BOUNDS`, in the table's order, each a name
of this module (``from mitool.estimators.neural import InfoNCE``; pickled by that name). A new bound
needs its line here: a test checks that every bound has one."""
