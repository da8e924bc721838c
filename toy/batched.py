"""Training critics on the MI staircase: R runs at once as one batched model, or one at a time.

Each training step of a run draws B fresh joint pairs (x_i, y_i) from the stage's
:class:`mitool.tasks.CorrelatedGaussian` (with the run's own CPU generator, so the data do not
depend on the device), scores them with the critic and takes one Adam step on the
bound's loss. The scores handed to the bound are ``pos`` (B,) = f(x_i, y_i) and ``neg`` (B, K):

* K <= B - 1: the other rows of the batch. ``mitool.bounds.split_scores`` of the (B, B) all-pairs
  matrix gives the B - 1 others of each anchor; the first K of them are kept.
* K >= B: every anchor is scored against one shared pool of K fresh samples of the marginal p(y)
  (``task.sample_marginal_y``), neg[i, k] = f(x_i, y'_k).

:func:`train_vectorised` trains R runs that share a critic architecture and a pool size as one
model: their weights are stacked along a leading run axis (``torch.func.stack_module_state``)
and the critic is evaluated once for all runs with ``torch.func.vmap`` over
``torch.func.functional_call``, so every Linear layer becomes one batched matmul. The bounds are
the functions of :mod:`mitool.bounds`, also called under ``vmap`` (one call per group of runs
with the same bound and K). Adam is elementwise, so one Adam over the stacked weights is R
independent Adams. :func:`train_sequential` is the plain loop (one ``nn.Module`` critic and one
optimiser per run); for the same seeds both give the same estimates up to float rounding.

Per step and run we record the estimate ``mi`` (nats) and the norm of the gradient of the loss
with respect to the critic's parameters, ||d loss / d theta||_2 over all parameters.
A run whose estimate turns NaN, infinite or larger in size than the divergence threshold is
stopped at that step; its record keeps the step and the last finite estimate.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn
from torch.func import vmap

from mitool import bounds, critics, tasks
from mitool.toy.config import RunSpec, ToySettings, critic_options
from mitool.toy.stacked import StackedCritic

__all__ = ["RunRecord", "group_key", "make_run_critic", "train_sequential", "train_vectorised"]

ProgressCallback = Callable[[int, float], None]
"""Called as ``progress(steps_done, latest_mean_estimate)`` every few steps."""


@dataclass
class RunRecord:
    """What one run produced.

    estimates: (total_steps,) float64, the estimate in nats at each step (NaN after a divergence).
    grad_norms: (total_steps,) float64, ||grad of the loss w.r.t. the critic's parameters||.
    diverged_step: the step at which the estimate became NaN/inf/absurd, or None.
    last_finite: the last estimate before that step (None when it diverged at step 0).
    seconds: wall time of the training that included this run (shared by a vectorised group).
    """

    spec: RunSpec
    estimates: np.ndarray
    grad_norms: np.ndarray
    diverged_step: int | None = None
    last_finite: float | None = None
    seconds: float = 0.0

    def divergence_message(self) -> str:
        last = "none" if self.last_finite is None else f"{self.last_finite:.4g} nats"
        return (
            f"run ({self.spec.label()}) diverged at step {self.diverged_step}: estimate not finite or beyond "
            f"the threshold; last finite estimate {last}; run stopped"
        )


def pool_size(spec: RunSpec, batch_size: int) -> int:
    """0 when the negatives come from the batch (K <= B - 1), else the pool size K."""
    return 0 if spec.negatives <= batch_size - 1 else spec.negatives


def group_key(spec: RunSpec, batch_size: int) -> tuple[str, int]:
    """Runs with the same key can be trained as one batched model: same critic, same pool size."""
    return spec.critic, pool_size(spec, batch_size)


def _seeds(seed: int) -> tuple[int, int]:
    """Two independent seeds (initial weights, data) derived from the run's seed."""
    init_state, data_state = np.random.SeedSequence(seed).generate_state(2)
    return int(init_state), int(data_state)


