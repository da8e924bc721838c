"""The toy MI study: critics trained on correlated Gaussians with a known MI staircase.

Each run trains a critic with a *bound* of :mod:`mitool.bounds` and records the bound's estimate.
The command line calls the bounds "estimators" (``mitool toy sweep --estimators infonce,nwj``; the
``estimator`` column of curves.csv and summary.csv): each of those is a bound, not an estimator of
:mod:`mitool.estimators`. In the code they are bounds (:attr:`mitool.toy.config.RunSpec.bound`,
:attr:`mitool.toy.study.Grid.bounds`).

Modules: :mod:`mitool.toy.config` (settings and their checks), :mod:`mitool.toy.staircase` (the
schedule of true-MI stages), :mod:`mitool.toy.batched` (vectorised and plain-loop training; R runs
as one model by :class:`mitool.stacked.StackedCritics`), :mod:`mitool.toy.study` (cells, summaries,
resumable sweeps), :mod:`mitool.toy.plots` (figures from the CSVs). The bounds and critics are those
of :mod:`mitool`; nothing here writes a loss formula.
"""
