"""The neural estimators' settings: :class:`NeuralSettings` (every default and each field's help),
the checks of their values (the critic, the evaluator and the bounded critics that DCL and DCLW need),
what ``base`` means for each member of an ensemble, and the fields of the bounds' own options
(added per estimator by :mod:`mitool.estimators.neural`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from mitool import bounds, checks, critics
from mitool.bounds import DEFAULT_ALPHA
from mitool.critics import CriticSettings
from mitool.critics.gaussian import SHRINKAGES
from mitool.estimators.base import EstimatorSettings, TrainingSettings, level_setting
from mitool.estimators.preparation import PREPARATIONS
from mitool.settings import setting

BOUNDED_CRITICS = ("cosine",)
"""The critics whose scores are bounded (cos / temperature lies in [-1/T, 1/T])."""

_whole = partial(checks.whole_number, minimum=1)
_training, _critic_setting = TrainingSettings.shared, CriticSettings.shared


def _critic(name: str, value: object) -> str:
    return checks.choice(name, value, critics.NAMES)


AUTO_PREPARATIONS = ("rank", "standard")
"""The preparations ``normalise="auto"`` tries, each data set keeping the first (rank scores) unless
another's critics lead it on its validation pairs by :data:`AUTO_MARGIN`."""

AUTO_MARGIN = 3.0
"""``normalise="auto"`` keeps another preparation than rank scores only where its critics' validation
value exceeds rank scores' by more than this many standard errors of their paired chunk values: each
validation value is the best of many that early stopping saw, and the noisier critic wins that
maximum more often than it should."""

AUTO_SAME = 0.1
"""Where the preparations of :data:`AUTO_PREPARATIONS` differ by less than this on every column (the
root mean square of rank score minus z-score over the rows), ``normalise="auto"`` trains on rank
scores alone: the critics would see nearly the same inputs. On bmi's own samples (v1 and v2, seed
3) the columns of Gaussian marginals differ by 0.018 to 0.026 at n = 5000 and by 0.037 to 0.061 at
n = 1000; every other task's by 0.126 (asinh of Student-t) to 1.36 (Student-t, one degree of
freedom)."""


def _preparation(name: str, value: object) -> str:
    return checks.choice(name, value, (*PREPARATIONS, "auto"))


def _activation(name: str, value: object) -> str:
    return checks.choice(name, value, ("relu", "gelu", "silu", "tanh", "elu", "leaky_relu"))


def _base(name: str, value: object) -> str:
    return checks.choice(name, value, ("auto", "gaussian", "mixed", "none"))


def _folds(name: str, value: object) -> int:
    value = checks.whole_number(name, value, 0)
    if value == 1:
        raise checks.ParameterError(name, "must be 0 (one split) or at least 2, got 1")
    return value


@dataclass(frozen=True)
class NeuralSettings(EstimatorSettings):
    """How a neural estimate is made: every default lives here, each field's meaning in its help
    (which the command line shows); those the estimators that train share are declared once (the
    training: :class:`~mitool.estimators.base.TrainingSettings`; the critic's size:
    :class:`~mitool.critics.CriticSettings`), with the neural estimators' defaults here."""

    critic: str = setting("separable", f"The critic, one of {', '.join(critics.NAMES)}.", _critic)
    evaluator: str | None = setting(
        None, "The bound scored on the held-out pairs (default: the estimator's own); only the bounds tight "
        "at the critic the estimator trains (mitool.bounds.evaluators_for).",
    )  # fmt: skip
    steps: int = _training("steps", 2000)
    batch_size: int = setting(
        128, "Training batch B (K = B - 1 in-batch negatives).", partial(checks.whole_number, minimum=2)
    )
    lr: float = _training("lr", 5e-4)
    weight_decay: float = _training("weight_decay", 0.0)
    input_noise: float = setting(
        0.0, "Standard deviation of Gaussian noise added to the training batches' inputs (a smoothing "
        "regulariser; the inputs are prepared to unit scale).", partial(checks.number, minimum=0.0),
    )  # fmt: skip
    test_fraction: float = _training("test_fraction")
    validation_fraction: float = _training("validation_fraction")
    eval_every: int = _training("eval_every")
    patience: int = _training("patience")
    max_seconds: float = _training("max_seconds")
    hidden: int = _critic_setting("hidden", 64)
    hidden_layers: int = _critic_setting("hidden_layers", 4)
    embed_dim: int = _critic_setting("embed_dim")
    activation: str = setting(
        "gelu", "The MLPs' activation: relu, gelu, silu, tanh, elu, leaky_relu.", _activation
    )
    temperature: float = _critic_setting("temperature")
    eval_block: int = setting(
        1024, "Most held-out pairs scored together (K = block - 1 negatives).",
        partial(checks.whole_number, minimum=2),
    )  # fmt: skip
    chunk: int = _training("chunk")
    extrapolate_negatives: bool = setting(
        False, "Report the held-out value carried to infinitely many negatives, 2 I_K - I_K' (Richardson's "
        "rule; I_K' with each anchor scored against its half of the block, K' + 1 = (K + 1) / 2): "
        "InfoNCE-family evaluators only, whose value falls short of its limit by about c / (K + 1).",
    )  # fmt: skip
    level: float = level_setting()
    ensemble: int = setting(
        1, "Critics trained on each data set (other initial weights and batches); the estimate scores their "
        "mean score, whose estimate is at least their mean estimate (the bounds are concave).", _whole,
    )  # fmt: skip
    canonical: bool = setting(
        False, "Turn X and Y to their canonical (CCA) coordinates, fitted on the training rows (invertible "
        "linear maps: the MI is unchanged; the linear dependence lands in the first coordinates).",
    )  # fmt: skip
    normalise: str = setting(
        "rank", "How each coordinate is prepared, fitted on the training rows: standard (z-scores), rank "
        "(normal scores of the ranks) or quantile (as rank, linear between quantiles); each is invertible "
        "per coordinate and keeps the MI. auto: rank and standard both (twice the training), each data set "
        "keeping rank unless standard's critics score higher on its validation pairs by more than "
        f"{AUTO_MARGIN:g} standard errors.", _preparation,
    )  # fmt: skip
    radial: bool = setting(
        True, "Also fit a Gaussian critic on each side's radial features phi(x) = [x, x (|x|^2/d - 1)] (on "
        "the training rows) and keep it instead of the network where it scores higher on the validation "
        "pairs (dependence through the scale, as in the spiral and Student tasks).",
    )  # fmt: skip
    radial_terms: int = setting(
        1, "The radial candidate's terms: phi(x) = [x, x c, ..., x c^t] with c = |x|^2/d - 1, each run "
        "keeping the t of 1 .. radial_terms whose validation value is highest (with its rank and weight; "
        "each term adds d features a side).", _whole,
    )  # fmt: skip
    shrink_base: bool = setting(
        False, "Fit the Gaussian critics (the base and the radial candidate) also by regularised CCA, each "
        f"side's covariance shrunk toward its diagonal by {', '.join(f'{v:g}' for v in SHRINKAGES[1:])}, "
        "keeping the shrinkage whose validation value is highest with the rank and the weight (with few "
        "pairs in many dimensions the canonical directions overfit).",
    )  # fmt: skip
    base: str = setting(
        "auto", "The critic's start: gaussian (the Gaussian fitted to the training rows, which the network "
        "corrects), none, auto (gaussian but for the cosine critic), or mixed (with an ensemble: its first "
        "member on the Gaussian, the next alone, and so on; each split keeps the members' mean or one "
        "member, whichever scores highest on its validation pairs).", _base,
    )  # fmt: skip
    folds: int = setting(
        0, "Cross-fitting: k >= 2 folds, each scored by critics trained on the others (every pair gives the "
        "estimate once; the interval spans the folds); 0: one split, test_fraction held out.", _folds,
    )  # fmt: skip
    device: str = _critic_setting("device")


