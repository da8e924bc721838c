"""Weighted k-nearest-neighbour classifier on frozen features (Wu, Xiong, Yu, Lin 2018, "Unsupervised
Feature Learning via Non-Parametric Instance Discrimination", arXiv 1805.01978; the monitor of the
MoCo CIFAR demo).

Features are L2-normalised. For a query q with the k memory items of highest cosine similarity
s_1..s_k (labels y_1..y_k), class c scores

    score_c(q) = sum_{j <= k, y_j = c} exp(s_j / t)          (k = 200, t = 0.1 by default)

and the prediction is the class of highest score; top-5 counts a hit when the true class is among
the five highest. Accuracies are fractions in [0, 1].

The scores come in two parts, :func:`knn_neighbours` (the k most similar memory items of each
query) and :func:`knn_votes`, so that a memory split across processes can be searched where it
lies: each process finds the k nearest of its share, and the k nearest of the W k candidates are
the k nearest of the whole memory (:func:`merge_neighbours`).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mitool._infra.progress import Progress
from mitool.vision.choices import KNN_K, KNN_TEMPERATURE

__all__ = [
    "extract_features",
    "knn_accuracy",
    "knn_class_scores",
    "knn_neighbours",
    "knn_votes",
    "merge_neighbours",
    "top_k_accuracy",
]


def knn_neighbours(
    queries: Tensor, memory: Tensor, memory_labels: Tensor, k: int = KNN_K, chunk_size: int = 1024
) -> tuple[Tensor, Tensor]:
    """(similarity, labels), each (Q, min(k, M)): the cosine similarities of every query's k most
    similar memory items, highest first, and their labels. queries (Q, D) and memory (M, D) are
    normalised here (in float32); memory_labels (M,) long. Queries go in chunks of ``chunk_size``
    so that the (chunk, M) similarity matrix stays small."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    queries = F.normalize(queries.float(), dim=1)
    memory = F.normalize(memory.float(), dim=1)
    memory_labels = memory_labels.to(memory.device)
    k = min(k, memory.shape[0])
    similarities, labels = [], []
    for start in range(0, queries.shape[0], chunk_size):
        top_similarity, top_index = (queries[start : start + chunk_size] @ memory.t()).topk(k, dim=1)
        similarities.append(top_similarity)
        labels.append(memory_labels[top_index])
    return torch.cat(similarities), torch.cat(labels)


def merge_neighbours(similarity: Tensor, labels: Tensor, k: int = KNN_K) -> tuple[Tensor, Tensor]:
    """The k most similar of candidate neighbours (Q, C) (e.g. the k nearest of each of W shares
    of the memory side by side), highest first; candidates of similarity -inf are padding."""
    top_similarity, position = similarity.topk(min(k, similarity.shape[1]), dim=1)
    return top_similarity, labels.gather(1, position)


def knn_votes(
    similarity: Tensor, labels: Tensor, num_classes: int, temperature: float = KNN_TEMPERATURE
) -> Tensor:
    """score_c(q) = sum over the neighbours of class c of exp(s / t): (Q, num_classes) from the
    neighbours' similarities and labels (Q, k) (padding of similarity -inf adds nothing)."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    votes = torch.zeros(similarity.shape[0], num_classes, device=similarity.device)
    return votes.scatter_add_(1, labels.clamp_min(0), torch.exp(similarity / temperature))


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
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    similarity, labels = knn_neighbours(queries, memory, memory_labels, k, chunk_size)
    return knn_votes(similarity, labels, num_classes, temperature)


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
    return top_k_accuracy(scores, query_labels)


def top_k_accuracy(scores: Tensor, labels: Tensor) -> tuple[float, float]:
    """(top-1, top-5) of class scores (Q, classes) against labels (Q,); top-5 is top-min(5, classes)."""
    ranked = scores.topk(min(5, scores.shape[1]), dim=1).indices.cpu()
    hits = ranked == labels.cpu()[:, None]
    return float(hits[:, 0].float().mean()), float(hits.any(dim=1).float().mean())


@torch.no_grad()
def extract_features(
    encoder: nn.Module,
    batches: Iterable[tuple[Tensor | None, Tensor, list[str]]],
    device: torch.device,
    total: int = 0,
    label: str = "features",
    progress: bool = False,
    precision: str = "fp32",
    allow_empty: bool = False,
) -> tuple[Tensor, Tensor]:
    """Run ``encoder`` in eval mode over ``(inputs, labels, skipped)`` batches (as made by
    mitool.vision.loader.make_loader); returns (features (N, D) float32 on ``device``, labels (N,)).
    ``precision`` "bf16" or "fp16": the encoder runs under that autocast (the features are returned
    in float32 all the same). The encoder's train/eval mode is restored afterwards. No readable
    image: ValueError, or with ``allow_empty`` empty tensors (a process's empty share of a set)."""
    was_training = encoder.training
    encoder.eval()
    features, labels = [], []
    bar = Progress(total, label, enabled=progress)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    try:
        for inputs, batch_labels, _skipped in batches:
            if inputs is not None:
                images = inputs.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
                with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
                    features.append(encoder(images).float())
                labels.append(batch_labels.to(device))
            bar.update()
    finally:
        bar.close()
        encoder.train(was_training)
    if not features:
        if not allow_empty:
            raise ValueError("no readable images to compute features from")
        return torch.empty(0, 0, device=device), torch.empty(0, dtype=torch.int64, device=device)
    return torch.cat(features), torch.cat(labels)
