"""Pieces shared by the momentum methods (MoCo, SiMo): the choice of bound and the EMA update.

Their scores are cosine similarities divided by a temperature tau: queries and keys are
L2-normalised embeddings, so q . k = cos(q, k) and the scores lie in [-1/tau, 1/tau]. The methods
hand the embeddings to :func:`mitool.fused.contrastive_bound`, which forms the scores chunk by
chunk and evaluates the named bound of :mod:`mitool.bounds` on them.
"""

from __future__ import annotations

import torch
from torch import nn

from mitool import bounds, checks

__all__ = ["check_bound", "momentum_update"]


def check_bound(name: str, options: dict[str, float] | None) -> tuple[str, dict[str, float]]:
    """``(name, options)`` checked for :func:`mitool.fused.contrastive_bound`: name one of
    :data:`mitool.bounds.INFONCE_FAMILY`, the options given (None counts as not given) among the
    bound's in :data:`mitool.bounds.BOUNDS` and valid; an option set from the scores' temperature
    (dclw's temperature) is the method's own and may not be given. ValueError otherwise."""
    entry = bounds.BOUNDS[checks.choice("bound", name, bounds.INFONCE_FAMILY)]
    given = {key: value for key, value in (options or {}).items() if value is not None}
    for option in entry.options:
        if option.score_temperature and option.name in given:
            raise checks.ParameterError(
                option.name, f"of bound {name!r} is the method's own temperature; leave it out"
            )
    checked = entry.check_options(given)
    return name, {key: checked[key] for key in given}


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
