"""Early stopping for one network: keep its weights at the best held-out score, stop after
``patience`` scores without a better one, or at the first score past a time budget.

A held-out score s_t is read every few steps; the kept weights are those of

    t* = argmax_t s_t,

and training stops at the first t with ``patience`` scores after t* and none above s_{t*} (or at a
score that is not finite, or at the first score after ``max_seconds``). The scores must be "higher
is better": a loss is passed negated. The critics trained as a stack
(:mod:`mitool.estimators.critic_training`) follow the same rule per run, vectorised over the runs.
"""

from __future__ import annotations

import copy
import math
import time
from typing import Any

__all__ = ["KeepBest"]


class KeepBest:
    """The best score so far of ``module`` (anything with ``state_dict``/``load_state_dict``), its
    step and a copy of its weights then.

    Examples
    --------
    >>> import torch
    >>> layer = torch.nn.Linear(1, 1)
    >>> keep = KeepBest(layer, patience=2)
    >>> [keep.stop(step, score) for step, score in enumerate([1.0, 3.0, 2.0, 2.5], start=1)]
    [False, False, False, True]
    >>> keep.best_step, keep.best
    (2, 3.0)
    """

    def __init__(
        self, module: Any, patience: int, start: float = -math.inf, max_seconds: float = math.inf
    ) -> None:
        self.module, self.patience, self.max_seconds = module, patience, max_seconds
        self.best, self.best_step, self.misses = start, 0, 0
        self.started = time.perf_counter()
        self._weights = copy.deepcopy(module.state_dict())

    def stop(self, step: int, score: float) -> bool:
        """Record the held-out ``score`` at ``step``; True when training should end."""
        out_of_time = time.perf_counter() - self.started > self.max_seconds
        if score > self.best:
            self.best, self.best_step, self.misses = score, step, 0
            self._weights = copy.deepcopy(self.module.state_dict())
            return out_of_time
        self.misses += 1
        return self.misses >= self.patience or not math.isfinite(score) or out_of_time

    def restore(self) -> None:
        """Load the kept weights back into the module."""
        self.module.load_state_dict(self._weights)
