"""Pieces shared by the momentum methods (MoCo, SiMo): the score function and the EMA update.

Scores are cosine similarities divided by a temperature tau, the ``pos`` and ``neg`` that every
bound of :mod:`mitool.bounds` takes. Queries and keys are L2-normalised embeddings, so
q . k = cos(q, k) and the scores lie in [-1/tau, 1/tau].
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["momentum_update", "query_key_scores"]


def query_key_scores(
    queries: Tensor,
    positive_keys: Tensor,
    negative_bank: Tensor,
    temperature: float,
    negative_index: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Scores of each query against its positive key and against a bank of negative keys.

        pos_i  = q_i . k_i / tau                          shape (B,)
        neg_ij = q_i . n_j / tau                          shape (B, M)     (all of the bank), or
        neg_ij = q_i . n_{index_ij} / tau                 shape (B, K)     (a subset per query)

    queries and positive_keys: (B, D), L2-normalised; negative_bank: (M, D), L2-normalised
    (MoCo's queue, or SiMo's keys of the global batch); negative_index: optional (B, K) long
    tensor of rows of the bank for each query. This is the one place where q @ bank.T is formed,
    so that a chunked or fused implementation can replace it.
    """
    pos = (queries * positive_keys).sum(dim=1) / temperature
    neg = queries @ negative_bank.t() / temperature
    if negative_index is not None:
        neg = neg.gather(1, negative_index)
    return pos, neg


@torch.no_grad()
def momentum_update(key_encoder: nn.Module, query_encoder: nn.Module, momentum: float) -> None:
    """theta_key <- m * theta_key + (1 - m) * theta_query for every parameter (He et al. 2020, eq. 2).

    Buffers (BatchNorm running statistics) are not averaged: the key encoder keeps its own.
    """
    for key_parameter, query_parameter in zip(
        key_encoder.parameters(), query_encoder.parameters(), strict=True
    ):
        key_parameter.lerp_(query_parameter.detach(), 1.0 - momentum)
