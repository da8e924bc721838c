"""What the methods need from torch.distributed, written so that one process is the special case.

With no process group (a plain ``python`` or ``mitool`` run on one CPU or GPU) every gather
returns its input and the world size is 1. Under ``torchrun`` (DDP) the process group is created
by :func:`setup` from the environment variables torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT): nccl on CUDA, gloo on CPU.

Gathers (B local rows on each of W ranks -> W*B rows, rank 0's rows first):

* :func:`gather_without_grad` for momentum keys (no gradient flows into a key);
* :func:`gather_with_grad` for SimCLR's embeddings: the backward pass sums the incoming gradient
  over ranks and returns each rank its own slice, so with DDP's averaging of parameter gradients
  the result equals the gradient of the loss averaged over the global batch.

:class:`CrossRankBatchNorm` normalises with the statistics of the global batch on any backend
(torch's SyncBatchNorm runs on GPUs only); :func:`synchronise_batch_norm` picks one of the two.
"""

from __future__ import annotations

import datetime
import inspect
import os

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

__all__ = [
    "CrossRankBatchNorm",
    "all_reduce_sum_with_grad",
    "broadcast_buffers",
    "gather_parts",
    "gather_rows",
    "gather_with_grad",
    "gather_without_grad",
    "host_group",
    "is_distributed",
    "logsumexp_over_ranks",
    "max_over_ranks",
    "min_over_ranks",
    "rank",
    "setup",
    "sum_over_ranks",
    "synchronise_batch_norm",
    "use_fast_kernels",
    "wrap_for_data_parallel",
    "world_size",
]


