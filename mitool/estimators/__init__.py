"""Every estimator of mitool, by name, behind one protocol (:mod:`mitool.estimators.base`):

    from mitool import estimators
    result = estimators.get("ksg", k=5).estimate(x, y)      # an Estimate; float(result) is the value
    estimators.names()                                      # every name

The registry finds the estimators itself: every module of this package that defines a list
``ESTIMATORS`` of :class:`~mitool.estimators.base.Estimator` classes adds them (one per bound in
:mod:`~mitool.estimators.neural`, KSG in :mod:`~mitool.estimators.ksg`, ...). Adding an estimator is
one file here plus its test. Reading the registry imports no torch: the estimators load it when they
train (the command line lists them, their settings and their help in a fraction of a second).

Why mitool has four registries of four forms, each listed without loading torch: the estimators
are found by module, so that adding one is a file (their modules import no torch at the top); the
bounds (:data:`mitool.bounds.BOUNDS`) are a table of objects, their functions all in one module
that loads torch only when a bound runs, and the table states their options and which may evaluate
which; the critics (:data:`mitool.critics.CRITICS`) are named by class name, because a critic is an
``nn.Module`` subclass, whose class statement needs torch, all in one module; the vision methods
(:data:`mitool.vision.method_specs.METHODS`) name their class as ``module:Class``, because each is a
module of its own that imports torch at the top.

:data:`DEFAULTS` names the estimator :func:`mitool.estimate` uses for each kind of data
(:data:`~mitool.estimators.base.CASES`) when none is asked for.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass, field

from mitool import checks
from mitool.estimators.base import CASES, DivergenceError, Estimate, Estimator, EstimatorSettings

__all__ = [
    "CASES",
    "DEFAULTS",
    "LARGE_SAMPLE",
    "SMALL_SAMPLE",
    "Default",
    "DivergenceError",
    "Estimate",
    "Estimator",
    "EstimatorSettings",
    "estimator_class",
    "get",
    "names",
    "registry",
]


FEWEST_NEIGHBOURS = 3
"""The least k of a k-NN default whose k shrinks with n (:attr:`Default.pairs_per_neighbour`): the
k of Kraskov et al.'s and scikit-learn's estimates."""

SMALL_SAMPLE = 3000
"""Below this many pairs the default's estimator takes :attr:`Default.small_sample` as well."""

LARGE_SAMPLE = 8000
"""From this many pairs the default's estimator takes :attr:`Default.large_sample` as well."""


@dataclass(frozen=True)
class Default:
    """The estimator for a kind of data: its name, the settings that differ from its own defaults,
    and those added below :data:`SMALL_SAMPLE` pairs (``small_sample``) and from
    :data:`LARGE_SAMPLE` pairs (``large_sample``)."""

    name: str
    settings: dict[str, object] = field(default_factory=dict)
    small_sample: dict[str, object] = field(default_factory=dict)
    large_sample: dict[str, object] = field(default_factory=dict)
    pairs_per_neighbour: int = 0
    """Where above 0, a k-NN estimator's ``k`` is at most n / pairs_per_neighbour (and at least
    :data:`FEWEST_NEIGHBOURS`): a k chosen for hundreds of pairs, on a table of 32, would average over
    most of the table."""

    def settings_for(self, n: int) -> dict[str, object]:
        """The settings for n pairs."""
        settings = {
            **self.settings,
            **(self.small_sample if n < SMALL_SAMPLE else {}),
            **(self.large_sample if n >= LARGE_SAMPLE else {}),
        }
        if self.pairs_per_neighbour and "k" in settings:
            settings["k"] = min(int(settings["k"]), max(FEWEST_NEIGHBOURS, n // self.pairs_per_neighbour))
        return settings

    def by_size(self) -> list[tuple[str, str, dict[str, object]]]:
        """The settings that hold for some sizes only: (those sizes in words, the other sizes in
        words, the settings), as ("below 3000 pairs", "from 3000 pairs", {"folds": 5})."""
        bands = (
            (f"below {SMALL_SAMPLE} pairs", f"from {SMALL_SAMPLE} pairs", self.small_sample),
            (f"from {LARGE_SAMPLE} pairs", f"below {LARGE_SAMPLE} pairs", self.large_sample),
        )
        return [band for band in bands if band[2]]

    def describe(self) -> str:
        """The settings in words (the README's table of defaults)."""
        words = ", ".join(f"{key}={value}" for key, value in self.settings.items()) or "its own defaults"
        for sizes, _, settings in self.by_size():
            words += f"; {sizes}: " + ", ".join(f"{key}={value}" for key, value in settings.items())
        return words


DEFAULTS: dict[str, Default] = {
    "continuous": Default(
        "infonce",
        {"ensemble": 2, "normalise": "auto", "base": "mixed", "steps": 20_000, "max_seconds": 600.0},
        small_sample={
            "folds": 5,
            "normalise": "rank",
            "shrink_base": True,
            "extrapolate_negatives": True,
            "radial_terms": 2,
        },
    ),
    "low-dimension": Default("ksg", {"normalise": "rank", "adapt_k": True, "variant": 2}),
    "surface": Default("flow", {"encode": True}),
    "discrete": Default("plugin"),
    "discrete-y": Default("ross"),
    "discrete-y-high-dimension": Default("classifier"),
    "ties": Default("atoms"),
    "conditional": Default("neural-chain"),
}
"""The estimator for each kind of data when none is asked for (how each setting was chosen, with
the measurements: docs/mi-benchmark.md, "The default, and the routes measured to choose it").

* continuous data: InfoNCE with an ensemble of two critics (the second without the Gaussian
  base, ``base="mixed"``), on rank scores or z-scores, whichever validates higher by
  :data:`~mitool.estimators.neural.AUTO_MARGIN` standard errors (``normalise="auto"``); below
  :data:`SMALL_SAMPLE` pairs cross-fitted on rank scores (``folds=5``), the Gaussian base fitted by
  regularised CCA (``shrink_base``), the held-out value carried to infinitely many negatives
  (``extrapolate_negatives``: Richardson's rule) and a radial candidate of two terms
  (``radial_terms=2``); training ends when the held-out value stops rising (patience), at most
  20 000 steps and a budget of 600 s (``max_seconds``; the estimate says when either ended it);
* three dimensions or fewer: KSG's estimator II on rank scores, k by Lepski's rule;
* images near a surface of lower dimension: the flows, each such side encoded first;
* discrete data: the Miller-Madow plug-in; a discrete Y: Ross's k-NN estimator, or the classifier
  in high dimension; ties that are point masses: the chain rule over the atoms; given Z: the
  neural chain rule."""


@functools.cache
def registry() -> dict[str, type[Estimator]]:
    """Every estimator class by name, from the modules of this package (see the module)."""
    found: dict[str, type[Estimator]] = {}
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        for estimator in getattr(module, "ESTIMATORS", ()):
            if estimator.name in found:
                raise RuntimeError(f"two estimators are called {estimator.name!r}")
            found[estimator.name] = estimator
    order = sorted(
        found.values(), key=lambda estimator: estimator.rank
    )  # stable: discovery order within a rank
    return {estimator.name: estimator for estimator in order}


def names() -> tuple[str, ...]:
    """Every estimator's name."""
    return tuple(registry())


def estimator_class(name: str) -> type[Estimator]:
    """The class of the estimator called ``name`` (ParameterError "estimator ..." naming the choices)."""
    return registry()[checks.choice("estimator", name, registry())]


def get(name: str, **settings: object) -> Estimator:
    """The estimator called ``name`` with ``settings`` (ParameterError for an unknown name or setting)."""
    return estimator_class(name)(**settings)
