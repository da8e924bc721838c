"""The contrastive methods by name: the class of each (:func:`method_class`) and the module a run
builds from its settings (:func:`build_method`).

The registry (:data:`~mitool.vision.method_specs.METHODS`: for each ``--method`` name its
summary, its defaults, what K means for it, and its class as ``module:Class``) is
:mod:`mitool.vision.method_specs`, which needs no torch. The class (a
:class:`~mitool.vision.common.ContrastiveMethod` in the method's own file:
:mod:`~mitool.vision.moco`, :mod:`~mitool.vision.simo`, :mod:`~mitool.vision.simclr`,
:mod:`~mitool.vision.nnclr`) loads when a run builds it (:func:`method_class`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from mitool.vision.method_specs import method_spec

if TYPE_CHECKING:
    import torch

    from mitool.vision.common import ContrastiveMethod
    from mitool.vision.config import PretrainConfig

__all__ = ["build_method", "method_class"]


def method_class(name: str) -> type[ContrastiveMethod]:
    """The class of method ``name`` (imported at this first use)."""
    module, _, attribute = method_spec(name).implementation.partition(":")
    return getattr(importlib.import_module(module), attribute)


def build_method(config: PretrainConfig, in_channels: int, device: torch.device) -> ContrastiveMethod:
    """The method's module (query encoder, head, and the momentum encoder and queue where the
    method has them) on ``device`` in channels_last layout, with the BatchNorm the method asks for
    (:meth:`~mitool.vision.common.ContrastiveMethod.batch_norm`): split-BN groups, synchronised
    across processes, or local. ``config`` must have gone through
    :func:`mitool.vision.config.resolve_defaults`."""
    import torch

    from mitool.vision import distributed
    from mitool.vision.backbones import build_backbone, split_batch_norm

    method = method_class(config.method)
    batch_norm = method.batch_norm(config, distributed.world_size())
    norm_layer = split_batch_norm(config.bn_splits) if batch_norm == "split" else None

    def make_backbone():
        return build_backbone(
            config.arch, in_channels, config.small_stem, config.zero_init_residual, norm_layer
        )

    model = method.from_config(config, make_backbone)
    if batch_norm == "sync":
        model = distributed.synchronise_batch_norm(model, device)
    return model.to(device, memory_format=torch.channels_last)
