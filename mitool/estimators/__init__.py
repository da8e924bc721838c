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
(:data:`mitool.vision.methods.METHODS`) name their class as ``module:Class``, because each is a
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
        {"ensemble": 2, "normalise": "auto", "base": "mixed"},
        small_sample={
            "folds": 5,
            "normalise": "rank",
            "shrink_base": True,
            "extrapolate_negatives": True,
            "radial_terms": 2,
        },
        large_sample={"steps": 4000},
    ),
    "low-dimension": Default("ksg", {"normalise": "rank", "adapt_k": True, "variant": 2}),
    "surface": Default("flow", {"encode": True}),
    "discrete": Default("plugin"),
    "discrete-y": Default("ross"),
    "discrete-y-high-dimension": Default("classifier"),
    "ties": Default("atoms"),
    "conditional": Default("neural-chain"),
}
"""The estimator for each kind of data when none is asked for (docs/mi-benchmark.md: how each was chosen).
Continuous data below :data:`SMALL_SAMPLE` pairs are cross-fitted (``folds=5``: every pair scored by
critics trained on the others, where one split scores a fifth): on bmi's own samples of its 40 v1
tasks at n = 1000 the mean absolute error went from 0.111 to 0.093 and the tasks within target from
25 to 30 (v2: 0.167 to 0.157, 14 to 16 of 26), for 2.4 times the time (4.5 to 10.8 s an estimate);
``python bench/bmi_samples.py --suite v1 --pairs 1000 --estimator default:folds=5``. At n = 2500, on the 30 v1
tasks that InfoNCE takes: 0.064 to 0.057 (9.5 to 22 s). At 5000 it would break the time target.
There too the Gaussian base is fitted by regularised CCA (``shrink_base``: each side's covariance
shrunk toward its diagonal by the share of :data:`~mitool.critics.gaussian.SHRINKAGES` whose
validation value is highest): with 640 fit rows in 50 + 50 dimensions plain CCA's directions
overfit, and on bmi's own samples at n = 1000 dense 50 x 50 went from -0.200 to -0.091 nats and
dense 25 x 25 from -0.090 to -0.050 (v1: MAE 0.081 to 0.078, 33 to 34 of 40 within target; v2:
0.102 to 0.098, 20 to 21 of 26); the others moved by at most 0.024 (spiral 3 x 3, -0.450 to -0.474).
There too the held-out value is carried to infinitely many negatives (``extrapolate_negatives``,
Richardson's rule 2 I_K - I_K' on the folds' blocks of 200, K = 199): InfoNCE's value for a fixed
critic falls short of its limit by about c / (K + 1), which grows with the MI (the analytic critic
of a 3-nat Gaussian: -0.117 at K = 199, -0.025 extrapolated; 1 nat: -0.001, +0.010). On bmi's own
samples at n = 1000 v1 went from 0.0775 to 0.0744 (34/40 both; dense 50 x 50 -0.091 to -0.076,
sparse 3 x 3 -0.056 to -0.041) and v2 from 0.0935 to 0.0917 (21/26 both), in the same time (10.7
and 14.3 s an estimate; ``python bench/bmi_samples.py --suite v1 --pairs 1000 --estimator
default:extrapolate_negatives=True``, before it was the default). The spirals, the largest errors
left, did not move: their critics, not K, fall short.
There too the radial candidate may take a second term (``radial_terms=2``: phi(x) = [x, x c, x c^2],
c = |x|^2/d - 1, each run keeping one or two terms by its validation value;
:mod:`mitool.critics.gaussian`), which follows a dependence that turns with the norm further: on
bmi's own samples at n = 1000 v1 went from 0.0744 to 0.0694 (34/40 both; spiral 5 x 5 -0.262 to
-0.142, spiral 3 x 3 -0.429 to -0.335) and v2 from 0.0917 to 0.0847 (21/26 both), 14.3 and 13.9 s an
estimate where the last run took 10.7 and 14.3 (``python bench/bmi_samples.py --suite v1 --pairs
1000``, and ``--suite v2``).
From :data:`SMALL_SAMPLE` pairs it trains on rank scores and on z-scores where the two differ
(``normalise="auto"``) and keeps z-scores only where their critics lead on the validation pairs by
more than :data:`~mitool.estimators.neural.AUTO_MARGIN` standard errors: on bmi's own samples at
n = 5000 that took the concentric Gaussians in 25 dimensions from -0.25 to -0.06 nats and v2's MAE
from 0.068 to 0.056 (with KSG's adapted k below, 0.044 and 23/26), kept rank scores on every v1
task, and took 7.8 and 6.4 s an estimate (4.7 before). Without the margin it had chosen z-scores
on validation values that early stopping had picked as the best of many (Student-t 5 x 5 at
n = 1000: 0.012 on the test pairs where rank scores gave 0.329; the ``highmi`` suite's Student-t
20 x 20 of 10 nats: 1.36 [-4.67, 7.38] where rank scores give 9.07); with it, both keep rank
scores. Below :data:`SMALL_SAMPLE` pairs rank scores alone: the validation pairs are too few to
choose on. Three dimensions or fewer go to KSG on rank scores with k chosen by Lepski's rule
(``adapt_k``, :func:`mitool.estimators.ksg.adapted_k`): on bmi's waves k = 5 blurred the sheets
(-0.59 nats at n = 5000), k = 1 gives -0.20; no other low-dimensional task of bmi's moved. There
it is KSG's estimator II (``variant=2``: each space its own side, hyper-rectangles in place of
cubes), which takes in fewer points of other sheets where the density is thin in one direction:
on bmi's own samples of its 17 tasks of three coordinates or fewer at n = 5000 the mean absolute
error went from 0.022 to 0.018 and waves from -0.202 to -0.163 (docs/mi-benchmark.md, "Waves:
KSG's second estimator").
From :data:`LARGE_SAMPLE` pairs InfoNCE's critics may train for 4000 steps where they stop at 2000
below (early stopping ends most runs well before either): at n = 10 000 the spirals' critics still
improved at 2000 steps, and mitool's float32 draws of bmi's 40 tasks went from a mean absolute error
of 0.0304 and 37/40 within target to 0.0280 and 39/40, the spirals alone changed
(docs/mi-benchmark.md, "bmi's 40 tasks at n = 10 000"). The ensemble's second critic starts
without the Gaussian base (``base="mixed"``: each split keeps the members' mean or one member,
whichever validates highest): on bmi's own samples at n = 5000 the spirals' base held the network
back, and v1 went from 0.032 and 37/40 to 0.030 and 38/40, v2 from 0.042 and 23/26 to 0.039 and
24/26 (spiral 3 x 3 -0.207 to -0.172), for 8.7 to 8.8 s an estimate; mitool's float32 draws at
n = 10 000: 0.0233 and 40/40, 0.0236 with KSG's second estimator below (docs/mi-benchmark.md,
"The spirals: an ensemble member that starts alone", and "bmi's 40 tasks at n = 10 000"). Images
(data given as (n, H, W) or (n, C, H, W) arrays) whose pixels lie near a surface of lower dimension
go to the flows, which encode such a side to the surface's dimension first
(:mod:`mitool.estimators.encoding`): on the ``highmi`` suite's images at n = 10 000 (bumps and
rectangles, 2.5 to 10 nats) every estimate came within 10% of the truth, where InfoNCE's MLP critic
was 26-52% short on four of the seven and capped on two."""


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
