"""The Gaussian estimate: the MI of the Gaussian with the sample covariance, bias-corrected, and its
conditional form.

    I(X; Y)     = 1/2 [log det S_X + log det S_Y - log det S_XY]
                = -1/2 sum_i log(1 - rho_i^2)             over the canonical correlations rho_i
    I(X; Y | Z) = 1/2 [log det S_XZ + log det S_YZ - log det S_Z - log det S_XYZ]

with S_A the sample covariance of the coordinates A. Exact for Gaussians up to sampling, and
corrected for the bias of the log-determinant of a sample covariance with n - 1 degrees of freedom:
E log det S = log det Sigma + sum_{i=1..d} psi((n - i) / 2) + d log(2 / (n - 1)). Elsewhere it is
the MI of the Gaussian with the same covariance, a reference rather than an estimate: it sees only
linear dependence (0 for y = x^2 with symmetric x). For one-dimensional X and Y on rank normal
scores it is the Gaussian-copula MI, a lower bound on the MI (Ince et al. 2017).

The interval comes from disjoint subsets of the pairs (:mod:`mitool.estimators.subsets`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np

from mitool import checks
from mitool.estimators.base import Estimate, Estimator, setting
from mitool.estimators.rows import refuse_collinear
from mitool.estimators.subsets import SubsetSettings, subset_estimate

__all__ = [
    "Gaussian",
    "GaussianSettings",
    "gaussian_conditional_mi",
    "gaussian_mi",
    "log_det_bias",
    "plugin_mi_bias",
    "COLLINEARITY",
]


def log_det_bias(dim: int, degrees: int) -> float:
    """E log det S - log det Sigma for a d-dimensional sample covariance S with ``degrees`` = n - 1."""
    from scipy.special import digamma

    if dim == 0:
        return 0.0
    return float(
        sum(digamma((degrees + 1 - i) / 2.0) for i in range(1, dim + 1)) + dim * math.log(2.0 / degrees)
    )


COLLINEARITY = 1e-5
"""A side whose correlation matrix has smallest eigenvalue below this fraction of the largest is
refused (:func:`mitool.estimators.rows.refuse_collinear`): 16 x 16 images of bumps and rectangles
(1e-16, 9e-6) gave -55 to +301 nats against truths of 2.5 to 10 (the highmi suite, n = 10 000)."""


def plugin_mi_bias(dim_x: int, dim_y: int, degrees: int) -> float:
    """The bias of the plug-in Gaussian MI 1/2 [log det S_X + log det S_Y - log det S_XY] of a sample
    covariance with ``degrees`` = n - 1, under the Gaussian: 1/2 [b(dx) + b(dy) - b(dx + dy)],
    b = :func:`log_det_bias` (about dx dy / 2n nats: 0.30 for 64 x 64 dimensions and 6800 pairs)."""
    joint = log_det_bias(dim_x + dim_y, degrees)
    return 0.5 * (log_det_bias(dim_x, degrees) + log_det_bias(dim_y, degrees) - joint)


def _log_det_terms(data: np.ndarray, blocks: dict[str, list[int]], bias_correction: bool) -> dict[str, float]:
    """log det of the correlation matrix of each block of columns of ``data`` (the variances cancel
    in every MI formula), less its bias when asked."""
    correlation = np.atleast_2d(np.corrcoef(data, rowvar=False))
    terms = {}
    for name, columns in blocks.items():
        value = float(np.linalg.slogdet(correlation[np.ix_(columns, columns)])[1]) if columns else 0.0
        terms[name] = value - (log_det_bias(len(columns), len(data) - 1) if bias_correction else 0.0)
    return terms


def gaussian_mi(x: np.ndarray, y: np.ndarray, bias_correction: bool = True) -> float:
    """The MI of the Gaussian with the sample covariance of (x, y), nats (see the module); needs
    more pairs than dx + dy + 1."""
    n, dim_x, dim_y = len(x), x.shape[1], y.shape[1]
    if n <= dim_x + dim_y + 1:
        raise checks.TooFewSamples(
            "x", f"has too few samples ({n}) for a {dim_x + dim_y}-dimensional covariance"
        )
    columns_x, columns_y = list(range(dim_x)), list(range(dim_x, dim_x + dim_y))
    terms = _log_det_terms(np.hstack([x, y]), {"x": columns_x, "y": columns_y, "xy": columns_x + columns_y},
                           bias_correction)  # fmt: skip
    return 0.5 * (terms["x"] + terms["y"] - terms["xy"])


def gaussian_conditional_mi(
    x: np.ndarray, y: np.ndarray, z: np.ndarray, bias_correction: bool = True
) -> float:
    """I(X; Y | Z) of the Gaussian with the sample covariance of (x, y, z), nats (see the module)."""
    n, dims = len(x), (x.shape[1], y.shape[1], z.shape[1])
    if n <= sum(dims) + 1:
        raise checks.TooFewSamples("x", f"has too few samples ({n}) for a {sum(dims)}-dimensional covariance")
    cx, cy = list(range(dims[0])), list(range(dims[0], dims[0] + dims[1]))
    cz = list(range(dims[0] + dims[1], sum(dims)))
    terms = _log_det_terms(np.hstack([x, y, z]), {"xz": cx + cz, "yz": cy + cz, "z": cz, "xyz": cx + cy + cz},
                           bias_correction)  # fmt: skip
    return 0.5 * (terms["xz"] + terms["yz"] - terms["z"] - terms["xyz"])


@dataclass(frozen=True)
class GaussianSettings(SubsetSettings):
    bias_correction: bool = setting(True, "Remove the small-sample bias of the log-determinants.")


class Gaussian(Estimator):
    """The MI of the Gaussian with the sample covariance, bias-corrected, and its conditional form:

        I(X; Y)     = 1/2 [log det S_X + log det S_Y - log det S_XY]
        I(X; Y | Z) = 1/2 [log det S_XZ + log det S_YZ - log det S_Z - log det S_XYZ]

    exact for Gaussians up to sampling, the MI of the linear dependence alone elsewhere (on rank
    normal scores of one-dimensional X and Y, the Gaussian-copula MI of Ince et al. 2017). The
    interval comes from disjoint subsets of the pairs.

    Examples
    --------
    >>> import numpy as np
    >>> from mitool import estimators
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(1000, 2))
    >>> y = x + rng.normal(size=(1000, 2))               # I(X; Y) = 2 log(2) / 2 = 0.69 nats
    >>> result = estimators.get("gaussian").estimate(x, y)
    >>> bool(abs(result.value - 0.69) < 0.1)
    True
    >>> z = rng.normal(size=1000)                        # independent of both: I(X; Y | Z) = I(X; Y)
    >>> bool(abs(estimators.get("gaussian").estimate(x, y, z).value - result.value) < 0.05)
    True
    """

    name = "gaussian"
    summary = "MI of the Gaussian with the sample covariance (CCA), bias-corrected; conditional too"
    value_is = "exact for Gaussians; elsewhere the MI of their linear dependence only"
    cases = frozenset({"continuous", "low-dimension", "surface", "conditional"})
    Settings = GaussianSettings
    rank = 20

    def minimum_pairs(self, dim_x: int, dim_y: int, dim_z: int = 0) -> int:
        return dim_x + dim_y + dim_z + 10

    def _estimate(self, x, y, z, seed, progress) -> Estimate:
        for name, rows in (("x", x), ("y", y), ("z", z)):
            constant = [] if rows is None else np.flatnonzero(np.ptp(rows, axis=0) == 0)
            if len(constant):
                raise checks.ParameterError(
                    name, f"column {constant[0]} is constant: its correlations are undefined; leave it out "
                    "(mitool.estimate does: a constant column carries no information)",
                )  # fmt: skip
            if rows is not None:
                refuse_collinear(name, rows, COLLINEARITY)
        correct = self.settings.bias_correction
        function = (partial(gaussian_mi, bias_correction=correct) if z is None
                    else partial(gaussian_conditional_mi, bias_correction=correct))  # fmt: skip
        return subset_estimate(self, function, x, y, seed, z=z,
                               progress=progress, details={"bias_correction": correct})  # fmt: skip


ESTIMATORS = [Gaussian]
