"""The weighted kNN classifier against a plain per-query implementation, and on a case with a
known answer."""

from __future__ import annotations

import math

import pytest
import torch

from mitool.vision.evaluate import spread_subset
from mitool.vision.knn import extract_features, knn_accuracy, knn_class_scores


def _plain_scores(queries, memory, labels, classes, k, temperature):
    """One query at a time, in float64, with Python sorting."""
    rows = []
    for query in queries.double():
        similarities = []
        for item, label in zip(memory.double(), labels.tolist(), strict=True):
            cosine = float(query @ item / (query.norm() * item.norm()))
            similarities.append((cosine, label))
        similarities.sort(key=lambda pair: -pair[0])
        votes = [0.0] * classes
        for cosine, label in similarities[:k]:
            votes[label] += math.exp(cosine / temperature)
        rows.append(votes)
    return torch.tensor(rows, dtype=torch.float64)


@pytest.mark.parametrize(("k", "chunk_size"), [(7, 4), (200, 1024)])
def test_knn_scores_match_a_plain_implementation(k: int, chunk_size: int) -> None:
    torch.manual_seed(0)
    queries, memory = torch.randn(9, 6), torch.randn(40, 6) * 3
    labels = torch.randint(0, 4, (40,))
    scores = knn_class_scores(queries, memory, labels, 4, k=k, temperature=0.1, chunk_size=chunk_size)
    expected = _plain_scores(queries, memory, labels, 4, min(k, 40), 0.1)
    assert torch.allclose(scores.double(), expected, rtol=1e-4)


def test_knn_accuracy_on_a_known_case() -> None:
    # memory: class c sits at angle c * 90 degrees; queries near the classes 0, 1, 2, 3, and one
    # query of class 0 placed next to class 1 (a miss at top-1, a hit at top-2..5)
    angles = torch.tensor([0.0, 0.0, 90.0, 90.0, 180.0, 180.0, 270.0, 270.0]) * math.pi / 180
    memory = torch.stack([angles.cos(), angles.sin()], dim=1)
    memory_labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    query_angles = torch.tensor([5.0, 95.0, 185.0, 265.0, 80.0]) * math.pi / 180
    queries = torch.stack([query_angles.cos(), query_angles.sin()], dim=1)
    query_labels = torch.tensor([0, 1, 2, 3, 0])
    top1, top5 = knn_accuracy(queries, query_labels, memory, memory_labels, 4, k=2, temperature=0.1)
    assert top1 == pytest.approx(4 / 5) and top5 == 1.0


def test_extract_features_skips_empty_batches_and_restores_the_mode() -> None:
    encoder = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3), torch.nn.BatchNorm1d(3))
    encoder.train()
    batches = [(torch.randn(2, 3, 2, 2), torch.tensor([0, 1]), []), (None, torch.zeros(0), ["bad.jpg"])]
    features, labels = extract_features(encoder, batches, torch.device("cpu"))
    assert features.shape == (2, 3) and labels.tolist() == [0, 1] and encoder.training
    expected = encoder.eval()(batches[0][0])
    assert torch.allclose(features, expected)


def test_spread_subset_keeps_every_class() -> None:
    data = list(range(100))
    subset = spread_subset(data, 10)
    picked = [subset[i] for i in range(len(subset))]
    assert len(picked) == 10 and picked[0] == 0 and picked[-1] == 99
    assert len({item % 10 for item in picked}) >= 5
    assert spread_subset(data, None) is data and spread_subset(data, 1000) is data


@pytest.mark.parametrize("k", [5, 30])
def test_the_k_nearest_of_memory_shares_merge_into_the_k_nearest_of_the_whole(k: int) -> None:
    """What the sharded kNN monitor does: the k nearest of each share (padded with -inf where a
    share holds fewer than k), side by side, then the k best: the scores of the whole memory."""
    import torch.nn.functional as F

    from mitool.vision.knn import knn_neighbours, knn_votes, merge_neighbours

    torch.manual_seed(0)
    queries, memory = torch.randn(9, 6), torch.randn(40, 6)
    labels = torch.randint(0, 4, (40,))
    parts = []
    for share in (slice(0, 17), slice(17, 40)):
        similarity, share_labels = knn_neighbours(queries, memory[share], labels[share], k)
        pad = k - similarity.shape[1]
        parts.append((F.pad(similarity, (0, pad), value=float("-inf")), F.pad(share_labels, (0, pad))))
    merged = merge_neighbours(torch.cat([p[0] for p in parts], 1), torch.cat([p[1] for p in parts], 1), k)
    expected = knn_class_scores(queries, memory, labels, 4, k=k, temperature=0.1)
    assert torch.allclose(knn_votes(*merged, 4, 0.1), expected, rtol=1e-6)
