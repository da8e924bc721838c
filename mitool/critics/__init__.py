"""Critic networks f(x, y) that score pairs for the bounds of :mod:`mitool.bounds`.

Every critic is an ``nn.Module`` with two ways to score:

* ``critic(x, y)`` -> (B, M): the all-pairs matrix S[i, j] = f(x_i, y_j) for anchors x (B, dx) and
  candidates y (M, dy). With ``y`` the partners of ``x`` (M = B) the positives sit on the diagonal:
  ``mitool.bounds.split_scores(critic(x, y))`` gives ``(pos, neg)`` with K = B - 1.
  With ``y`` a separate pool of K samples of the marginal p(y) it gives ``neg`` of shape (B, K)
  directly (the K >= B case).
* ``critic.pair_scores(x, y)`` -> (B,): f(x_i, y_i) for matched rows, i.e. ``pos``, without
  scoring every pair.

:func:`bound_scores` gives both, ``(pos, neg)`` as the bounds take them, for either kind of
negatives.

Each critic's arithmetic is written once, in :meth:`Critic.all_pairs` and
:meth:`Critic.matched_pairs`, as functions of explicit weights (a mapping like
``dict(critic.named_parameters())``). ``forward`` and ``pair_scores`` call them with the module's
own weights; :class:`mitool.stacked.StackedCritics` calls them with the weights of R critics stacked
along a leading run axis (R seeds trained at once), which the arithmetic carries through: every
Linear layer then runs as one batched matmul (:func:`linear`). A new critic subclasses
:class:`Critic` and writes these two methods with operations that accept a leading run axis
(``linear``, ``sequential``, ``@``, ``dim=-1``); nothing else is needed for it to be stacked.

Multi-layer perceptrons: ``hidden_layers`` counts the hidden layers, each Linear(width) followed by
the activation, and one output Linear follows, so ``hidden_layers=2`` means three Linear layers
(in -> width -> width -> out). This is what Poole et al. (2019) call "layers=2"; other code uses
"layers=2" for three hidden layers. The defaults (two hidden layers of width 256, ReLU, a 32-dim
embedding) are the toy protocol of the variational-bounds literature. The settings that size the
networks (:class:`NetworkSettings`, :class:`CriticSettings`) are declared here once for every
class that has them (the neural estimators', the classifier's, the toy study's), which lists them
with :meth:`~mitool.settings.Settings.shared` and may give them its own defaults.

Why the critics are named by class name (:data:`CRITICS`) and not held in a table of objects like
the bounds (:data:`mitool.bounds.BOUNDS`): a bound is a function that loads torch when it runs,
but a critic is an ``nn.Module`` subclass, whose class statement needs torch; the names let the
command line list and check the critics without loading torch (:func:`critic_class` imports the
class at its first use).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from importlib import import_module
from typing import TYPE_CHECKING

from mitool import checks
from mitool.settings import Settings, setting

if TYPE_CHECKING:
    from mitool.critics.networks import Critic

__all__ = [
    "ACTIVATIONS",
    "CRITICS",
    "NAMES",
    "BilinearCritic",
    "ConcatCritic",
    "CosineCritic",
    "Critic",
    "CriticSettings",
    "NetworkSettings",
    "SeparableCritic",
    "Weights",
    "bound_scores",
    "critic_class",
    "linear",
    "make_critic",
    "mlp",
    "option_names",
    "pick_options",
    "sequential",
]

CRITICS: dict[str, tuple[str, str]] = {
    "separable": ("SeparableCritic", "g(x) . h(y), two MLP embeddings (all pairs in one matmul)"),
    "concat": ("ConcatCritic", "MLP([x, y]) on every pair"),
    "bilinear": ("BilinearCritic", "x' W y"),
    "cosine": ("CosineCritic", "cos(g(x), h(y)) / temperature, scores in [-1/T, 1/T]"),
}
"""The critics by name: the class in :mod:`mitool.critics.networks` and a one-line summary. This
table needs no torch (the command line reads it); the classes load at their first use."""

NAMES: tuple[str, ...] = tuple(CRITICS)


@dataclass(frozen=True)
class NetworkSettings(Settings):
    """The size of an MLP (:func:`mlp`) and the device it runs on, as every network of mitool has
    them (a neural estimator's critic, the classifier, the toy study's critics), with the critics'
    defaults; the settings classes that have them take them with
    :meth:`~mitool.settings.Settings.shared`."""

    hidden: int = setting(256, "Width of the MLPs.", partial(checks.whole_number, minimum=1))
    hidden_layers: int = setting(
        2, "Hidden layers of the MLPs (at least 1: the concat critic needs one, and without one a separable "
        "critic is bilinear).", partial(checks.whole_number, minimum=1),
    )  # fmt: skip
    device: str = setting("cpu", "torch device: cpu, cuda, cuda:N.")


@dataclass(frozen=True)
class CriticSettings(NetworkSettings):
    """:class:`NetworkSettings` and the options of the critics that embed X and Y (those that a
    critic does not take are left out when it is made: :func:`pick_options`)."""

    embed_dim: int = setting(
        32, "Embedding size of the separable and cosine critics.", partial(checks.whole_number, minimum=1)
    )
    temperature: float = setting(
        0.1, "Temperature of the cosine critic (scores in [-1/T, 1/T]).", checks.positive
    )


_FROM_NETWORKS = {
    "ACTIVATIONS", "BilinearCritic", "ConcatCritic", "CosineCritic", "Critic", "SeparableCritic", "Weights",
    "bound_scores", "linear", "mlp", "sequential",
}  # fmt: skip


def __getattr__(name: str) -> object:
    if name in _FROM_NETWORKS:
        return getattr(import_module("mitool.critics.networks"), name)
    raise AttributeError(f"module 'mitool.critics' has no attribute {name!r}")


def critic_class(name: str) -> type[Critic]:
    """The class of the critic called ``name`` (one of :data:`NAMES`)."""
    checks.choice("name", name, NAMES)
    return getattr(import_module("mitool.critics.networks"), CRITICS[name][0])


def option_names(name: str) -> tuple[str, ...]:
    """The keyword options that critic ``name`` takes (its constructor's, after x_dim and y_dim)."""
    parameters = list(inspect.signature(critic_class(name)).parameters)
    return tuple(parameters[2:])


def pick_options(name: str, settings: Mapping[str, object]) -> dict[str, object]:
    """The options of critic ``name`` taken from ``settings``, a mapping that may hold other
    settings too (a study's embed_dim, hidden, temperature, ...); those absent or None are left to
    the critic's defaults."""
    return {key: settings[key] for key in option_names(name) if settings.get(key) is not None}


def make_critic(name: str, x_dim: int, y_dim: int, **options: object) -> Critic:
    """Build the critic called ``name`` (one of :data:`NAMES`) with its keyword options
    (``embed_dim``, ``hidden``, ``hidden_layers``, ``activation``, ``temperature`` where they apply)."""
    checks.whole_number("x_dim", x_dim, 1)
    checks.whole_number("y_dim", y_dim, 1)
    try:
        return critic_class(name)(x_dim, y_dim, **options)
    except TypeError as error:  # an option this critic does not take
        raise ValueError(f"critic {name!r}: {error}") from None
