"""Settings of the toy MI study and their checks.

A *run* trains one critic with one bound on the MI staircase of correlated Gaussians
(:class:`mitool.tasks.Staircase`, :class:`mitool.tasks.CorrelatedGaussian`): x ~ N(0, I_d),
y = rho x + sqrt(1 - rho^2) eps, rho set per stage so that I(X; Y) is 2, 4, 6, 8, 10 nats.
:class:`RunSpec` says what differs between runs (bound, critic, K, alpha, seed);
:class:`ToySettings` holds what every run of a study shares (the protocol of Poole et al. 2019:
d = 20, 4000 steps per stage, batch 64, Adam lr 5e-4, 256-wide ReLU MLPs, 32-dim embedding).

Every check raises ``ValueError`` with one line that names the option and its allowed values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from mitool import bounds, critics, tasks

__all__ = [
    "DEFAULT_ALPHA",
    "DIVERGENCE_THRESHOLD",
    "ESTIMATORS",
    "MAX_NEGATIVES",
    "RunSpec",
    "ToySettings",
    "check_alpha",
    "check_critic",
    "check_estimator",
    "check_negatives",
    "critic_options",
    "parse_list",
]

ESTIMATORS: tuple[str, ...] = bounds.NAMES
"""Bounds the toy study trains: all of mitool.bounds (MINE's moving average is carried per run
through the pure ``mitool.bounds.mine``)."""

DEFAULT_ALPHA = 1024.0
"""EqCo's alpha when none is given: one fixed value for every K, which is the point of EqCo's
calibration (the estimate's cap and gradient scale depend on alpha, not on K)."""

MAX_NEGATIVES = 65536
"""Largest K: the shared pool of fresh marginal samples (K >= B) holds at most this many rows."""

DIVERGENCE_THRESHOLD = 1000.0
"""A run whose estimate is NaN, infinite or beyond this many nats in absolute value is stopped."""


def check_estimator(name: str, option: str = "--estimators") -> str:
    if name not in ESTIMATORS:
        raise ValueError(f"{option}: unknown estimator {name!r}; allowed: {', '.join(ESTIMATORS)}")
    return name


def check_critic(name: str) -> str:
    if name not in critics.NAMES:
        raise ValueError(f"--critic: unknown critic {name!r}; allowed: {', '.join(critics.NAMES)}")
    return name


def check_negatives(negatives: int) -> int:
    if isinstance(negatives, bool) or not isinstance(negatives, int) or not 1 <= negatives <= MAX_NEGATIVES:
        raise ValueError(
            f"--negatives: K must be a whole number from 1 to {MAX_NEGATIVES} "
            f"(the largest pool of fresh marginal samples), got {negatives!r}"
        )
    return negatives


def check_alpha(alpha: float) -> float:
    if not (isinstance(alpha, (int, float)) and math.isfinite(alpha) and alpha > 0):
        raise ValueError(f"--alpha: EqCo's alpha must be a finite number > 0, got {alpha!r}")
    return float(alpha)


@dataclass(frozen=True)
class RunSpec:
    """One training run: the bound, the critic, K negatives per anchor, EqCo's alpha and the seed.

    ``alpha`` is used by eqco only and is None for every other bound. The seed fixes both the
    critic's initial weights and the stream of samples, so runs with the same seed and different
    bounds see the same data (common random numbers).
    """

    estimator: str
    critic: str
    negatives: int
    seed: int
    alpha: float | None = None

    def __post_init__(self) -> None:
        check_estimator(self.estimator)
        check_critic(self.critic)
        check_negatives(self.negatives)
        if self.estimator == "eqco":
            check_alpha(DEFAULT_ALPHA if self.alpha is None else self.alpha)
            if self.alpha is None:
                object.__setattr__(self, "alpha", DEFAULT_ALPHA)
        elif self.alpha is not None:
            object.__setattr__(self, "alpha", None)

    def bound_options(self) -> dict[str, float]:
        """Keyword options for ``mitool.bounds.get``."""
        return {"alpha": float(self.alpha)} if self.estimator == "eqco" else {}

    def label(self) -> str:
        alpha = f", alpha={self.alpha:g}" if self.alpha is not None else ""
        return f"{self.estimator}, {self.critic} critic, K={self.negatives}{alpha}, seed {self.seed}"


@dataclass(frozen=True)
class ToySettings:
    """What every run of one study shares.

    dim: d of x and y. mi_values: the staircase stages in nats. steps_per_stage: training steps per
    stage, a fresh batch every step. batch_size: B anchors per step. lr: Adam's learning rate.
    transform: None or a key of :data:`mitool.tasks.TRANSFORMS` applied to y (MI unchanged).
    embed_dim, hidden, hidden_layers: the critic's MLPs. temperature: of the cosine critic.
    divergence_threshold: |estimate| in nats beyond which a run is stopped as diverged.
    device: torch device name.
    """

    dim: int = 20
    mi_values: tuple[float, ...] = (2.0, 4.0, 6.0, 8.0, 10.0)
    steps_per_stage: int = 4000
    batch_size: int = 64
    lr: float = 5e-4
    transform: str | None = None
    embed_dim: int = 32
    hidden: int = 256
    hidden_layers: int = 2
    temperature: float = 0.1
    divergence_threshold: float = DIVERGENCE_THRESHOLD
    device: str = "cpu"

    def __post_init__(self) -> None:
        _check_whole("--dim", self.dim, 1)
        values = tuple(float(v) for v in self.mi_values)
        if not values:
            raise ValueError("--mi: give at least one stage (nats, >= 0), e.g. 2,4,6,8,10")
        for value in values:
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"--mi: each stage must be a finite number of nats >= 0, got {value}")
        object.__setattr__(self, "mi_values", values)
        _check_whole("--steps-per-stage", self.steps_per_stage, 2)
        _check_whole("--batch-size", self.batch_size, 2)
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"--lr: the learning rate must be a finite number > 0, got {self.lr}")
        if self.transform is not None and self.transform not in tasks.TRANSFORMS:
            raise ValueError(
                f"--transform: unknown transform {self.transform!r}; "
                f"allowed: none, {', '.join(tasks.TRANSFORMS)}"
            )
        _check_whole("--embed-dim", self.embed_dim, 1)
        _check_whole("--hidden", self.hidden, 1)
        _check_whole("--hidden-layers", self.hidden_layers, 1)
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            raise ValueError(f"--temperature: must be a finite number > 0, got {self.temperature}")
        if not self.divergence_threshold > 0:
            raise ValueError(f"--divergence-threshold: must be > 0 nats, got {self.divergence_threshold}")

    @property
    def staircase(self) -> tasks.Staircase:
        return tasks.Staircase(self.mi_values, self.steps_per_stage)

    @property
    def total_steps(self) -> int:
        return self.steps_per_stage * len(self.mi_values)

    def as_dict(self) -> dict:
        values = asdict(self)
        values["mi_values"] = list(self.mi_values)
        return values


