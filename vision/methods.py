"""The registry of contrastive methods: the ``--method`` name -> the class that is the method.

Each class (a :class:`~mitool.vision.common.ContrastiveMethod`) holds the method's forward pass
and its rules: its defaults (per dataset where they differ), its size checks, what it can use of
a batch shortened by unreadable images, its BatchNorm and its help line. The settings
(:mod:`mitool.vision.config`), the training loop (:mod:`mitool.vision.train`) and the command line
read them here. Adding a method: write its file (see :mod:`mitool.vision.simclr`, the shortest)
and add its class to :data:`METHODS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from mitool import checks
from mitool.vision import distributed
from mitool.vision.backbones import build_backbone, split_batch_norm
from mitool.vision.common import ContrastiveMethod
from mitool.vision.moco import MoCo
from mitool.vision.simclr import SimCLR
from mitool.vision.simo import SiMo

if TYPE_CHECKING:
    from mitool.vision.config import PretrainConfig

__all__ = ["METHODS", "build_method", "method_class"]

METHODS: dict[str, type[ContrastiveMethod]] = {method.name: method for method in (MoCo, SiMo, SimCLR)}
"""The methods by name, in the order of the help text."""


def method_class(name: str) -> type[ContrastiveMethod]:
    """The class of method ``name`` (ParameterError("method", ...) naming the choices otherwise)."""
    return METHODS[checks.choice("method", name, METHODS)]


def build_method(config: PretrainConfig, in_channels: int, device: torch.device) -> ContrastiveMethod:
    """The method's module (query encoder, head, and the momentum encoder and queue where the
    method has them) on ``device`` in channels_last layout, with the BatchNorm the method asks for
    (:meth:`~mitool.vision.common.ContrastiveMethod.batch_norm`): split-BN groups, synchronised
    across processes, or local. ``config`` must have gone through
    :func:`mitool.vision.config.resolve_defaults`."""
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
