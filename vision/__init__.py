"""Contrastive pretraining of vision encoders with the bounds of :mod:`mitool.bounds`.

Methods: :mod:`mitool.vision.moco` (MoCo v2), :mod:`mitool.vision.simo` (SiMo, EqCo paper),
:mod:`mitool.vision.simclr` (SimCLR and DCL); encoders in :mod:`mitool.vision.backbones`; the
training loop in :mod:`mitool.vision.train` with its settings in :mod:`mitool.vision.config`;
evaluation in :mod:`mitool.vision.knn`, :mod:`mitool.vision.evaluate` and
:mod:`mitool.vision.linear`; data in :mod:`mitool.vision.data` and :mod:`mitool.vision.augment`.
"""
