"""Two gloo processes (spawned here) against one process holding the same global batch.

Each method takes three SGD steps on a fixed global batch of 8 image pairs; the two ranks get
rows 0-3 and 4-7. Stated tolerance: parameters, BatchNorm statistics, momentum encoder and
MoCo's queue agree within 2e-5 * (1 + |value|) (float32 sums taken in a different order), and
the queue is the same on both ranks, holding the keys of the whole global batch in rank order.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as multiprocessing

from mitool.vision.config import PretrainConfig, resolve_defaults
from mitool.vision.distributed import CrossRankBatchNorm, wrap_for_data_parallel
from mitool.vision.methods import build_method
from mitool.vision.step import training_step

TOLERANCE = 2e-5
GLOBAL_BATCH = 8
METHODS = ("simclr", "simo", "moco")


def _config(method: str) -> PretrainConfig:
    negatives = {"moco": 32, "simo": 3, "simclr": None}[method]
    config = PretrainConfig(
        method=method,
        arch="small-cnn",
        negatives=negatives,
        bn_mode="sync",
        key_momentum=0.9,
        embedding_dim=16,
    )
    return resolve_defaults(config, 16)


def _global_batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(123)
    images = torch.randn(GLOBAL_BATCH, 3, 16, 16, generator=generator)
    return images + 0.1 * torch.randn(images.shape, generator=generator), images


def _train(method: str, rank: int, world: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    model = build_method(_config(method), 3, torch.device("cpu"))
    step_model = wrap_for_data_parallel(model, torch.device("cpu"))
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.03, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    view_1, view_2 = _global_batch()
    rows = slice(rank * GLOBAL_BATCH // world, (rank + 1) * GLOBAL_BATCH // world)
    raised = []
    for step in range(3):
        flags = (rank == world - 1 and step == 1, False)  # e.g. "a signal reached the last rank"
        result = training_step(
            step_model, optimizer, scaler, view_1[rows], view_2[rows], 0.03, "fp32", step, flags
        )
        raised.append(result.flags)
    state = {name: value.detach().clone() for name, value in model.state_dict().items()}
    return {**state, "raised_flags": torch.tensor(raised)}


def _shuffled_and_plain_keys(rank: int, world: int) -> torch.Tensor:
    """MoCo's keys of this rank's images through shuffle-BN (across ranks) and without shuffling,
    stacked; with BatchNorm in eval mode the shuffle must not change any key."""
    torch.manual_seed(0)
    config = resolve_defaults(
        PretrainConfig(method="moco", arch="small-cnn", negatives=32, bn_mode="shuffle"), 16
    )
    model = build_method(config, 3, torch.device("cpu")).eval()
    images = _global_batch()[1][rank * GLOBAL_BATCH // world : (rank + 1) * GLOBAL_BATCH // world]
    with torch.no_grad():
        return torch.stack([model.keys(images), model.key_embeddings(images)])


def _worker(rank: int, world: int, directory: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{directory}/rendezvous", rank=rank, world_size=world)
    try:
        states = {method: _train(method, rank, world) for method in METHODS}
        states["shuffled_keys"] = _shuffled_and_plain_keys(rank, world)
        torch.save(states, os.path.join(directory, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def two_process_states(tmp_path_factory) -> list[dict]:
    directory = str(tmp_path_factory.mktemp("ddp"))
    multiprocessing.spawn(_worker, args=(2, directory), nprocs=2, join=True)
    return [torch.load(os.path.join(directory, f"rank{rank}.pt"), weights_only=True) for rank in range(2)]


@pytest.mark.parametrize("method", METHODS)
def test_two_gloo_processes_match_one_process(two_process_states, method: str) -> None:
    single = _train(method, 0, 1)
    for rank, states in enumerate(two_process_states):
        distributed_state = states[method]
        assert distributed_state.keys() == single.keys()
        for name, value in single.items():
            if value.is_floating_point():
                difference = ((distributed_state[name] - value).abs() / (1 + value.abs())).max().item()
                assert difference <= TOLERANCE, (rank, name, difference)
            else:
                assert torch.equal(distributed_state[name], value), (rank, name)


def test_every_rank_learns_the_flags_raised_on_any_rank(two_process_states) -> None:
    """training_step's flags travel in the step's all-reduce: raised on rank 1 at the second step,
    seen by both ranks at that step and no other (what makes the ranks stop at the same step)."""
    expected = torch.tensor([[False, False], [True, False], [False, False]])
    for states in two_process_states:
        for method in METHODS:
            assert torch.equal(states[method]["raised_flags"], expected), method


def test_the_queue_holds_keys_from_all_ranks(two_process_states) -> None:
    first, second = (states["moco"] for states in two_process_states)
    assert int(first["queue_pointer"]) == int(second["queue_pointer"]) == 3 * GLOBAL_BATCH
    assert torch.equal(first["queue"], second["queue"])


def test_shuffle_bn_returns_every_key_to_its_image(two_process_states) -> None:
    for states in two_process_states:
        shuffled, plain = states["shuffled_keys"]
        assert torch.allclose(shuffled, plain, atol=1e-6)
    shuffled, plain = _shuffled_and_plain_keys(0, 1)
    assert torch.allclose(shuffled, plain, atol=1e-6)


def test_cross_rank_batch_norm_is_plain_batch_norm_on_one_process() -> None:
    norm = CrossRankBatchNorm(3)
    plain = torch.nn.BatchNorm2d(3)
    inputs = torch.randn(4, 3, 5, 5) * 2 + 1
    assert torch.allclose(norm(inputs), plain(inputs), atol=1e-6)
    assert torch.allclose(norm.running_var, plain.running_var, atol=1e-6)
