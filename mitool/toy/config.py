"""Settings of the toy MI study and their checks.

A *run* trains one critic with one bound on the MI staircase of correlated Gaussians
(:class:`mitool.toy.staircase.Staircase`, :class:`mitool.tasks.CorrelatedGaussian`): x ~ N(0, I_d),
y = rho x + sqrt(1 - rho^2) eps, rho set per stage so that I(X; Y) is 2, 4, 6, 8, 10 nats.
:class:`RunSpec` says what differs between runs (bound, critic, K, alpha, seed);
:class:`ToySettings` holds what every run of a study shares (the protocol of Poole et al. 2019:
d = 20, 4000 steps per stage, batch 64, Adam lr 5e-4, 256-wide ReLU MLPs, 32-dim embedding).

The bounds and their options come from :data:`mitool.bounds.BOUNDS`, the critics and theirs from
:mod:`mitool.critics`. Every check raises :class:`mitool.checks.ParameterError` naming the Python
parameter (``batch_size must be a whole number >= 2, got 1``); the command line names the option.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial

from mitool import bounds, checks, critics, tasks
from mitool.bounds import DEFAULT_ALPHA
from mitool.critics import CriticSettings
from mitool.settings import Settings, setting
from mitool.toy.staircase import Staircase

__all__ = [
    "DEFAULT_ALPHA",
    "DEMO_BOUNDS",
    "DEMO_CRITICS",
    "DEMO_HIDDEN",
    "DEMO_NEGATIVES",
    "STUDY_NEGATIVES",
    "DEMO_STEPS_PER_STAGE",
    "RUN_NEGATIVES",
    "MAX_NEGATIVES",
    "RunSpec",
    "ToySettings",
    "check_negatives",
]

DEMO_BOUNDS: tuple[str, ...] = ("infonce", "eqco", "dcl", "nwj")
"""The bounds of the default study (``mitool toy demo``, and the default of ``toy sweep``'s
``--estimators``)."""

DEMO_CRITICS: tuple[str, ...] = ("separable", "cosine")
"""The critics of ``mitool toy demo``."""

STUDY_NEGATIVES: tuple[int, ...] = (4, 16, 64, 256, 1024)
"""The K of the default study (``toy sweep``'s default)."""

DEMO_NEGATIVES: tuple[int, ...] = (4, 16, 64, 256)
"""The K of ``mitool toy demo``: the study's without K = 1024, whose cells took as long as the
other eight together (121 s of one core for the separable critic), to fit the demo in 3 minutes."""

DEMO_HIDDEN = 128
"""Width of the demo critics' MLPs: half the study's 256, which made the demo's cells 1.8 times
faster (75 s instead of 135 s for the demo on two cores) and left its picture (InfoNCE capped at
log(K+1), EqCo steady in K, DCL running away with the separable critic) as it was."""

DEMO_STEPS_PER_STAGE = 150
"""Steps per stage of ``mitool toy demo``: the protocol's 4000 shortened to fit on a small CPU."""

RUN_NEGATIVES = 63
"""K of ``toy run`` when none is given: every other row of the default batch of 64."""

MAX_NEGATIVES = 65536
"""Largest K: the shared pool of fresh marginal samples (K >= B) holds at most this many rows."""


def check_negatives(parameter: str, negatives: object) -> int:
    """K as an int: a whole number from 1 to :data:`MAX_NEGATIVES`."""
    return checks.whole_number(parameter, negatives, 1, MAX_NEGATIVES)


@dataclass(frozen=True)
class RunSpec:
    """One training run: the bound, the critic, K negatives per anchor, EqCo's alpha and the seed.

    ``alpha`` is kept for the bounds whose options (:data:`mitool.bounds.BOUNDS`) include it (eqco;
    :data:`DEFAULT_ALPHA` when not given) and is None for every other bound. The seed fixes both the
    critic's initial weights and the stream of samples, so runs with the same seed and different
    bounds see the same data (common random numbers).
    """

    bound: str
    critic: str
    negatives: int
    seed: int
    alpha: float | None = None

    def __post_init__(self) -> None:
        checks.choice("bound", self.bound, bounds.NAMES)
        checks.choice("critic", self.critic, critics.NAMES)
        check_negatives("negatives", self.negatives)
        checks.whole_number("seed", self.seed, 0)
        alpha = None
        if "alpha" in bounds.BOUNDS[self.bound].option_names:
            alpha = checks.positive("alpha", DEFAULT_ALPHA if self.alpha is None else self.alpha)
        object.__setattr__(self, "alpha", alpha)

    def bound_options(self) -> dict[str, float]:
        """Keyword options for ``mitool.bounds.get``: the run's alpha where the bound takes it,
        the table's defaults for the rest."""
        return bounds.BOUNDS[self.bound].pick_options({"alpha": self.alpha})

    def label(self) -> str:
        alpha = f", alpha={self.alpha:g}" if self.alpha is not None else ""
        return f"{self.bound}, {self.critic} critic, K={self.negatives}{alpha}, seed {self.seed}"


def _stages(name: str, values: object) -> tuple[float, ...]:
    stages = tuple(values)  # type: ignore[call-overload]
    if not stages:
        raise checks.ParameterError(name, "must list at least one stage (nats, >= 0), e.g. 2,4,6,8,10")
    return tuple(checks.number(name, value, minimum=0.0) for value in stages)


def _transform(name: str, value: object) -> str | None:
    return None if value in (None, "none") else checks.choice(name, value, ("none", *tasks.TRANSFORMS))


def _whole(minimum: int) -> Callable[[str, object], int]:
    return partial(checks.whole_number, minimum=minimum)


@dataclass(frozen=True)
class ToySettings(Settings):
    """What every run of one study shares (each field's meaning is its help; the command line's
    options of ``toy run`` and ``toy sweep`` are made from these fields). The critics' settings
    are :class:`mitool.critics.CriticSettings`' (their defaults are the protocol's)."""

    dim: int = setting(20, "Dimension d of x and y.", _whole(1))
    mi_values: tuple[float, ...] = setting(
        (2.0, 4.0, 6.0, 8.0, 10.0), "The staircase: the true MI of each stage, in nats.", _stages, flag="--mi"
    )
    steps_per_stage: int = setting(4000, "Training steps per stage (a fresh batch every step).", _whole(2))
    batch_size: int = setting(64, "Anchors B per step.", _whole(2))
    lr: float = setting(5e-4, "Adam's learning rate.", checks.positive)
    transform: str | None = setting(
        None,
        f"Invertible map of each coordinate of y (the MI is unchanged): none, {', '.join(tasks.TRANSFORMS)}.",
        _transform,
    )  # fmt: skip
    embed_dim: int = CriticSettings.shared("embed_dim")
    hidden: int = CriticSettings.shared("hidden")
    hidden_layers: int = CriticSettings.shared("hidden_layers")
    temperature: float = CriticSettings.shared("temperature")
    divergence_threshold: float = setting(
        bounds.DIVERGENCE_THRESHOLD,
        "A run whose estimate is NaN, infinite or beyond this many nats is stopped.",
        checks.positive,
    )  # fmt: skip
    device: str = CriticSettings.shared("device")

    @property
    def staircase(self) -> Staircase:
        return Staircase(self.mi_values, self.steps_per_stage)

    @property
    def total_steps(self) -> int:
        return self.steps_per_stage * len(self.mi_values)

    def critic_options(self, critic: str) -> dict[str, object]:
        """The keyword options of :func:`mitool.critics.make_critic` that critic ``critic`` takes."""
        return critics.pick_options(critic, asdict(self))

    def as_dict(self) -> dict:
        values = asdict(self)
        values["mi_values"] = list(self.mi_values)
        return values
