"""The toy MI study: critics trained on correlated Gaussians with a known MI staircase.

Modules: :mod:`mitool.toy.config` (settings and their checks), :mod:`mitool.toy.stacked` (R critics
as one model with stacked weights), :mod:`mitool.toy.batched` (vectorised and plain-loop
training), :mod:`mitool.toy.study` (cells, summaries, resumable sweeps), :mod:`mitool.toy.plots`
(figures from the CSVs), :mod:`mitool.toy.estimate` (MI of the user's own paired samples).
The bounds and critics are those of :mod:`mitool`; nothing here writes a loss formula.
"""
