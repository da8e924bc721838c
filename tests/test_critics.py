"""Critic shapes, the all-pairs matrix against per-pair scoring, and the K >= B path."""

from __future__ import annotations

import pytest
import torch

from mitool import bounds
from mitool.critics import NAMES, ConcatCritic, CosineCritic, SeparableCritic, make_critic


@pytest.mark.parametrize("name", NAMES)
def test_all_pairs_matrix_agrees_with_pair_scores(name: str) -> None:
    torch.manual_seed(0)
    critic = make_critic(name, 6, 4)
    x, y = torch.randn(9, 6), torch.randn(9, 4)
    matrix = critic(x, y)
    assert matrix.shape == (9, 9)
    assert torch.allclose(matrix.diagonal(), critic.pair_scores(x, y), atol=1e-5)
    # the (i, j) entry is f(x_i, y_j): score row 2 against column 5 on its own
    assert torch.allclose(matrix[2, 5], critic.pair_scores(x[2:3], y[5:6])[0], atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_scores_against_a_larger_pool_of_negatives(name: str) -> None:
    """K >= B: anchors scored against a separate pool of K marginal samples."""
    torch.manual_seed(1)
    critic = make_critic(name, 3, 3)
    x, y, pool = torch.randn(4, 3), torch.randn(4, 3), torch.randn(50, 3)
    pos, neg = critic.pair_scores(x, y), critic(x, pool)
    assert pos.shape == (4,) and neg.shape == (4, 50)
    result = bounds.infonce(pos, neg)
    result.loss.backward()
    assert all(p.grad is not None for p in critic.parameters())


def test_layer_count_matches_the_docstring() -> None:
    critic = SeparableCritic(20, 20)  # defaults: 2 hidden layers of 256, 32-dim embedding
    linear = [m for m in critic.embed_x if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linear] == [(20, 256), (256, 256), (256, 32)]
    concat = ConcatCritic(20, 20, hidden=64, hidden_layers=3)
    linear = [m for m in concat.net if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linear] == [(40, 64), (64, 64), (64, 64), (64, 1)]


def test_concat_critic_equals_the_mlp_on_the_concatenation() -> None:
    torch.manual_seed(2)
    critic = ConcatCritic(3, 2, hidden=16)
    x, y = torch.randn(5, 3), torch.randn(7, 2)
    plain = torch.stack(
        [torch.stack([critic.net(torch.cat([x[i], y[j]])).squeeze() for j in range(7)]) for i in range(5)]
    )
    assert torch.allclose(critic(x, y), plain, atol=1e-5)


def test_cosine_critic_is_bounded_by_one_over_temperature() -> None:
    torch.manual_seed(3)
    critic = CosineCritic(4, 4, temperature=0.25)
    scores = critic(torch.randn(30, 4) * 100, torch.randn(40, 4) * 100)
    assert scores.abs().max().item() <= 4.0 + 1e-5


def test_bad_critic_arguments() -> None:
    with pytest.raises(ValueError, match="valid names: separable"):
        make_critic("mlp", 2, 2)
    with pytest.raises(ValueError, match="x_dim must be"):
        make_critic("separable", 0, 2)
    with pytest.raises(ValueError, match="unknown activation"):
        make_critic("separable", 2, 2, activation="sigmoidish")
    with pytest.raises(ValueError, match="temperature must be"):
        make_critic("cosine", 2, 2, temperature=0)
    with pytest.raises(ValueError, match="critic 'bilinear'"):
        make_critic("bilinear", 2, 2, hidden=3)
    with pytest.raises(ValueError, match="same number of rows"):
        make_critic("separable", 2, 2).pair_scores(torch.zeros(3, 2), torch.zeros(4, 2))
