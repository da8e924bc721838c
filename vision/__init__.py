"""Contrastive pretraining of vision encoders with the bounds of :mod:`mitool.bounds`.

Methods: :mod:`vision.moco` (MoCo v2), :mod:`vision.simo` (SiMo, EqCo paper), :mod:`vision.simclr`
(SimCLR and DCL); encoders in :mod:`vision.backbones`; the training loop in :mod:`vision.train`
with its settings in :mod:`vision.config`; evaluation in :mod:`vision.knn`, :mod:`vision.evaluate`
and :mod:`vision.linear`; data in :mod:`vision.data` and :mod:`vision.augment`.
"""
