"""R critics of one architecture trained as one model: their weights stacked along a leading run axis.

The critics themselves are those of :mod:`mitool.critics`, not copies: their weights are stacked
(``torch.func.stack_module_state``) and passed to the critic's own arithmetic,
:meth:`mitool.critics.Critic.all_pairs` and :meth:`~mitool.critics.Critic.matched_pairs`, which
carries the run axis through: every Linear layer of the R critics becomes one batched matmul
(:func:`mitool.critics.linear`), so a step of R small critics costs one call per layer instead of
R (on a CPU: fewer, larger products; on a GPU: one kernel launch instead of R). A new critic class
needs no code here.

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
    loss = bounds.infonce(pos, neg).loss.sum()         # (4,): one loss per run
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence

import torch
from torch import Tensor, nn
from torch.func import stack_module_state

from mitool.checks import ParameterError
from mitool.critics import Critic, bound_scores

__all__ = ["StackedCritics"]


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

    ``critics``: the R critics (:class:`mitool.critics.Critic`, without buffers). Their current
    weights are copied into the stack; the modules themselves are not changed. All must have the
    same class, sizes and settings and be on one device.
    """

    def __init__(self, critics: Sequence[Critic]) -> None:
        critics = list(critics)
        if not critics:
            raise ParameterError("critics", "must hold at least one critic, got none")
        if not all(isinstance(critic, Critic) for critic in critics) or list(critics[0].buffers()):
            raise ParameterError("critics", "must be mitool.critics.Critic modules without buffers")
        first = _architecture(critics[0])
        for position, critic in enumerate(critics[1:], start=1):
            if _architecture(critic) != first:
                raise ParameterError(
                    "critics",
                    f"must all have one class, size and settings: critic {position} "
                    f"({type(critic).__name__}) differs from critic 0 ({type(critics[0]).__name__})",
                )
        params, _ = stack_module_state(critics)
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
        # the critic whose arithmetic runs for every run; its own weights are never used ("meta")
        self._template = copy.deepcopy(critics[0]).to("meta")

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
        norms = [
            torch.linalg.vector_norm(value.grad.reshape(value.shape[0], -1), dim=1)
            for value in self._params.values()
            if value.grad is not None
        ]
        if not norms:
            return torch.zeros(self.runs, device=self.parameters()[0].device)
        return torch.linalg.vector_norm(torch.stack(norms), dim=0)

    def critics(self) -> list[Critic]:
        """The R critics as ordinary modules (on the stack's device) with the current weights."""
        modules = []
        for run in range(self.runs):
            critic = copy.deepcopy(self._template).to_empty(device=self.parameters()[0].device)
            state = {
                name: (value[run].mT if name in self._transposed else value[run]).detach().clone()
                for name, value in self._params.items()
            }
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
        if optimiser is None:
            return None
        return _carry_optimiser(optimiser, old, self._params, keep)

    # ------------------------------------------------------------------------------------------
    # scoring

    def all_pairs(self, x: Tensor, y: Tensor) -> Tensor:
        """S[r, i, j] = f_r(x_ri, y_rj) of every run: (R, B, M) for x (R, B, dx), y (R, M, dy)."""
        return self._template.all_pairs(self.named_parameters(), self._per_run("x", x), self._per_run("y", y))

    def scores(self, x: Tensor, y: Tensor, pool: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """pos (R, B) and neg (R, B, K) of every run, as :func:`mitool.critics.bound_scores` gives
        for one critic: with ``pool`` None the negatives are the other rows of the batch (K = B - 1),
        else the pool's K samples. x, y, pool: (R, rows, d) per run, or (rows, d) shared by all."""
        x, y = self._per_run("x", x), self._per_run("y", y)
        pool = None if pool is None else self._per_run("pool", pool)
        return bound_scores(self._template, x, y, pool, weights=self.named_parameters())

    def _per_run(self, name: str, tensor: Tensor) -> Tensor:
        """(R, rows, features): the tensor, or its rows shared by every run (a view, no copy)."""
        if tensor.dim() == 2:
            return tensor.expand(self.runs, *tensor.shape)
        if tensor.dim() != 3 or tensor.shape[0] != self.runs:
            raise ParameterError(
                name,
                f"must have shape (R={self.runs}, rows, features) or (rows, features), "
                f"got {tuple(tensor.shape)}",
            )
        return tensor


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