def _check_whole(option: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{option}: must be a whole number >= {minimum}, got {value!r}")


def critic_options(name: str, settings: ToySettings) -> dict[str, object]:
    """The keyword options of :func:`mitool.critics.make_critic` for critic ``name``."""
    if name == "separable":
        return {
            "embed_dim": settings.embed_dim,
            "hidden": settings.hidden,
            "hidden_layers": settings.hidden_layers,
        }
    if name == "cosine":
        return {
            "embed_dim": settings.embed_dim,
            "hidden": settings.hidden,
            "hidden_layers": settings.hidden_layers,
            "temperature": settings.temperature,
        }
    if name == "concat":
        return {"hidden": settings.hidden, "hidden_layers": settings.hidden_layers}
    return {}


def parse_list(
    option: str, text: str, kind: type, allowed: Sequence[str] | None = None, unique: bool = True
) -> list:
    """Split a comma-separated option value into a list of ``kind`` (str, int or float); with
    ``unique`` a repeated value is an error (it would train the same runs twice and count them
    twice in the summary)."""
    items = [item.strip() for item in str(text).split(",") if item.strip()]
    if not items:
        raise ValueError(f"{option}: give a comma-separated list, got {text!r}")
    parsed = []
    for item in items:
        if kind is str:
            parsed.append(item)
            continue
        try:
            parsed.append(kind(item))
        except ValueError:
            name = "whole numbers" if kind is int else "numbers"
            raise ValueError(f"{option}: expected comma-separated {name}, got {item!r}") from None
    if unique:
        repeated = sorted({str(value) for value in parsed if parsed.count(value) > 1})
        if repeated:
            raise ValueError(f"{option}: each value may appear once, got {', '.join(repeated)} twice or more")
    return parsed