def make_run_critic(spec: RunSpec, settings: ToySettings) -> nn.Module:
    """The run's critic with its seeded initial weights (the global RNG is left as it was)."""
    init_seed, _ = _seeds(spec.seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(init_seed)
        critic = critics.make_critic(
            spec.critic, settings.dim, settings.dim, **critic_options(spec.critic, settings)
        )
    return critic.to(settings.device)


def _data_generator(spec: RunSpec) -> torch.Generator:
    """The run's stream of samples. It lives on the CPU whatever the device: a run sees the same
    data on every device, and R runs' draws cost R cheap CPU calls and one copy, not R x 5 kernel
    launches."""
    generator = torch.Generator()
    generator.manual_seed(_seeds(spec.seed)[1])
    return generator


class _Scorer(nn.Module):
    """pos (B,) and neg (B, K_max) of a critic: in-batch others (pool is None) or a shared pool."""

    def __init__(self, critic: nn.Module) -> None:
        super().__init__()
        self.critic = critic

    def forward(self, x: Tensor, y: Tensor, pool: Tensor | None = None) -> tuple[Tensor, Tensor]:
        if pool is None:
            return bounds.split_scores(self.critic(x, y))
        return self.critic.pair_scores(x, y), self.critic(x, pool)


def _draw(
    task: tasks.CorrelatedGaussian, batch_size: int, pool: int, generator: torch.Generator
) -> tuple[Tensor, Tensor, Tensor | None]:
    """One step's samples on the CPU: B joint pairs (x, y) and, when pool > 0, a pool of p(y)."""
    x, y = task.sample(batch_size, generator=generator)
    marginal = task.sample_marginal_y(pool, generator=generator) if pool else None
    return x, y, marginal


def _stage_tasks(settings: ToySettings) -> list[tuple[int, tasks.CorrelatedGaussian]]:
    return [
        (stage.stop, tasks.CorrelatedGaussian(settings.dim, mi=stage.mi, transform=settings.transform))
        for stage in settings.staircase
    ]


def _adam(parameters: list[Tensor], lr: float) -> torch.optim.Adam:
    """Adam with the fused kernel (one pass over each tensor; also on CPU), the same for both paths."""
    return torch.optim.Adam(parameters, lr=lr, fused=True)


def _is_bad(value: float, threshold: float) -> bool:
    return not np.isfinite(value) or abs(value) > threshold


def _finish(record: RunRecord, threshold: float) -> RunRecord:
    """Find the first bad estimate, blank everything from there on and note the divergence."""
    bad = ~np.isfinite(record.estimates) | (np.abs(record.estimates) > threshold)
    if bad.any():
        step = int(np.argmax(bad))
        record.diverged_step = step
        record.last_finite = float(record.estimates[step - 1]) if step > 0 else None
        record.estimates[step:] = np.nan
        record.grad_norms[step:] = np.nan
    return record


def train_sequential(
    specs: Sequence[RunSpec], settings: ToySettings, progress: ProgressCallback | None = None
) -> list[RunRecord]:
    """Train the runs one after another with a plain loop (the reference for the batched path)."""
    device = torch.device(settings.device)
    stage_tasks = _stage_tasks(settings)
    records = []
    done = 0
    for spec in specs:
        start = time.perf_counter()
        scorer = _Scorer(make_run_critic(spec, settings))
        optimiser = _adam(list(scorer.parameters()), settings.lr)
        bound = bounds.get(spec.estimator, **spec.bound_options())
        generator = _data_generator(spec)
        pool = pool_size(spec, settings.batch_size)
        estimates = np.full(settings.total_steps, np.nan)
        grad_norms = np.full(settings.total_steps, np.nan)
        stage = 0
        for step in range(settings.total_steps):
            while step >= stage_tasks[stage][0]:
                stage += 1
            x, y, marginal = _draw(stage_tasks[stage][1], settings.batch_size, pool, generator)
            marginal = None if marginal is None else marginal.to(device)
            pos, neg = scorer(x.to(device), y.to(device), marginal)
            result = bound(pos, neg[:, : spec.negatives])
            optimiser.zero_grad(set_to_none=True)
            result.loss.backward()
            norms = [torch.linalg.vector_norm(p.grad) for p in scorer.parameters() if p.grad is not None]
            estimates[step] = float(result.mi.detach())
            grad_norms[step] = float(torch.linalg.vector_norm(torch.stack(norms)))
            if _is_bad(estimates[step], settings.divergence_threshold):
                break
            optimiser.step()
            done += 1
            if progress is not None and done % 50 == 0:
                progress(done, estimates[step])
        record = RunRecord(spec, estimates, grad_norms, seconds=time.perf_counter() - start)
        records.append(_finish(record, settings.divergence_threshold))
    return records


class _Group:
    """The runs of one batched model: stacked weights, their Adam, and the bound sub-groups."""

    def __init__(self, specs: Sequence[RunSpec], settings: ToySettings, device: torch.device) -> None:
        self.specs = list(specs)
        self.settings = settings
        self.critic = StackedCritic([make_run_critic(spec, settings) for spec in self.specs])
        self.optimiser = _adam(self.critic.parameters(), settings.lr)
        self.generators = [_data_generator(spec) for spec in self.specs]
        self.alive = list(range(len(self.specs)))  # positions of the live runs in self.specs
        self.device = device
        # MINE's log moving average of mean(e^neg) per run (NaN: not started), by spec position
        self.log_averages = torch.full((len(self.specs),), float("nan"), device=device)
        self._make_subgroups()

    def _make_subgroups(self) -> None:
        """Runs (by row of the stacked model) sharing a bound, its options and K: one vmap call each."""
        subgroups: dict[tuple, list[int]] = {}
        for row, position in enumerate(self.alive):
            spec = self.specs[position]
            key = (spec.estimator, spec.negatives, tuple(spec.bound_options().items()))
            subgroups.setdefault(key, []).append(row)
        self.subgroups = []
        for (estimator, negatives, options), rows in subgroups.items():
            if estimator == "mine":  # MINE's moving average is state: one per run, carried along

                def values(pos: Tensor, neg: Tensor, log_average: Tensor, options=options):
                    result, updated = bounds.mine(pos, neg, log_average, **dict(options))
                    return result.loss, result.mi, updated

            else:
                bound = bounds.get(estimator, **dict(options))

                def values(pos: Tensor, neg: Tensor, bound=bound) -> tuple[Tensor, Tensor]:
                    result = bound(pos, neg)
                    return result.loss, result.mi

            # None when the sub-group is the whole model: no gather needed
            index = None if len(rows) == len(self.alive) else torch.tensor(rows, device=self.device)
            self.subgroups.append((vmap(values), negatives, index, estimator == "mine"))
        self.alive_index = torch.tensor(self.alive, device=self.device)

    def subgroup_values(self, values, index: Tensor | None, stateful: bool, pos: Tensor, neg: Tensor):
        """(loss, mi) per run of a sub-group; MINE's moving averages (by spec position) updated."""
        if not stateful:
            return values(pos, neg)
        positions = self.alive_index if index is None else self.alive_index[index]
        loss, mi, updated = values(pos, neg, self.log_averages[positions])
        self.log_averages[positions] = updated
        return loss, mi

    def drop(self, rows_to_drop: set[int]) -> None:
        """Remove runs (rows of the stacked model) with their optimiser state; training goes on."""
        keep_rows = [row for row in range(len(self.alive)) if row not in rows_to_drop]
        self.alive = [self.alive[row] for row in keep_rows]
        if not self.alive:
            return
        keep = torch.tensor(keep_rows, device=self.device)
        old_parameters = self.critic.parameters()
        new_parameters = [value.detach()[keep].clone().requires_grad_(True) for value in old_parameters]
        old_state = self.optimiser.state
        self.critic.replace_parameters(new_parameters)
        self.optimiser = _adam(new_parameters, self.settings.lr)
        for old, new in zip(old_parameters, new_parameters, strict=True):
            state = old_state.get(old)
            if state:
                self.optimiser.state[new] = {
                    key: (item.clone() if key == "step" else item[keep].clone())
                    for key, item in state.items()
                }
        self._make_subgroups()


def train_vectorised(
    specs: Sequence[RunSpec],
    settings: ToySettings,
    progress: ProgressCallback | None = None,
    check_every: int | None = None,
) -> list[RunRecord]:
    """Train runs that share a critic and a pool size (see :func:`group_key`) as one batched model.

    Returns one :class:`RunRecord` per spec, in order. ``check_every`` steps (default: every step
    on CPU, every 50 on other devices, where reading the estimates waits for the device) the
    estimates are checked for divergence and diverged runs leave the batched model.
    """
    specs = list(specs)
    if not specs:
        return []
    keys = {group_key(spec, settings.batch_size) for spec in specs}
    if len(keys) != 1:
        raise ValueError(f"train_vectorised needs one critic and one pool size, got {sorted(keys)}")
    device = torch.device(settings.device)
    check_every = check_every or (1 if device.type == "cpu" else 50)
    pool = pool_size(specs[0], settings.batch_size)
    stage_tasks = _stage_tasks(settings)
    total = settings.total_steps
    estimates = torch.full((len(specs), total), float("nan"), dtype=torch.float64, device=device)
    grad_norms = torch.full((len(specs), total), float("nan"), dtype=torch.float64, device=device)
    group = _Group(specs, settings, device)
    start = time.perf_counter()
    stage = 0
    last_check = 0
    for step in range(total):
        while step >= stage_tasks[stage][0]:
            stage += 1
        task = stage_tasks[stage][1]
        draws = [_draw(task, settings.batch_size, pool, group.generators[p]) for p in group.alive]
        x = torch.stack([d[0] for d in draws]).to(device)
        y = torch.stack([d[1] for d in draws]).to(device)
        marginal = torch.stack([d[2] for d in draws]).to(device) if pool else None
        pos, neg = group.critic.scores(x, y, marginal)
        mi = torch.empty(len(group.alive), device=device)
        loss_total = pos.new_zeros(())
        for values, negatives, index, stateful in group.subgroups:
            if index is None:
                loss, mi = group.subgroup_values(values, index, stateful, pos, neg[..., :negatives])
                mi = mi.detach()
            else:
                sub_pos, sub_neg = pos[index], neg[index][..., :negatives]
                loss, sub_mi = group.subgroup_values(values, index, stateful, sub_pos, sub_neg)
                mi[index] = sub_mi.detach()
            loss_total = loss_total + loss.sum()
        group.optimiser.zero_grad(set_to_none=True)
        loss_total.backward()
        norms = [  # per run: ||grad||_2 of each parameter tensor, then over the tensors
            torch.linalg.vector_norm(value.grad.reshape(value.shape[0], -1), dim=1)
            for value in group.critic.parameters()
            if value.grad is not None
        ]
        alive = group.alive_index
        estimates[alive, step] = mi.double()
        grad_norms[alive, step] = torch.linalg.vector_norm(torch.stack(norms), dim=0).double()
        # Runs are independent rows: a diverged run's NaN gradient touches only its own weights,
        # so the step is taken for all rows and diverged runs leave the model afterwards.
        group.optimiser.step()
        if progress is not None and step % 50 == 0:
            progress(step + 1, float(mi.mean()))
        if (step + 1) % check_every == 0 or step + 1 == total:
            window = estimates[alive, last_check : step + 1]
            bad_rows = (~torch.isfinite(window) | (window.abs() > settings.divergence_threshold)).any(dim=1)
            last_check = step + 1
            if bool(bad_rows.any()):
                group.drop({int(row) for row in torch.nonzero(bad_rows).flatten()})
                if not group.alive:
                    break
    seconds = time.perf_counter() - start
    estimates_cpu = estimates.cpu().numpy()
    grad_norms_cpu = grad_norms.cpu().numpy()
    return [
        _finish(
            RunRecord(spec, estimates_cpu[i].copy(), grad_norms_cpu[i].copy(), seconds=seconds),
            settings.divergence_threshold,
        )
        for i, spec in enumerate(specs)
    ]