def check_evaluator(bound: str, evaluator: str) -> str:
    """``evaluator`` when it is tight for a critic trained with the bound called ``bound`` (the
    neural estimator's name; :func:`mitool.bounds.evaluators_for`), else ParameterError saying
    which are."""
    checks.choice("evaluator", evaluator, bounds.NAMES)
    allowed = bounds.evaluators_for(bound)
    if evaluator not in allowed:
        optimum = bounds.CRITIC_OPTIMA[bounds.BOUNDS[bound].critic_optimum]
        raise checks.ParameterError(
            "evaluator",
            f"{evaluator!r} is not tight for a critic trained with {bound!r} (which converges to "
            f"{optimum}) and can be arbitrarily wrong; use one of {', '.join(allowed)}",
        )
    return evaluator


def _check_bounded(bound: str, critic: str) -> None:
    """DCL and DCLW drop the positive from the denominator: with unbounded scores their loss has
    no lower bound and the estimate runs away (+165 nats at 10 true nats in the toy demo)."""
    if bounds.BOUNDS[bound].form in ("decoupled", "weighted") and critic not in BOUNDED_CRITICS:
        raise checks.ParameterError(
            "critic",
            f"{critic!r} has unbounded scores, with which {bound}'s loss has no lower bound and its "
            "estimate runs away; use critic='cosine' (scores in [-1/T, 1/T]) or estimator='infonce'",
        )


def _uses_base(settings: NeuralSettings) -> bool:
    """The Gaussian base is used with ``base`` "gaussian" and "mixed" (by some members), and with "auto"
    for critics that can start at a zero score (all but the cosine critic)."""
    if settings.base == "auto":
        return settings.critic not in BOUNDED_CRITICS
    return settings.base in ("gaussian", "mixed")


def _on_base(settings: NeuralSettings, member: int) -> bool:
    """Whether ensemble member ``member`` starts at the Gaussian base: every member where the base is
    used, but with ``base="mixed"`` only the even members (0, 2, ...), the others alone."""
    return _uses_base(settings) and (settings.base != "mixed" or member % 2 == 0)


def _option_names(bound: str) -> tuple[str, ...]:
    """The options of ``bound`` and of the bounds that may evaluate its critic (a setting each),
    without those the contrastive methods set from their score temperature."""
    names = [
        option.name
        for name in (bound, *bounds.evaluators_for(bound))
        for option in bounds.BOUNDS[name].options
        if not option.score_temperature
    ]
    return tuple(dict.fromkeys(names))


def _option_field(name: str) -> tuple[str, Any, Any]:
    """The settings field of bound option ``name``: its meaning from the table; eqco's alpha
    defaults to :data:`DEFAULT_ALPHA`, the others to the table's default (None here)."""
    option = next(o for bound in bounds.BOUNDS.values() for o in bound.options if o.name == name)
    users = ", ".join(b.name for b in bounds.BOUNDS.values() if name in b.option_names)
    default = DEFAULT_ALPHA if name == "alpha" else None
    meaning = f"{option.meaning[0].upper()}{option.meaning[1:]} ({users} only)."
    return name, float | None, setting(default, meaning)
