"""A neural estimate for continuous X against discrete Y: the held-out cross-entropy of a classifier.

For any classifier q(y | x), I(X; Y) = H(Y) - H(Y | X) >= H(Y) + E log q(y | x) (Barber & Agakov
2003), with equality when q is the true p(y | x). A small MLP (GELU) learns q on the fit pairs with
the cross-entropy, kept at its best value on the validation pairs (early stopping); the estimate is
the mean over the held-out pairs of

    log q(y_i | x_i) - log p(y_i),      p(y) the classes' frequencies in the training pairs,

a lower bound up to sampling, its interval the Student-t interval over chunks of held-out pairs.
X is prepared by rank normal scores fitted on the training rows (:mod:`mitool.estimators.preparation`).
A class missing from the training pairs gets the smallest frequency seen there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from mitool import checks
from mitool.critics import NetworkSettings
from mitool.estimators.base import (
    Estimate,
    Estimator,
    EstimatorSettings,
    TrainingSettings,
    level_setting,
    mean_and_stderr,
)
from mitool.estimators.preparation import normal_scores, split_pairs
from mitool.estimators.rows import category_codes
from mitool.estimators.stopping import KeepBest
from mitool.settings import setting

__all__ = ["Classifier"]

_training, _network = TrainingSettings.shared, NetworkSettings.shared


@dataclass(frozen=True)
class ClassifierSettings(EstimatorSettings):
    """The training settings (:class:`~mitool.estimators.base.TrainingSettings`) and the network's
    (:class:`~mitool.critics.NetworkSettings`) with the classifier's own defaults, and its batch."""

    steps: int = _training("steps", 3000)
    batch_size: int = setting(256, "Training batch.", partial(checks.whole_number, minimum=1))
    lr: float = _training("lr", 1e-3)
    weight_decay: float = _training("weight_decay", 1e-4)
    hidden: int = _network("hidden", 64)
    hidden_layers: int = _network("hidden_layers", 3)
    test_fraction: float = _training("test_fraction")
    validation_fraction: float = _training("validation_fraction")
    eval_every: int = _training("eval_every")
    patience: int = _training("patience")
    max_seconds: float = _training("max_seconds")
    chunk: int = _training("chunk")
    level: float = level_setting()
    device: str = _network("device")


def _log_likelihoods(network: Any, x: Any, labels: Any) -> np.ndarray:
    """log q(y_i | x_i) of the held-out pairs under the trained classifier, float64."""
    import torch

    with torch.no_grad():
        log_q = torch.log_softmax(network(x), dim=1).gather(1, labels[:, None])[:, 0]
    return log_q.double().cpu().numpy()


class Classifier(Estimator):
    """The held-out cross-entropy of an MLP classifier of the discrete Y from the continuous X:
    I(X; Y) >= H(Y) + E log q(y | x) (Barber & Agakov 2003), the mean over held-out pairs of
    log q(y_i | x_i) - log p(y_i), a lower bound up to sampling.

    Examples
    --------
    X uniform on [0, 1] for class 0 and on [1, 2] for class 1: I = log 2 = 0.69 nats.

    >>> import numpy as np
    >>> from mitool import estimators
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 2, size=1000)
    >>> settings = dict(steps=200, lr=1e-2, batch_size=64, hidden=32, hidden_layers=1)
    >>> result = estimators.get("classifier", **settings).estimate(labels + rng.random(1000), labels)
    >>> bool(0.5 < result.value < 0.75)
    True
    """

    name = "classifier"
    summary = "held-out cross-entropy of an MLP classifier of the discrete Y from the continuous X"
    value_is = "a lower bound, H(Y) - cross-entropy, up to sampling"
    cases = frozenset({"discrete-y", "discrete-y-high-dimension"})
    Settings = ClassifierSettings
    rank = 32

    def minimum_pairs(self, dim_x: int, dim_y: int, dim_z: int = 0) -> int:
        return 100

    def _estimate(self, x, y, z, seed, progress) -> Estimate:
        import torch

        from mitool._infra.seeding import seeded
        from mitool.critics.networks import mlp

        settings = self.settings
        labels = category_codes(y)
        classes = int(labels.max()) + 1
        split = split_pairs(len(x), settings.test_fraction, settings.validation_fraction, seed)
        train, fit, validation, test = normal_scores(
            x[split.train], x[split.fit], x[split.validation], x[split.test]
        )
        counts = np.bincount(labels[split.train], minlength=classes).astype(float)
        log_prior = np.log(np.where(counts > 0, counts, counts[counts > 0].min()) / counts.sum())

        def tensor(array: np.ndarray, kind=torch.float32):
            return torch.as_tensor(array, dtype=kind, device=settings.device)

        with seeded(seed):  # the initial weights from a generator of their own
            network = mlp(x.shape[1], classes, settings.hidden, settings.hidden_layers, "gelu")
        network = network.to(settings.device)
        parts = {
            name: (tensor(rows), tensor(labels[index], torch.long))
            for name, rows, index in (
                ("fit", fit, split.fit),
                ("validation", validation, split.validation),
                ("test", test, split.test),
            )
        }
        kept_step = _train(network, parts["fit"], parts["validation"], settings, seed, progress)
        pointwise = _log_likelihoods(network, *parts["test"]) - log_prior[labels[split.test]]
        chunks = np.array(
            [part.mean() for part in np.array_split(pointwise, max(2, len(pointwise) // settings.chunk))]
        )
        return Estimate.from_stderr(
            *mean_and_stderr(chunks), settings.level, degrees=len(chunks) - 1, estimator=self.name,
            n_pairs=len(x),
            interval=f"Student-t interval over {len(chunks)} chunks of held-out pairs (noise of the held-out "
            "evaluation of this classifier; not retraining, not the bound's gap)",
            details={"classes": classes, "n_fit": len(split.fit), "n_validation": len(split.validation),
                     "n_test": len(split.test), "best_step": kept_step},
        )  # fmt: skip


def _train(network, fit, validation, settings: ClassifierSettings, seed: int, progress) -> int:
    """Train ``network`` with the cross-entropy on the fit rows; leave it at its best validation value
    (early stopping); returns the step kept."""
    import torch

    optimiser = torch.optim.AdamW(network.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    generator = torch.Generator().manual_seed(seed)
    (x_fit, y_fit), (x_validation, y_validation) = fit, validation
    keep = KeepBest(network, settings.patience, max_seconds=settings.max_seconds)
    for step in range(1, settings.steps + 1):
        rows = torch.randint(len(x_fit), (min(settings.batch_size, len(x_fit)),), generator=generator)
        loss = torch.nn.functional.cross_entropy(network(x_fit[rows]), y_fit[rows])
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
        if step % settings.eval_every:
            continue
        with torch.no_grad():
            value = float(torch.nn.functional.cross_entropy(network(x_validation), y_validation))
        if progress is not None:
            progress(step, settings.steps, math.nan)
        if keep.stop(step, -value):  # the score is the negated loss: higher is better
            break
    keep.restore()
    return keep.best_step


ESTIMATORS = [Classifier]
