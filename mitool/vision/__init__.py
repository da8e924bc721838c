"""Contrastive pretraining of vision encoders with the bounds of :mod:`mitool.bounds`.

Methods: :mod:`mitool.vision.moco` (MoCo v2), :mod:`mitool.vision.simo` (SiMo, EqCo paper),
:mod:`mitool.vision.simclr` (SimCLR and DCL), :mod:`mitool.vision.nnclr` (NNCLR, with any bound:
NNCLR + DCL), each a class holding its rules, listed in the
registry :mod:`mitool.vision.method_specs` and built by :mod:`mitool.vision.methods` (their shared
base: :mod:`mitool.vision.common`); encoders
in :mod:`mitool.vision.backbones`; the training loop in :mod:`mitool.vision.train` with its
settings in :mod:`mitool.vision.config`; evaluation in :mod:`mitool.vision.knn`,
:mod:`mitool.vision.evaluate`, :mod:`mitool.vision.linear` and :mod:`mitool.vision.alignment`
(alignment and uniformity of the embeddings); the run's records in
:mod:`mitool.vision.records` (read by :mod:`mitool.vision.plot`); data in
:mod:`mitool.vision.datasets` (with the IDX reader :mod:`mitool.vision.idx`),
:mod:`mitool.vision.loader` and :mod:`mitool.vision.augment`.
"""
