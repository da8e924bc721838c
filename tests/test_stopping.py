"""Early stopping (:mod:`mitool.estimators.stopping`): the kept step, the stop and the weights
restored, against the rule written out by hand."""

from __future__ import annotations

import doctest
import math

import pytest

from mitool.estimators import stopping

torch = pytest.importorskip("torch")


def test_the_kept_weights_are_those_of_the_best_score() -> None:
    layer = torch.nn.Linear(2, 1, bias=False)
    keep = stopping.KeepBest(layer, patience=3)
    scores = [0.5, 0.9, 0.7, 1.2, 1.1, 1.0, 1.15]
    weights_at = {}
    stopped = None
    for step, score in enumerate(scores, start=1):
        with torch.no_grad():
            layer.weight.fill_(float(step))  # the weights say at which step they were taken
        weights_at[step] = layer.weight.clone()
        if keep.stop(step, score):
            stopped = step
            break
    # by hand: best 1.2 at step 4; three scores without a better one end it at step 7
    assert (keep.best, keep.best_step, stopped) == (1.2, 4, 7)
    keep.restore()
    assert torch.equal(layer.weight, weights_at[4])


def test_a_score_that_is_not_finite_stops_at_once_and_keeps_the_last_good_weights() -> None:
    layer = torch.nn.Linear(1, 1)
    keep = stopping.KeepBest(layer, patience=100)
    assert not keep.stop(1, 0.3)
    assert keep.stop(2, math.nan)
    assert keep.best_step == 1


def test_a_start_value_is_a_score_to_beat() -> None:
    """The flow scores its Gaussian-copula start at step 0: training that never beats it keeps it."""
    layer = torch.nn.Linear(1, 1)
    start = layer.weight.clone()
    keep = stopping.KeepBest(layer, patience=2, start=1.0)
    with torch.no_grad():
        layer.weight.add_(1.0)
    assert [keep.stop(step, 0.5) for step in (1, 2)] == [False, True]
    keep.restore()
    assert keep.best_step == 0 and torch.equal(layer.weight, start)


def test_the_docstring_example_runs() -> None:
    assert doctest.testmod(stopping).failed == 0
