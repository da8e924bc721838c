"""Settings of the toy MI study and their checks.

A *run* trains one critic with one bound on the MI staircase of correlated Gaussians
(:class:`mitool.tasks.Staircase`, :class:`mitool.tasks.CorrelatedGaussian`): x ~ N(0, I_d),
y = rho x + sqrt(1 - rho^2) eps, rho set per stage so that I(X; Y) is 2, 4, 6, 8, 10 nats.
:class:`RunSpec` says what differs between runs (bound, critic, K, alpha, seed);
:class:`ToySettings` holds what every run of a study shares (the protocol of Poole et al. 2019:
d = 20, 4000 steps per stage, batch 64, Adam lr 5e-4, 256-wide ReLU MLPs, 32-dim embedding).

The bounds and their options come from :data:`mitool.bounds.BOUNDS`, the critics and theirs from
:mod:`mitool.critics`. Every check raises :class:`mitool.checks.ParameterError` naming the Python
parameter (``batch_size must be a whole number >= 2, got 1``); the command line names the option.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from mitool import bounds, checks, critics, tasks

__all__ = [
    "DEFAULT_ALPHA",
    "MAX_NEGATIVES",
    "RunSpec",
    "ToySettings",
    "check_negatives",
]

DEFAULT_ALPHA = 1024.0
"""The toy study's EqCo alpha when none is given: one fixed value for every K, which is the point
of EqCo's calibration (the estimate's cap and gradient scale depend on alpha, not on K)."""

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

    estimator: str
    critic: str
    negatives: int
    seed: int
    alpha: float | None = None

    def __post_init__(self) -> None:
        checks.choice("estimator", self.estimator, bounds.NAMES)
        checks.choice("critic", self.critic, critics.NAMES)
        check_negatives("negatives", self.negatives)
        checks.whole_number("seed", self.seed, 0)
        alpha = None
        if "alpha" in bounds.BOUNDS[self.estimator].option_names:
            alpha = checks.positive("alpha", DEFAULT_ALPHA if self.alpha is None else self.alpha)
        object.__setattr__(self, "alpha", alpha)

    def bound_options(self) -> dict[str, float]:
        """Keyword options for ``mitool.bounds.get``: the run's alpha where the bound takes it,
        the table's defaults for the rest."""
        return bounds.BOUNDS[self.estimator].pick_options({"alpha": self.alpha})

    def label(self) -> str:
        alpha = f", alpha={self.alpha:g}" if self.alpha is not None else ""
        return f"{self.estimator}, {self.critic} critic, K={self.negatives}{alpha}, seed {self.seed}"


@dataclass(frozen=True)
class ToySettings:
    """What every run of one study shares.

    dim: d of x and y. mi_values: the staircase stages in nats. steps_per_stage: training steps per
    stage, a fresh batch every step. batch_size: B anchors per step. lr: Adam's learning rate.
    transform: None (or "none") or a key of :data:`mitool.tasks.TRANSFORMS` applied to y (MI
    unchanged). embed_dim, hidden, hidden_layers: the critic's MLPs. temperature: of the cosine
    critic. divergence_threshold: |estimate| in nats beyond which a run is stopped as diverged.
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
    divergence_threshold: float = bounds.DIVERGENCE_THRESHOLD
    device: str = "cpu"

    def __post_init__(self) -> None:
        checks.whole_number("dim", self.dim, 1)
        if not tuple(self.mi_values):
            raise checks.ParameterError(
                "mi_values", "must list at least one stage (nats, >= 0), e.g. 2,4,6,8,10"
            )
        values = tuple(checks.number("mi_values", value, minimum=0.0) for value in self.mi_values)
        object.__setattr__(self, "mi_values", values)
        checks.whole_number("steps_per_stage", self.steps_per_stage, 2)
        checks.whole_number("batch_size", self.batch_size, 2)
        object.__setattr__(self, "lr", checks.positive("lr", self.lr))
        transform = None if self.transform in (None, "none") else self.transform
        if transform is not None:
            checks.choice("transform", transform, ("none", *tasks.TRANSFORMS))
        object.__setattr__(self, "transform", transform)
        checks.whole_number("embed_dim", self.embed_dim, 1)
        checks.whole_number("hidden", self.hidden, 1)
        checks.whole_number("hidden_layers", self.hidden_layers, 1)
        object.__setattr__(self, "temperature", checks.positive("temperature", self.temperature))
        threshold = checks.positive("divergence_threshold", self.divergence_threshold)
        object.__setattr__(self, "divergence_threshold", threshold)

    @property
    def staircase(self) -> tasks.Staircase:
        return tasks.Staircase(self.mi_values, self.steps_per_stage)

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
