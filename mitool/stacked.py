"""R critics of one architecture trained as one model: their weights stacked along a leading run axis.

The critics themselves are those of :mod:`mitool.critics`, not copies: their weights are stacked
with ``torch.func.stack_module_state`` and the critic's own code is run for all R at once with
``torch.func.vmap`` over ``torch.func.functional_call``. Under ``vmap`` every Linear layer of the R
critics becomes one batched matmul, so a step of R small critics costs one call per layer instead
of R (on a CPU: fewer, larger products; on a GPU: one kernel launch instead of R). A new critic
class needs no code here: it works as soon as it runs under ``vmap`` (no data-dependent Python
control flow, no in-place updates of its inputs).

Shapes: R runs, B anchors, K negatives. ``x`` (R, B, dx) and ``y`` (R, B, dy), or (B, d) for one
batch shared by every run; ``pool`` None (the negatives are the other rows of the batch, K = B - 1)
or (R, K, dy) / (K, dy) samples of the marginal p(y). :meth:`StackedCritics.scores` returns what
the bounds of :mod:`mitool.bounds` take, per run: ``pos`` (R, B) and ``neg`` (R, B, K), the same
numbers as :func:`mitool.critics.bound_scores` of each critic alone (up to float rounding: a batched
matmul may sum in another order).

Training: :meth:`~StackedCritics.parameters` are leaf tensors with the run axis first; an
elementwise optimiser over them (Adam, SGD) is R independent optimisers. Sum the R losses before
``backward``: run r's loss depends only on row r of each weight, so each row gets its own gradient.
:meth:`~StackedCritics.drop` removes runs (a diverged seed) together with their optimiser state,
and :meth:`~StackedCritics.critics` gives the R trained critics back as ordinary modules.

    stack = StackedCritics([make_critic("separable", 5, 5) for _ in range(4)])
    optimiser = torch.optim.Adam(stack.parameters(), lr=5e-4)
    pos, neg = stack.scores(x, y)                      # x, y: (4, B, 5)
    loss = torch.vmap(lambda p, n: bounds.infonce(p, n).loss)(pos, neg).sum()
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence

import torch
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state, vmap

from mitool import critics as critic_module
from mitool.checks import ParameterError

__all__ = ["StackedCritics"]


class _BoundScores(nn.Module):
    """A critic's :func:`mitool.critics.bound_scores` as a module's forward, for ``functional_call``."""

    def __init__(self, critic: nn.Module) -> None:
        super().__init__()
        self.critic = critic

    def forward(self, x: Tensor, y: Tensor, pool: Tensor | None = None) -> tuple[Tensor, Tensor]:
        return critic_module.bound_scores(self.critic, x, y, pool)


def _architecture(critic: nn.Module) -> tuple:
    """What must agree between critics stacked together: the module tree with each module's class
    and plain settings (sizes, temperature, ...), and every parameter's and buffer's shape."""
    modules = tuple(
        (name, type(module).__name__, tuple(sorted(
            (key, value) for key, value in vars(module).items()
            if not key.startswith("_") and isinstance(value, (bool, int, float, str))
        )))
        for name, module in critic.named_modules()
    )  # fmt: skip
    tensors = tuple((name, tuple(t.shape), t.dtype) for name, t in critic.state_dict().items())
    return modules, tensors


class StackedCritics:
    """R critics of one class and size (e.g. R seeds) as one model with a leading run axis.

    ``critics``: the R modules (any critic of :mod:`mitool.critics`, or another module with
    ``forward(x, y)`` -> (B, M) and ``pair_scores(x, y)`` -> (B,)). Their current weights are copied
    into the stack; the modules themselves are not changed. All must have the same class, sizes and
    settings, be on one device and be in the same train/eval mode.
    """

    def __init__(self, critics: Sequence[nn.Module]) -> None:
        critics = list(critics)
        if not critics:
            raise ParameterError("critics", "must hold at least one critic, got none")
        first = _architecture(critics[0])
        for position, critic in enumerate(critics[1:], start=1):
            if _architecture(critic) != first:
                raise ParameterError(
                    "critics",
                    f"must all have one class, size and settings: critic {position} "
                    f"({type(critic).__name__}) differs from critic 0 ({type(critics[0]).__name__})",
                )
        params, self._buffers = stack_module_state(critics)
        # Linear weights are held transposed, (R, in, out) contiguous: the batched product x W^T
        # then reads them as they lie and their gradient x^T g comes out in the same layout, so
        # neither the forward nor the gradient's accumulation copies them
        self._transposed = {
            f"{name}.weight" for name, module in critics[0].named_modules() if isinstance(module, nn.Linear)
        }
        self._params = {
            name: value.detach().mT.contiguous().requires_grad_() if name in self._transposed else value
            for name, value in params.items()
        }
        # the module whose code runs for every run; its own weights are never used ("meta")
        self._template = _BoundScores(copy.deepcopy(critics[0]).to("meta"))
        self._vmapped: dict[tuple, Callable] = {}

    # ------------------------------------------------------------------------------------------
    # the runs' weights

    @property
    def runs(self) -> int:
        """R, the number of critics in the stack."""
        return next(iter(self._params.values())).shape[0]

    def __len__(self) -> int:
        return self.runs

    def parameters(self) -> list[Tensor]:
        """The leaf tensors to optimise, run axis first, in the order of ``critic.named_parameters()``.
        A Linear layer's weight is held transposed, (R, in, out); the others have the critic's shape."""
        return list(self._params.values())

    def named_parameters(self) -> dict[str, Tensor]:
        """The stacked weights by the critic's parameter names ("embed_x.0.weight", ...), each of
        shape (R, *the critic's shape): views of :meth:`parameters`, so writing into them (under
        ``torch.no_grad()``) sets the weights."""
        return {name: value.mT if name in self._transposed else value for name, value in self._params.items()}

    def grad_norms(self) -> Tensor:
        """(R,): per run, the L2 norm of the gradient over all its parameters (0 before any
        backward), i.e. ||d loss_r / d theta_r||_2 after a backward of the summed losses."""
        squares = [
            value.grad.reshape(value.shape[0], -1).square().sum(dim=1)
            for value in self._params.values()
            if value.grad is not None
        ]
        if not squares:
            return torch.zeros(self.runs, device=self.parameters()[0].device)
        return torch.stack(squares).sum(dim=0).sqrt()

    def critics(self) -> list[nn.Module]:
        """The R critics as ordinary modules (on the stack's device) with the current weights."""
        modules = []
        for run in range(self.runs):
            critic = copy.deepcopy(self._template.critic).to_empty(device=self.parameters()[0].device)
            state = {
                name: (value[run].mT if name in self._transposed else value[run]).detach().clone()
                for name, value in self._params.items()
            }
            state.update({name: value[run].clone() for name, value in self._buffers.items()})
            critic.load_state_dict(state)
            modules.append(critic)
        return modules

    def drop(
        self, runs: Iterable[int], optimiser: torch.optim.Optimizer | None = None
    ) -> torch.optim.Optimizer | None:
        """Remove ``runs`` (positions 0..R-1) from the stack; the others keep their order.

        The kept weights become new leaf tensors, so an optimiser over the old ones is stale: pass
        it as ``optimiser`` and the returned one (same class and settings) holds the new tensors with
        each kept run's state (Adam's moments, its step count). Dropping every run is allowed; the
        stack then has R = 0 and must not be called.
        """
        runs = set(runs)
        bad = sorted(run for run in runs if not (isinstance(run, int) and 0 <= run < self.runs))
        if bad:
            raise ParameterError("runs", f"must be positions from 0 to {self.runs - 1}, got {bad}")
        old = self._params
        device = self.parameters()[0].device
        keep = torch.tensor(
            [run for run in range(self.runs) if run not in runs], dtype=torch.long, device=device
        )
        self._params = {
            name: value.detach()[keep].clone().requires_grad_(value.requires_grad)
            for name, value in old.items()
        }
        self._buffers = {name: value[keep].clone() for name, value in self._buffers.items()}
        if optimiser is None:
            return None
        return _carry_optimiser(optimiser, old, self._params, keep)

    # ------------------------------------------------------------------------------------------
    # scoring

    def scores(self, x: Tensor, y: Tensor, pool: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """pos (R, B) and neg (R, B, K) of every run, as :func:`mitool.critics.bound_scores` gives
        for one critic: with ``pool`` None the negatives are the other rows of the batch (K = B - 1),
        else the pool's K samples. x, y, pool: (R, rows, d) per run, or (rows, d) shared by all."""
        shared = tuple(None if tensor is None or tensor.dim() == 2 else 0 for tensor in (x, y, pool))
        for name, tensor, axis in zip(("x", "y", "pool"), (x, y, pool), shared, strict=True):
            if tensor is None:
                continue
            if tensor.dim() not in (2, 3) or (axis == 0 and tensor.shape[0] != self.runs):
                raise ParameterError(
                    name, f"must have shape (R={self.runs}, rows, features) or (rows, features), "
                    f"got {tuple(tensor.shape)}",
                )  # fmt: skip
        if shared not in self._vmapped:
            self._vmapped[shared] = vmap(self._one_run, in_dims=(0, 0, *shared))
        return self._vmapped[shared](self._params, self._buffers, x, y, pool)

    def _one_run(
        self, params: dict[str, Tensor], buffers: dict[str, Tensor], x: Tensor, y: Tensor, pool: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        state = {
            f"critic.{name}": value.mT if name in self._transposed else value
            for name, value in params.items()
        }
        state.update({f"critic.{name}": value for name, value in buffers.items()})
        return functional_call(self._template, state, (x, y, pool))


def _carry_optimiser(
    optimiser: torch.optim.Optimizer,
    old: dict[str, Tensor],
    new: dict[str, Tensor],
    keep: Tensor,
) -> torch.optim.Optimizer:
    """A new optimiser of the same class and settings over ``new``, with the kept rows of each
    old tensor's state (tensors with the run axis first are indexed, others such as Adam's step
    count are copied)."""
    if len(optimiser.param_groups) != 1:
        raise ParameterError("optimiser", "must have one parameter group (the stack's parameters)")
    settings = {key: value for key, value in optimiser.param_groups[0].items() if key != "params"}
    replacement = type(optimiser)(list(new.values()), **settings)
    for name, old_value in old.items():
        state = optimiser.state.get(old_value)
        if not state:
            continue
        replacement.state[new[name]] = {
            key: (
                item[keep].clone()
                if isinstance(item, Tensor) and item.dim() > 0 and item.shape == old_value.shape
                else (item.clone() if isinstance(item, Tensor) else copy.deepcopy(item))
            )
            for key, item in state.items()
        }
    return replacement
