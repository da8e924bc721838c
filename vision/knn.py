"""Weighted k-nearest-neighbour classifier on frozen features (Wu, Xiong, Yu, Lin 2018, "Unsupervised
Feature Learning via Non-Parametric Instance Discrimination", arXiv 1805.01978; the monitor of the
MoCo CIFAR demo).

Features are L2-normalised. For a query q with the k memory items of highest cosine similarity
s_1..s_k (labels y_1..y_k), class c scores

    score_c(q) = sum_{j <= k, y_j = c} exp(s_j / t)          (k = 200, t = 0.1 by default)

and the prediction is the class of highest score; top-5 counts a hit when the true class is among
the five highest. Accuracies are fractions in [0, 1].
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mitool.progress import Progress
from mitool.vision.choices import KNN_K, KNN_TEMPERATURE

__all__ = ["extract_features", "knn_accuracy", "knn_class_scores"]


def knn_class_scores(
    queries: Tensor,
    memory: Tensor,
    memory_labels: Tensor,
    num_classes: int,
    k: int = KNN_K,
    temperature: float = KNN_TEMPERATURE,
    chunk_size: int = 1024,
) -> Tensor:
    """score_c(q) for every query: (Q, num_classes). queries (Q, D) and memory (M, D) are
    normalised here; memory_labels (M,) long; k is capped at M. Queries go in chunks of
    ``chunk_size`` so that the (chunk, M) similarity matrix stays small."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    queries = F.normalize(queries.float(), dim=1)
    memory = F.normalize(memory.float(), dim=1)
    memory_labels = memory_labels.to(memory.device)
    k = min(k, memory.shape[0])
    scores = []
    for start in range(0, queries.shape[0], chunk_size):
        similarity = queries[start : start + chunk_size] @ memory.t()
        top_similarity, top_index = similarity.topk(k, dim=1)
        weights = torch.exp(top_similarity / temperature)
        votes = torch.zeros(similarity.shape[0], num_classes, device=memory.device)
        votes.scatter_add_(1, memory_labels[top_index], weights)
        scores.append(votes)
    return torch.cat(scores)


def knn_accuracy(
    queries: Tensor,
    query_labels: Tensor,
    memory: Tensor,
    memory_labels: Tensor,
    num_classes: int,
    k: int = KNN_K,
    temperature: float = KNN_TEMPERATURE,
) -> tuple[float, float]:
    """(top-1, top-5) accuracy of the weighted kNN classifier; top-5 is top-min(5, classes)."""
    scores = knn_class_scores(queries, memory, memory_labels, num_classes, k, temperature)
    ranked = scores.topk(min(5, num_classes), dim=1).indices.cpu()
    hits = ranked == query_labels.cpu()[:, None]
    return float(hits[:, 0].float().mean()), float(hits.any(dim=1).float().mean())


@torch.no_grad()
def extract_features(
    encoder: nn.Module,
    batches: Iterable[tuple[Tensor | None, Tensor, list[str]]],
    device: torch.device,
    total: int = 0,
    label: str = "features",
    progress: bool = False,
) -> tuple[Tensor, Tensor]:
    """Run ``encoder`` in eval mode over ``(inputs, labels, skipped)`` batches (as made by
    mitool.vision.loader.make_loader); returns (features (N, D) float32 on ``device``, labels (N,)).
    The encoder's train/eval mode is restored afterwards."""
    was_training = encoder.training
    encoder.eval()
    features, labels = [], []
    bar = Progress(total, label, enabled=progress)
    try:
        for inputs, batch_labels, _skipped in batches:
            if inputs is not None:
                images = inputs.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
                features.append(encoder(images).float())
                labels.append(batch_labels.to(device))
            bar.update()
    finally:
        bar.close()
        encoder.train(was_training)
    if not features:
        raise ValueError("no readable images to compute features from")
    return torch.cat(features), torch.cat(labels)
