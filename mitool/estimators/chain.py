"""A neural estimate of conditional MI by the chain rule:

    I(X; Y | Z) = I(X; (Y, Z)) - I(X; Z),

each term an InfoNCE estimate with the settings of :mod:`mitool.estimators.neural` (one critic
each by default) on the same split of the pairs, with the same seed. Each term is a lower bound
up to sampling, so the difference is an estimate, not a bound (the errors of the two terms add,
and cancel where they share a bias: both critics see the same X, and the Gaussian base captures
the linear part of both). Its interval
combines the two terms' (their covariance left out)."""

from __future__ import annotations

import math

import numpy as np

from mitool import checks
from mitool.estimators.base import Estimate, Estimator
from mitool.estimators.neural import InfoNCE

__all__ = ["NeuralChain"]


class NeuralChain(Estimator):
    """Conditional MI by the chain rule, I(X; Y | Z) = I(X; (Y, Z)) - I(X; Z), each term an
    InfoNCE estimate (:class:`mitool.estimators.neural.InfoNCE`, its settings) on one split of the
    pairs with one seed; the interval combines the two terms' standard errors.

    Examples
    --------
    X = Z + e1 and Y = X + e2: I(X; Y | Z) = log(2) / 2 = 0.35 nats.

    >>> import numpy as np
    >>> from mitool import estimators
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=1000)
    >>> x = z + rng.normal(size=1000)
    >>> estimator = estimators.get("neural-chain", steps=50, hidden=16, hidden_layers=1, batch_size=32)
    >>> result = estimator.estimate(x, x + rng.normal(size=1000), z)
    >>> bool(abs(result.value - 0.35) < 0.25), sorted(result.details)[:2]
    (True, ['I(X; (Y, Z))', 'I(X; Z)'])
    """

    name = "neural-chain"
    summary = "conditional MI by the chain rule, I(X; (Y, Z)) - I(X; Z), two neural estimates on one split"
    value_is = "an estimate of I(X; Y | Z), the difference of two lower bounds"
    cases = frozenset({"conditional"})
    Settings = InfoNCE.Settings
    rank = 41

    def minimum_pairs(self, dim_x: int, dim_y: int, dim_z: int = 0) -> int:
        return InfoNCE(**vars(self.settings)).minimum_pairs(dim_x, dim_y + dim_z)

    def _estimate(self, x, y, z, seed, progress) -> Estimate:
        if z is None:
            raise checks.ParameterError("z", "must be given: neural-chain estimates I(X; Y | Z)")
        term = InfoNCE(**vars(self.settings))
        joint = term.estimate(x, np.hstack([y, z]), seed=seed, progress=progress)
        given = term.estimate(x, z, seed=seed)
        value = joint.value - given.value
        stderr = math.sqrt(joint.stderr**2 + given.stderr**2)
        interval = (
            "normal interval from the two terms' standard errors (evaluation noise of the critics; not "
            "retraining, not the bounds' bias)" if math.isfinite(stderr)
            else f"none: {joint.interval.removeprefix('none: ')}"
        )  # fmt: skip
        return Estimate.from_stderr(
            value, stderr, self.settings.level, interval=interval, estimator=self.name, n_pairs=len(x),
            details={"I(X; (Y, Z))": joint.value, "I(X; Z)": given.value,
                     "terms": [joint.as_dict(), given.as_dict()]},
        )  # fmt: skip


ESTIMATORS = [NeuralChain]
