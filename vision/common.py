"""Pieces shared by the momentum methods (MoCo, SiMo): the choice of bound and the EMA update.

Their scores are cosine similarities divided by a temperature tau: queries and keys are
L2-normalised embeddings, so q . k = cos(q, k) and the scores lie in [-1/tau, 1/tau]. The methods
hand the embeddings to :func:`mitool.fused.contrastive_bound`, which forms the scores chunk by
chunk and evaluates the named bound of :mod:`mitool.bounds` on them.
"""

from __future__ import annotations

import torch
from torch import nn

from mitool import bounds

__all__ = ["FUSED_BOUND_OPTIONS", "check_bound", "momentum_update"]

FUSED_BOUND_OPTIONS: dict[str, tuple[str, ...]] = {
    "infonce": (),
    "eqco": ("alpha",),
    "dcl": (),
    "dclw": ("sigma",),
}
"""The bounds a momentum method can use and the options it passes on to them (dclw's temperature
is the method's own tau, given by the method)."""


def check_bound(name: str, options: dict[str, float] | None) -> tuple[str, dict[str, float]]:
    """``(name, options)`` checked for :func:`mitool.fused.contrastive_bound`: name one of
    :data:`FUSED_BOUND_OPTIONS`, options among its allowed ones and valid for
    ``mitool.bounds.get`` (alpha > 0 given for eqco; sigma > 0). ValueError otherwise."""
    if name not in FUSED_BOUND_OPTIONS:
        raise ValueError(f"bound must be one of {', '.join(FUSED_BOUND_OPTIONS)}, got {name!r}")
    given = {key: value for key, value in (options or {}).items() if value is not None}
    unknown = sorted(set(given) - set(FUSED_BOUND_OPTIONS[name]))
    if unknown:
        allowed = ", ".join(FUSED_BOUND_OPTIONS[name]) or "none"
        raise ValueError(f"bound {name!r} takes no option {', '.join(unknown)} here; its options: {allowed}")
    bounds.get(name, **given)  # the bounds' own checks: eqco needs alpha, values > 0
    return name, {key: float(value) for key, value in given.items()}


@torch.no_grad()
def momentum_update(key_encoder: nn.Module, query_encoder: nn.Module, momentum: float) -> None:
    """theta_key <- m * theta_key + (1 - m) * theta_query for every parameter (He et al. 2020, eq. 2).

    Buffers (BatchNorm running statistics) are not averaged: the key encoder keeps its own.
    One multi-tensor ``torch._foreach_lerp_`` for all parameters: a ResNet-50 and its head have
    about 160 parameter tensors, and one operator per tensor costs more host time on a GPU than
    the arithmetic itself.
    """
    key_parameters = list(key_encoder.parameters())
    query_parameters = [parameter.detach() for parameter in query_encoder.parameters()]
    if len(key_parameters) != len(query_parameters):
        raise ValueError(
            f"key and query encoders must have the same parameters, got {len(key_parameters)} "
            f"and {len(query_parameters)} tensors"
        )
    torch._foreach_lerp_(key_parameters, query_parameters, 1.0 - momentum)