def is_distributed() -> bool:
    """True when a process group with more than one process is active."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def setup(device_name: str) -> tuple[torch.device, int, int]:
    """Create the process group when launched by torchrun; return (device, rank, world size).

    ``device_name`` is ``cpu`` or ``cuda``; under torchrun each process takes GPU LOCAL_RANK.
    """
    if device_name not in ("cpu", "cuda"):
        raise ValueError(f"device must be cpu or cuda, got {device_name!r}")
    if device_name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device cuda was asked for but no CUDA GPU is available; use --device cpu")
    launched = int(os.environ.get("WORLD_SIZE", "1")) > 1
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device_name == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if launched and not dist.is_initialized():
        backend = "nccl" if device_name == "cuda" else "gloo"
        dist.init_process_group(backend, timeout=datetime.timedelta(minutes=30))
    use_fast_kernels(device)
    host_group()  # made now, by every rank at the same point
    return device, rank(), world_size()


def use_fast_kernels(device: torch.device) -> None:
    """On CUDA, let cuDNN pick the fastest convolution algorithms for the shapes it meets
    (``torch.backends.cudnn.benchmark``: the shapes of a run repeat every step); nothing elsewhere."""
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True


_HOST_GROUP: dict[str, object] = {}


def host_group():
    """The process group for values the host holds (CPU tensors): the default group when its
    backend is gloo, else a gloo group over all ranks, made once (every rank must make it at the
    same point: :func:`setup` does). None (the default group) on one process."""
    if not is_distributed() or dist.get_backend() == "gloo":
        return None
    if _HOST_GROUP.get("world") is not dist.group.WORLD:  # none yet, or one of an earlier process group
        _HOST_GROUP.update(world=dist.group.WORLD, group=dist.new_group(backend="gloo"))
    return _HOST_GROUP["group"]


def _reduce_on_hosts(value: int, op) -> int:
    """``value`` reduced over the ranks with ``op``, exchanged between the hosts (a CPU tensor
    over :func:`host_group`: nothing waits for the device); ``value`` itself on one process."""
    if not is_distributed():
        return value
    shared = torch.tensor([value], dtype=torch.int64)
    dist.all_reduce(shared, op=op, group=host_group())
    return int(shared)


def min_over_ranks(value: int) -> int:
    """The least of ``value`` over the ranks (on the hosts, see :func:`_reduce_on_hosts`)."""
    return _reduce_on_hosts(value, dist.ReduceOp.MIN)


def max_over_ranks(value: int) -> int:
    """The largest of ``value`` over the ranks (on the hosts)."""
    return _reduce_on_hosts(value, dist.ReduceOp.MAX)


def sum_over_ranks(value: int) -> int:
    """The sum of ``value`` over the ranks (on the hosts)."""
    return _reduce_on_hosts(value, dist.ReduceOp.SUM)


def gather_parts(tensor: Tensor) -> list[Tensor]:
    """``tensor`` of every rank (the same shape on all), in rank order, without gradient."""
    if not is_distributed():
        return [tensor.detach()]
    parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, tensor.detach().contiguous())
    return parts


def broadcast_buffers(module: nn.Module) -> None:
    """Give every rank rank 0's buffers of ``module`` (e.g. BatchNorm running statistics, which a
    local BatchNorm keeps per rank); nothing on one process."""
    if not is_distributed():
        return
    for buffer in module.buffers():
        dist.broadcast(buffer.data, src=0)


def gather_rows(tensor: Tensor) -> Tensor:
    """Concatenate ``tensor`` (n_r, ...) from all ranks along dim 0, in rank order, where the row
    counts n_r may differ between ranks; no gradient; ``tensor`` itself on one process."""
    if not is_distributed():
        return tensor.detach()
    world = dist.get_world_size()
    count = torch.tensor([tensor.shape[0]], dtype=torch.int64, device=tensor.device)
    counts = [torch.empty_like(count) for _ in range(world)]
    dist.all_gather(counts, count)
    sizes = [int(size) for size in torch.cat(counts).tolist()]
    padded = tensor.detach().new_zeros((max(sizes), *tensor.shape[1:]))
    padded[: tensor.shape[0]] = tensor.detach()
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded.contiguous())
    return torch.cat([part[:size] for part, size in zip(parts, sizes, strict=True)])


def logsumexp_over_ranks(value: Tensor) -> Tensor:
    """log sum over ranks of exp(``value``) for a scalar ``value`` (one all-gather), no gradient;
    ``value`` itself on one process."""
    return torch.logsumexp(torch.stack(gather_parts(value)), dim=0)


def gather_without_grad(tensor: Tensor) -> Tensor:
    """Concatenate ``tensor`` (B, ...) from all ranks along dim 0, in rank order; no gradient."""
    if not is_distributed():
        return tensor.detach()
    parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, tensor.detach().contiguous())
    return torch.cat(parts)


class _GatherWithGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor: Tensor) -> Tensor:  # type: ignore[override]
        ctx.rows = tensor.shape[0]
        parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, tensor.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:  # type: ignore[override]
        grad = grad.contiguous()
        dist.all_reduce(grad)
        start = dist.get_rank() * ctx.rows
        return grad[start : start + ctx.rows]


def gather_with_grad(tensor: Tensor) -> Tensor:
    """Concatenate ``tensor`` (B, ...) from all ranks along dim 0, keeping gradients.

    Backward: every rank's loss depends on every rank's rows, so the gradient of row r is the
    sum over ranks of d loss_rank / d row_r (an all-reduce, then this rank's slice).
    """
    return _GatherWithGrad.apply(tensor) if is_distributed() else tensor


class _AllReduceSumWithGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor: Tensor) -> Tensor:  # type: ignore[override]
        tensor = tensor.clone()
        dist.all_reduce(tensor)
        return tensor

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:  # type: ignore[override]
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


def all_reduce_sum_with_grad(tensor: Tensor) -> Tensor:
    """Sum of ``tensor`` over ranks; the gradient of the sum is summed back over ranks."""
    return _AllReduceSumWithGrad.apply(tensor) if is_distributed() else tensor


class CrossRankBatchNorm(nn.modules.batchnorm._BatchNorm):
    """BatchNorm (1d or 2d input) whose training statistics are those of the global batch.

    mean_c = sum over ranks and positions of x / count, var_c = E[x^2] - mean_c^2 (biased, used
    to normalise); the running variance gets the unbiased count/(count - 1) correction, as in
    nn.BatchNorm. Identical, up to float rounding, to one BatchNorm over the concatenated batch.
    """

    def _check_input_dim(self, inputs: Tensor) -> None:
        if inputs.dim() < 2:
            raise ValueError(f"CrossRankBatchNorm expects (N, C, ...) input, got shape {tuple(inputs.shape)}")

    def forward(self, inputs: Tensor) -> Tensor:
        if not (self.training and is_distributed()):
            return super().forward(inputs)
        channels = inputs.shape[1]
        # sums in float64: E[x^2] - mean^2 loses digits in float32 when |mean| >> std
        flat = inputs.double().transpose(0, 1).reshape(channels, -1)
        local = torch.cat([flat.sum(dim=1), (flat * flat).sum(dim=1)])
        count = torch.tensor([float(flat.shape[1])], device=inputs.device, dtype=torch.float64)
        dist.all_reduce(count)
        total = all_reduce_sum_with_grad(local)
        mean = total[:channels] / count
        variance = (total[channels:] / count - mean * mean).clamp_min(0)
        with torch.no_grad():
            self.num_batches_tracked += 1
            unbiased = variance * (count / (count - 1).clamp_min(1))
            self.running_mean.lerp_(mean.detach().to(self.running_mean.dtype), self.momentum)
            self.running_var.lerp_(unbiased.detach().to(self.running_var.dtype), self.momentum)
        shape = (1, channels) + (1,) * (inputs.dim() - 2)
        scale = torch.rsqrt(variance + self.eps).float()
        mean = mean.float()
        if self.affine:
            scale = scale * self.weight
        shift = -mean * scale + (self.bias if self.affine else 0)
        return (inputs.float() * scale.view(shape) + shift.view(shape)).to(inputs.dtype)


def wrap_for_data_parallel(model: nn.Module, device: torch.device) -> nn.Module:
    """``model`` in DistributedDataParallel when several processes run (gradients averaged over
    ranks in backward; buffers such as BN statistics and the queue are not re-broadcast at each
    forward, the methods keep them consistent themselves); ``model`` itself otherwise."""
    if not is_distributed():
        return model
    device_ids = [device.index] if device.type == "cuda" else None
    parameters = inspect.signature(DistributedDataParallel.__init__).parameters
    no_forward_sync = {"forward_sync_buffers": False} if "forward_sync_buffers" in parameters else {}
    return DistributedDataParallel(
        model, device_ids=device_ids, **(no_forward_sync or {"broadcast_buffers": False})
    )


def synchronise_batch_norm(module: nn.Module, device: torch.device) -> nn.Module:
    """Make every BatchNorm of ``module`` use global-batch statistics when several processes run:
    torch's SyncBatchNorm on CUDA, :class:`CrossRankBatchNorm` elsewhere. Unchanged on one process."""
    if not is_distributed():
        return module
    if device.type == "cuda":
        return nn.SyncBatchNorm.convert_sync_batchnorm(module)
    return _convert_to_cross_rank(module)


def _convert_to_cross_rank(module: nn.Module) -> nn.Module:
    converted = module
    if isinstance(module, nn.modules.batchnorm._BatchNorm) and not isinstance(module, CrossRankBatchNorm):
        converted = CrossRankBatchNorm(
            module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats
        )
        if module.affine:  # the same Parameter objects: requires_grad (False in key encoders) is kept
            converted.weight = module.weight
            converted.bias = module.bias
        converted.running_mean = module.running_mean
        converted.running_var = module.running_var
        converted.num_batches_tracked = module.num_batches_tracked
        converted.train(module.training)
    for name, child in module.named_children():
        converted.add_module(name, _convert_to_cross_rank(child))
    return converted
