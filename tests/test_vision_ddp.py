"""Two gloo processes (spawned here) against one process holding the same global batch.

Each method takes three SGD steps on a fixed global batch of 8 image pairs; the two ranks get
rows 0-3 and 4-7. Stated tolerance: parameters, BatchNorm statistics, momentum encoder and
MoCo's queue agree within 2e-5 * (1 + |value|) (float32 sums taken in a different order), and
the queue is the same on both ranks, holding the keys of the whole global batch in rank order.
NNCLR takes one step from a support set filled beforehand with the same 12 unit vectors on every
rank (so that the step looks its neighbours up), with the same tolerance; after it the support set
is the same on both ranks and holds the view-1 projections of the whole global batch in rank order.
(Over several steps its differences grow beyond float32 rounding: its three-BatchNorm projection
head is ill-conditioned at this size, one process's own float32 projections differ from float64
ones by 4e-6, and its positives are the support set written from them: 1e-4 to 2e-3 after three
steps.)
With the dclw loss this holds because the positive weight is normalised over the global batch
(with each rank normalising over its own anchors the parameters differ by 2e-3 to 2e-2 here).
The kNN monitor, each rank extracting the features of half of each split and the neighbours
merged across ranks, gives the accuracy of one process extracting all of them.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as multiprocessing
import torch.nn.functional as F

from mitool.vision import distributed
from mitool.vision.backbones import build_backbone
from mitool.vision.config import PretrainConfig, resolve_defaults
from mitool.vision.distributed import CrossRankBatchNorm, wrap_for_data_parallel
from mitool.vision.evaluate import evaluate_knn
from mitool.vision.methods import build_method
from mitool.vision.step import make_optimizer, training_step

TOLERANCE = 2e-5
GLOBAL_BATCH = 8
METHODS = ("simclr", "simo", "moco", "simclr-dclw", "simo-dclw")
"""A method, or method-loss (otherwise the method's default loss)."""


def _config(run: str) -> PretrainConfig:
    method, _, loss = run.partition("-")
    negatives = {"moco": 32, "simo": 3, "simclr": None, "nnclr": None}[method]
    config = PretrainConfig(
        method=method,
        loss=loss or None,
        arch="small-cnn",
        negatives=negatives,
        support_size=24 if method == "nnclr" else None,
        bn_mode="sync",
        key_momentum=0.9,
        embedding_dim=16,
        temperature=0.2,
        sigma=0.1 if loss == "dclw" else None,  # a narrow weighting, far from uniform weights
    )
    return resolve_defaults(config, 16)


def _global_batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(123)
    images = torch.randn(GLOBAL_BATCH, 3, 16, 16, generator=generator)
    return images + 0.1 * torch.randn(images.shape, generator=generator), images


def _train(method: str, rank: int, world: int) -> dict[str, torch.Tensor]:
    default = torch.get_default_dtype()
    # in float64: in float32 DCLW's narrow weights turned the sums' order (ranks, threads, the CPU's
    # kernels) into differences of 1.4e-4 on one machine, beyond TOLERANCE; in float64 the methods
    # differ by at most 7e-6 (simo-dclw), and a weighting normalised per rank is a systematic
    # difference (2e-3 to 2e-2 in float32, the module), not a rounding one
    torch.set_default_dtype(torch.float64)
    try:
        return _train_in_default_dtype(method, rank, world)
    finally:
        torch.set_default_dtype(default)


def _train_in_default_dtype(method: str, rank: int, world: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    model = build_method(_config(method), 3, torch.device("cpu"))
    step_model = wrap_for_data_parallel(model, torch.device("cpu"))
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(trained, 0.03, 0.9, 0.0, torch.device("cpu"))  # fused, as the runs'
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    view_1, view_2 = _global_batch()
    rows = slice(rank * GLOBAL_BATCH // world, (rank + 1) * GLOBAL_BATCH // world)
    raised, pending = [], None
    for step in range(3):
        flags = (rank == world - 1 and step == 1, False)  # e.g. "a signal reached the last rank"
        result = training_step(
            step_model, optimizer, scaler, view_1[rows], view_2[rows], 0.03, "fp32", step, flags, pending
        )
        pending = None if result.grad_norm_checked else result.grad_norm
        raised.append(result.flags)
    state = {name: value.detach().clone() for name, value in model.state_dict().items()}
    return {**state, "raised_flags": torch.tensor(raised)}


NNCLR_LOSSES = ("infonce", "dclw")


def _nnclr_step(loss: str, rank: int, world: int) -> dict[str, torch.Tensor]:
    """One step of NNCLR from a support set holding 12 fixed unit vectors (the same on every rank)."""
    torch.manual_seed(0)
    model = build_method(_config(f"nnclr-{loss}"), 3, torch.device("cpu"))
    model.enqueue(F.normalize(torch.randn(12, 16, generator=torch.Generator().manual_seed(5)), dim=1))
    step_model = wrap_for_data_parallel(model, torch.device("cpu"))
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(trained, 0.03, 0.9, 0.0, torch.device("cpu"))
    view_1, view_2 = _global_batch()
    rows = slice(rank * GLOBAL_BATCH // world, (rank + 1) * GLOBAL_BATCH // world)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    training_step(step_model, optimizer, scaler, view_1[rows], view_2[rows], 0.03, "fp32", 0)
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


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


KNN_SETTINGS = dict(k=20, temperature=0.1, batch_size=8, workers=0, synthetic_options={"size": 30})
"""k = 20 is more than a rank's 15 memory items: its neighbours are padded before the merge."""


def _knn(precision: str) -> dict:
    """The kNN monitor's result for a fixed small CNN on 30 + 30 synthetic 16-pixel images."""
    torch.manual_seed(3)
    backbone, _ = build_backbone("small-cnn", 3)
    return evaluate_knn(backbone, "synthetic", None, 16, torch.device("cpu"), precision=precision,
                        **KNN_SETTINGS)  # fmt: skip


def _host_values(rank: int) -> torch.Tensor:
    """What the hosts exchange (min, max, sum of rank + 3), a gather of rows of different counts,
    and BatchNorm buffers after a broadcast from rank 0 (rank 1's differed before)."""
    norm = torch.nn.BatchNorm1d(2)
    norm.running_mean.fill_(float(rank + 1))
    distributed.broadcast_buffers(norm)
    rows = distributed.gather_rows(torch.full((rank + 1, 2), float(rank)))
    values = [distributed.min_over_ranks(rank + 3), distributed.max_over_ranks(rank + 3),
              distributed.sum_over_ranks(rank + 3)]  # fmt: skip
    return torch.cat([torch.tensor(values, dtype=torch.float32), rows.flatten(), norm.running_mean])


def _worker(rank: int, world: int, directory: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{directory}/rendezvous", rank=rank, world_size=world)
    try:
        states = {method: _train(method, rank, world) for method in METHODS}
        states["nnclr"] = {loss: _nnclr_step(loss, rank, world) for loss in NNCLR_LOSSES}
        states["shuffled_keys"] = _shuffled_and_plain_keys(rank, world)
        states["knn"] = {precision: _knn(precision) for precision in ("fp32", "bf16")}
        states["host_values"] = _host_values(rank)
        torch.save(states, os.path.join(directory, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def two_process_states(tmp_path_factory) -> list[dict]:
    directory = str(tmp_path_factory.mktemp("ddp"))
    multiprocessing.spawn(_worker, args=(2, directory), nprocs=2, join=True)
    return [torch.load(os.path.join(directory, f"rank{rank}.pt"), weights_only=False) for rank in range(2)]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.slow
def test_two_gloo_processes_match_one_process(two_process_states, method: str) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the workers: with two threads DCLW's sums round differently (1.6e-3 seen)
    try:
        single = _train(method, 0, 1)
    finally:
        torch.set_num_threads(threads)
    for rank, states in enumerate(two_process_states):
        distributed_state = states[method]
        assert distributed_state.keys() == single.keys()
        for name, value in single.items():
            if value.is_floating_point():
                difference = ((distributed_state[name] - value).abs() / (1 + value.abs())).max().item()
                assert difference <= TOLERANCE, (rank, name, difference)
            else:
                assert torch.equal(distributed_state[name], value), (rank, name)


@pytest.mark.slow
def test_every_rank_learns_the_flags_raised_on_any_rank(two_process_states) -> None:
    """training_step's flags travel in the step's all-reduce: raised on rank 1 at the second step,
    seen by both ranks at that step and no other (what makes the ranks stop at the same step)."""
    expected = torch.tensor([[False, False], [True, False], [False, False]])
    for states in two_process_states:
        for method in METHODS:
            assert torch.equal(states[method]["raised_flags"], expected), method


@pytest.mark.slow
def test_the_queue_holds_keys_from_all_ranks(two_process_states) -> None:
    first, second = (states["moco"] for states in two_process_states)
    assert int(first["queue_pointer"]) == int(second["queue_pointer"]) == 3 * GLOBAL_BATCH
    assert torch.equal(first["queue"], second["queue"])


@pytest.mark.parametrize("loss", NNCLR_LOSSES)
@pytest.mark.slow
def test_an_nnclr_step_on_two_gloo_processes_matches_one_process(two_process_states, loss: str) -> None:
    """Neighbours looked up in the support set, the predictions of the global batch as candidates
    (gathered with their gradients), dclw's weight over the global batch: the parameters, the
    BatchNorm statistics and the support set of one process holding the global batch."""
    single = _nnclr_step(loss, 0, 1)
    for rank, states in enumerate(two_process_states):
        for name, value in single.items():
            if value.is_floating_point():
                difference = ((states["nnclr"][loss][name] - value).abs() / (1 + value.abs())).max().item()
                assert difference <= TOLERANCE, (rank, name, difference)
            else:
                assert torch.equal(states["nnclr"][loss][name], value), (rank, name)


@pytest.mark.slow
def test_the_support_set_holds_the_gathered_batch_on_every_rank(two_process_states) -> None:
    """NNCLR writes the view-1 projections of the whole global batch (both ranks' rows, rank 0's
    first) after the step, behind the 12 rows there before: the same support set on both ranks."""
    first, second = (states["nnclr"]["infonce"] for states in two_process_states)
    for state in (first, second):
        assert (int(state["support_pointer"]), int(state["support_filled"])) == (20, 20)
    assert torch.equal(first["support"], second["support"])
    written = first["support"][12:20]
    assert torch.allclose(written.norm(dim=1), torch.ones(8), atol=1e-5)
    single = _nnclr_step("infonce", 0, 1)["support"]
    assert torch.allclose(written, single[12:20], atol=TOLERANCE)  # rows in the global batch's order
    assert torch.equal(first["support"][:12], single[:12]) and not first["support"][20:].any()


@pytest.mark.slow
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


@pytest.mark.slow
def test_the_sharded_knn_monitor_gives_the_single_process_result(two_process_states) -> None:
    """Each rank extracts half of each split (fp32, and under bf16 autocast), the queries are
    gathered and the k nearest of each rank's half of the memory merged: the accuracies, memory
    and query sizes of one process doing it all."""
    for precision in ("fp32", "bf16"):
        single = _knn(precision)
        assert single["memory_size"] == single["query_size"] == 30
        for states in two_process_states:
            sharded = states["knn"][precision]
            for key in ("knn_top1", "knn_top5", "memory_size", "query_size", "skipped"):
                assert sharded[key] == single[key], (precision, key, sharded[key], single[key])
    assert 0 < single["knn_top1"] <= single["knn_top5"] <= 1


@pytest.mark.slow
def test_hosts_exchange_values_and_rows_of_different_counts(two_process_states) -> None:
    expected = torch.tensor([3.0, 4.0, 7.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    for states in two_process_states:
        assert torch.equal(states["host_values"], expected)
