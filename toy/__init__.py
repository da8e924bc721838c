"""The toy MI study: critics trained on correlated Gaussians with a known MI staircase.

Modules: :mod:`toy.config` (settings and their checks), :mod:`toy.stacked` (R critics as one model
with stacked weights), :mod:`toy.batched` (vectorised and plain-loop training), :mod:`toy.study`
(cells, summaries, resumable sweeps), :mod:`toy.plots` (figures from the CSVs),
:mod:`toy.estimate` (MI of the user's own paired samples), :mod:`toy.files` (atomic writes).
The bounds and critics are those of :mod:`mitool`; nothing here writes a loss formula.
"""
