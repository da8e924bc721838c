"""The toy MI study: critics trained on correlated Gaussians with a known MI staircase.

Modules: :mod:`mitool.toy.config` (settings and their checks), :mod:`mitool.toy.batched`
(vectorised and plain-loop training; R runs as one model by :class:`mitool.stacked.StackedCritics`),
:mod:`mitool.toy.study` (cells, summaries, resumable sweeps), :mod:`mitool.toy.plots` (figures from
the CSVs). The bounds and critics are those of :mod:`mitool`; nothing here writes a loss formula.
"""
