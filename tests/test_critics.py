"""Critic shapes, the all-pairs matrix against per-pair scoring, the K >= B path, and R critics as
one stacked model against each critic alone."""

from __future__ import annotations

import copy

import pytest
import torch

from mitool import bounds
from mitool.checks import ParameterError
from mitool.critics import (
    NAMES,
    ConcatCritic,
    CosineCritic,
    Critic,
    SeparableCritic,
    bound_scores,
    make_critic,
)
from mitool.stacked import StackedCritics


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
    with pytest.raises(ParameterError, match="name must be one of separable, concat"):
        make_critic("mlp", 2, 2)
    with pytest.raises(ValueError, match="x_dim must be"):
        make_critic("separable", 0, 2)
    with pytest.raises(ParameterError, match="activation must be one of relu"):
        make_critic("separable", 2, 2, activation="sigmoidish")
    with pytest.raises(ValueError, match="temperature must be"):
        make_critic("cosine", 2, 2, temperature=0)
    with pytest.raises(ValueError, match="critic 'bilinear'"):
        make_critic("bilinear", 2, 2, hidden=3)
    with pytest.raises(ValueError, match="same number of rows"):
        make_critic("separable", 2, 2).pair_scores(torch.zeros(3, 2), torch.zeros(4, 2))


# ----------------------------------------------------------------------------------------------
# R critics as one stacked model (mitool.stacked): the same numbers as each critic on its own


def _small(name: str, seed: int, **options) -> torch.nn.Module:
    torch.manual_seed(seed)
    sizes = {} if name == "bilinear" else {"hidden": 16, **({"embed_dim": 8} if name != "concat" else {})}
    return make_critic(name, 3, 2, **{**sizes, **options})


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("negatives", ["batch", "own pool", "shared pool"])
def test_stacked_scores_equal_each_critic_alone(name: str, negatives: str) -> None:
    modules = [_small(name, seed) for seed in range(3)]
    stack = StackedCritics(modules)
    x, y = torch.randn(3, 6, 3), torch.randn(3, 6, 2)
    pool = {"batch": None, "own pool": torch.randn(3, 11, 2), "shared pool": torch.randn(11, 2)}[negatives]
    pos, neg = stack.scores(x, y, pool)
    assert pos.shape == (3, 6) and neg.shape == (3, 6, 5 if pool is None else 11)
    for run, module in enumerate(modules):
        run_pool = None if pool is None else (pool if pool.dim() == 2 else pool[run])
        expected_pos, expected_neg = bound_scores(module, x[run], y[run], run_pool)
        torch.testing.assert_close(pos[run], expected_pos, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(neg[run], expected_neg, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(pos[0], pos[1])  # different weights: not three copies of one critic


def test_stacked_scores_with_a_batch_shared_by_every_run() -> None:
    modules = [_small("separable", seed) for seed in range(2)]
    x, y = torch.randn(5, 3), torch.randn(5, 2)
    pos, neg = StackedCritics(modules).scores(x, y)
    for run, module in enumerate(modules):
        expected_pos, expected_neg = bound_scores(module, x, y)
        torch.testing.assert_close(pos[run], expected_pos, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(neg[run], expected_neg, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_stacked_training_with_a_dropped_run_equals_separate_training(name: str) -> None:
    """Adam over the stack is R Adams; dropping a run midway keeps the others' weights and moments.
    In float64: Adam's first steps (g / sqrt(g^2)) would turn float32 rounding into visible noise."""
    modules = [_small(name, seed).double() for seed in range(3)]
    alone = [copy.deepcopy(module) for module in modules]
    stack = StackedCritics(modules)
    optimiser = torch.optim.Adam(stack.parameters(), lr=1e-2)
    separate = [torch.optim.Adam(module.parameters(), lr=1e-2) for module in alone]
    generator = torch.Generator().manual_seed(0)
    live = [0, 1, 2]
    for step in range(6):
        if step == 3:  # drop run 1 (row 1 of the stack)
            optimiser = stack.drop({1}, optimiser)
            live = [0, 2]
        x = torch.randn(len(live), 6, 3, generator=generator, dtype=torch.float64)
        y = torch.randn(len(live), 6, 2, generator=generator, dtype=torch.float64)
        pos, neg = stack.scores(x, y)
        loss = sum(bounds.infonce(pos[row], neg[row]).loss for row in range(len(live)))
        optimiser.zero_grad()
        loss.backward()
        norms = stack.grad_norms()
        optimiser.step()
        for row, run in enumerate(live):
            separate[run].zero_grad()
            bounds.infonce(*bound_scores(alone[run], x[row], y[row])).loss.backward()
            grads = torch.cat([p.grad.flatten() for p in alone[run].parameters()])
            torch.testing.assert_close(norms[row], grads.norm(), rtol=1e-9, atol=1e-12)
            separate[run].step()
    assert len(stack) == 2
    for trained, run in zip(stack.critics(), live, strict=True):
        for (name_a, a), (name_b, b) in zip(
            trained.named_parameters(), alone[run].named_parameters(), strict=True
        ):
            assert name_a == name_b
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
    for name_, value in stack.named_parameters().items():  # the critic's names and shapes, R first
        assert value.shape == (2, *dict(modules[0].named_parameters())[name_].shape)


def test_stacked_critics_must_agree() -> None:
    with pytest.raises(ParameterError, match="critics must all have one class"):
        StackedCritics([_small("separable", 0), _small("cosine", 0)])
    with pytest.raises(ParameterError, match="critic 1"):
        StackedCritics([_small("cosine", 0), _small("cosine", 1, temperature=0.5)])
    with pytest.raises(ParameterError, match="critics must hold at least one"):
        StackedCritics([])
    stack = StackedCritics([_small("bilinear", 0), _small("bilinear", 1)])
    with pytest.raises(ParameterError, match=r"x must have shape \(R=2"):
        stack.scores(torch.zeros(3, 4, 3), torch.zeros(3, 4, 2))
    with pytest.raises(ParameterError, match="runs must be positions from 0 to 1"):
        stack.drop({2})


class _DistanceCritic(Critic):
    """A critic written only for this test, f(x, y) = -|x W - y|^2: its two methods are all it takes
    to be stacked."""

    def __init__(self, x_dim: int, y_dim: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(x_dim, y_dim))

    def all_pairs(self, weights, x, y):
        projected = x @ weights["weight"]
        return -((projected.unsqueeze(-2) - y.unsqueeze(-3)) ** 2).sum(dim=-1)

    def matched_pairs(self, weights, x, y):
        return -((x @ weights["weight"] - y) ** 2).sum(dim=-1)


def test_a_new_critic_class_is_stacked_with_no_other_code() -> None:
    torch.manual_seed(4)
    modules = [_DistanceCritic(3, 2) for _ in range(2)]
    x, y, pool = torch.randn(2, 5, 3), torch.randn(2, 5, 2), torch.randn(7, 2)
    for negatives in (None, pool):
        pos, neg = StackedCritics(modules).scores(x, y, negatives)
        for run, module in enumerate(modules):
            expected_pos, expected_neg = bound_scores(module, x[run], y[run], negatives)
            torch.testing.assert_close(pos[run], expected_pos)
            torch.testing.assert_close(neg[run], expected_neg)
    with pytest.raises(ParameterError, match="must be mitool.critics.Critic modules"):
        StackedCritics([torch.nn.Linear(2, 2)])
