"""Host synchronisations of a training step, counted on the CPU.

On a GPU the host waits for the device whenever it reads a value the device computes (``item``,
``float``, ``int``, ``bool``, ``tolist``) or runs an operator whose result's size depends on the
values (``nonzero``, boolean-mask indexing, ``masked_select``). The CPU runs the same code, so a
dispatch mode that records these operators (and a patched ``Tensor.tolist``) counts, on the CPU,
the waits a step would make on a GPU. Stated expectation: one read per step, the step's scalars
(with the previous step's gradient norm) in step.py; the only other reads are the fused loss's
underflow check, which runs on the CPU only (on a GPU it takes a second pass instead).
"""

from __future__ import annotations

import os
import traceback

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import mitool
from mitool.vision import distributed
from mitool.vision import step as step_module
from mitool.vision.config import PretrainConfig, resolve_defaults
from mitool.vision.methods import build_method
from mitool.vision.step import TrainingDiverged, make_optimizer, skips_on_device, training_step

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(mitool.__file__)))
aten = torch.ops.aten
SYNCING = {
    aten._local_scalar_dense.default,
    aten.nonzero.default,
    aten.masked_select.default,
    aten.is_nonzero.default,
    aten.equal.default,
}


def _caller() -> str:
    """``file:function`` of the innermost frame in the project outside the tests (or '?')."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        path = os.path.abspath(frame.filename)
        if path.startswith(ROOT) and f"{os.sep}tests{os.sep}" not in path and ".venv" not in path:
            return f"{os.path.relpath(path, ROOT)}:{frame.name}"
    return "?"


class HostReads(TorchDispatchMode):
    """Records (operator, caller) for every operator that would make the host wait for a GPU."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[str, str]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        boolean_index = func in (aten.index.Tensor, aten.index_put.default, aten.index_put_.default) and any(
            index is not None and index.dtype in (torch.bool, torch.uint8) for index in args[1]
        )
        if func in SYNCING or boolean_index:
            self.reads.append((str(func), _caller()))
        return func(*args, **(kwargs or {}))


@pytest.fixture
def host_reads(monkeypatch):
    """A factory of :class:`HostReads` whose reads include Tensor.tolist calls."""
    modes: list[HostReads] = []
    original = torch.Tensor.tolist

    def tolist(tensor):
        for mode in modes:
            mode.reads.append(("Tensor.tolist", _caller()))
        return original(tensor)

    monkeypatch.setattr(torch.Tensor, "tolist", tolist)

    def make() -> HostReads:
        mode = HostReads()
        modes.append(mode)
        return mode

    return make


def _model_and_views(method: str):
    negatives = {"moco": 64, "simo": 4, "simclr": None, "nnclr": None}[method]
    settings = dict(arch="small-cnn", negatives=negatives, bn_splits=2, embedding_dim=16)
    if method == "nnclr":
        settings["support_size"] = 20  # wraps during the 4 steps
    config = resolve_defaults(PretrainConfig(method=method, **settings), 16)
    torch.manual_seed(0)
    model = build_method(config, 3, torch.device("cpu"))
    generator = torch.Generator().manual_seed(1)
    views = [torch.randn(8, 3, 16, 16, generator=generator) for _ in range(2)]
    return model, views


def _steps(model, views, optimizer, count: int, first: int = 0, pending=None):
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    for index in range(first, first + count):
        result = training_step(model, optimizer, scaler, *views, 0.01, "fp32", index, (), pending)
        pending = None if result.grad_norm_checked else result.grad_norm
    return pending


@pytest.mark.parametrize("method", ["simclr", "moco", "simo", "nnclr"])
def test_a_training_step_reads_the_device_once(host_reads, method: str) -> None:
    model, views = _model_and_views(method)
    trained = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = make_optimizer(trained, 0.01, 0.9, 1e-4, torch.device("cpu"))
    assert skips_on_device(optimizer)
    # moco reads its queue pointer once, nnclr its support set's pointer and fill count, at the first step
    pending = _steps(model, views, optimizer, 1)
    with host_reads() as reads:
        _steps(model, views, optimizer, 3, first=1, pending=pending)
    ours = [read for read in reads.reads if not read[1].startswith("mitool/fused.py")]
    assert ours == [("Tensor.tolist", "mitool/vision/step.py:training_step")] * 3, reads.reads
    cpu_only = [read for read in reads.reads if read[1].startswith("mitool/fused.py")]
    assert all(caller == "mitool/fused.py:forward" for _, caller in cpu_only)
    assert method not in ("simclr", "nnclr") or not cpu_only


def test_an_optimizer_that_cannot_skip_a_step_on_the_device_reads_the_norm_in_the_step(host_reads) -> None:
    model, views = _model_and_views("simclr")
    trained = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.SGD(trained, lr=0.01, momentum=0.9)  # foreach, not fused
    assert not skips_on_device(optimizer)
    with host_reads() as reads:
        assert _steps(model, views, optimizer, 2) is None
    assert [caller for _, caller in reads.reads] == [
        "mitool/vision/step.py:training_step", "mitool/vision/step.py:check_gradient_norm"
    ] * 2  # fmt: skip


def test_a_non_finite_gradient_norm_cancels_the_step_on_the_device_and_stops_the_next(monkeypatch) -> None:
    model, views = _model_and_views("simclr")
    trained = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = make_optimizer(trained, 0.01, 0.9, 1e-4, torch.device("cpu"))
    pending = _steps(model, views, optimizer, 1)
    before = [parameter.detach().clone() for parameter in trained]
    momentum = [optimizer.state[parameter]["momentum_buffer"].clone() for parameter in trained]
    real_norm = step_module._total_norm
    monkeypatch.setattr(step_module, "_total_norm", lambda gradients: real_norm(gradients) * float("inf"))
    pending = _steps(model, views, optimizer, 1, first=1, pending=pending)  # step 2: not taken
    monkeypatch.setattr(step_module, "_total_norm", real_norm)
    assert pending is not None and not torch.isfinite(pending)
    for parameter, value, buffer in zip(trained, before, momentum, strict=True):
        assert torch.equal(parameter, value)
        assert torch.equal(optimizer.state[parameter]["momentum_buffer"], buffer)
    with pytest.raises(TrainingDiverged, match="gradient norm is inf at step 2"):
        _steps(model, views, optimizer, 1, first=2, pending=pending)
    for parameter, value in zip(trained, before, strict=True):
        assert torch.equal(parameter, value)


def test_simclr_scores_select_with_index_tensors(host_reads) -> None:
    """The in-batch scores are picked with precomputed index tensors, not a boolean mask (whose
    result's size the host must wait for)."""
    from mitool.vision.simclr import in_batch_scores

    embeddings = torch.nn.functional.normalize(torch.randn(4, 6, 8), dim=2)
    with host_reads() as reads:
        pos, neg = in_batch_scores(embeddings[0], embeddings[1], embeddings[2], embeddings[3], 0, 0.1)
    assert reads.reads == [] and neg.shape == (12, 10) and pos.shape == (12,)


def test_cudnn_autotuning_is_switched_on_for_cuda_only(monkeypatch) -> None:
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)
    distributed.use_fast_kernels(torch.device("cpu"))
    assert torch.backends.cudnn.benchmark is False
    distributed.use_fast_kernels(torch.device("cuda"))  # a device string: no GPU needed to set the flag
    assert torch.backends.cudnn.benchmark is True
