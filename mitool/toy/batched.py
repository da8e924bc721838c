"""Training critics on the MI staircase: R runs at once as one batched model, or one at a time.

Each training step of a run draws B fresh joint pairs (x_i, y_i) from the stage's
:class:`mitool.tasks.CorrelatedGaussian` (with the run's own CPU generator, so the data do not
depend on the device), scores them with the critic and takes one Adam step on the
bound's loss. The scores handed to the bound are ``pos`` (B,) = f(x_i, y_i) and ``neg`` (B, K),
from :func:`mitool.critics.bound_scores`:

* K <= B - 1: the other rows of the batch. ``mitool.bounds.split_scores`` of the (B, B) all-pairs
  matrix gives the B - 1 others of each anchor; the first K of them are kept.
* K >= B: every anchor is scored against one shared pool of K fresh samples of the marginal p(y)
  (``task.sample_marginal_y``), neg[i, k] = f(x_i, y'_k).

:func:`train_vectorised` trains R runs that share a critic architecture and a pool size as one
model, :class:`mitool.stacked.StackedCritics`: the runs' weights are stacked along a leading run
axis and handed to the critic's own arithmetic (:meth:`mitool.critics.Critic.all_pairs` and
``matched_pairs``, the code ``forward`` runs too), so every Linear layer becomes one batched matmul
(``baddbmm``) for all R runs. The bounds are the functions of :mod:`mitool.bounds`, called on the
runs' stacked scores (one call per group of runs with the same bound, options and K:
:func:`mitool.estimators.critic_training.training_values`). Adam is
elementwise, so one Adam over the stacked weights is R independent Adams. :func:`train_sequential`
is the plain loop (one ``nn.Module`` critic and one optimiser per run); for the same seeds both
give the same estimates up to float rounding.

Per step and run we record the estimate ``mi`` (nats) and the norm of the gradient of the loss
with respect to the critic's parameters, ||dL/dtheta||_2 over all parameters.
A run whose estimate turns NaN, infinite or larger in size than the divergence threshold is
stopped at that step; its record keeps the step and the last finite estimate.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from mitool import bounds, critics, tasks
from mitool._infra.files import atomic_write_bytes
from mitool._infra.processes import Interruption
from mitool.estimators.critic_training import training_values
from mitool.stacked import StackedCritics
from mitool.toy.config import RunSpec, ToySettings

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
            spec.critic, settings.dim, settings.dim, **settings.critic_options(spec.critic)
        )
    return critic.to(settings.device)


def _data_generator(spec: RunSpec) -> torch.Generator:
    """The run's stream of samples. It lives on the CPU whatever the device: a run sees the same
    data on every device, and R runs' draws cost R cheap CPU calls and one copy, not R x 5 kernel
    launches."""
    generator = torch.Generator()
    generator.manual_seed(_seeds(spec.seed)[1])
    return generator


def _draw(
    task: tasks.CorrelatedGaussian, batch_size: int, pool: int, generator: torch.Generator
) -> tuple[Tensor, Tensor, Tensor | None]:
    """One step's samples on the CPU: B joint pairs (x, y) and, when pool > 0, a pool of p(y)."""
    x, y = task.sample(batch_size, generator=generator)
    marginal = task.sample_marginal_y(pool, generator=generator) if pool else None
    return x, y, marginal


def _stage_tasks(settings: ToySettings) -> list[tasks.CorrelatedGaussian]:
    """The task of each stage; step t trains on stage t // steps_per_stage."""
    return [
        tasks.CorrelatedGaussian(settings.dim, mi=stage.mi, transform=settings.transform)
        for stage in settings.staircase
    ]


def _adam(parameters: list[Tensor], lr: float) -> torch.optim.Adam:
    """Adam with the fused kernel (one pass over each tensor; also on CPU), the same for both paths."""
    return torch.optim.Adam(parameters, lr=lr, fused=True)


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


def _train_one(spec: RunSpec, settings: ToySettings, on_step: Callable[[float], None]) -> RunRecord:
    """One run with a plain ``nn.Module`` critic and its own Adam; stops at the first bad estimate."""
    device = torch.device(settings.device)
    start = time.perf_counter()
    critic = make_run_critic(spec, settings)
    optimiser = _adam(list(critic.parameters()), settings.lr)
    bound = bounds.get(spec.bound, **spec.bound_options())
    generator = _data_generator(spec)
    pool = pool_size(spec, settings.batch_size)
    stage_tasks = _stage_tasks(settings)
    estimates = np.full(settings.total_steps, np.nan)
    grad_norms = np.full(settings.total_steps, np.nan)
    for step in range(settings.total_steps):
        task = stage_tasks[step // settings.steps_per_stage]
        x, y, marginal = (
            None if t is None else t.to(device) for t in _draw(task, settings.batch_size, pool, generator)
        )
        pos, neg = critics.bound_scores(critic, x, y, marginal)
        result = bound(pos, neg[:, : spec.negatives])
        optimiser.zero_grad(set_to_none=True)
        result.loss.backward()
        norms = [torch.linalg.vector_norm(p.grad) for p in critic.parameters() if p.grad is not None]
        estimates[step] = float(result.mi.detach())
        grad_norms[step] = float(torch.linalg.vector_norm(torch.stack(norms)))
        if not abs(estimates[step]) <= settings.divergence_threshold:  # NaN too
            break
        optimiser.step()
        on_step(estimates[step])
    record = RunRecord(spec, estimates, grad_norms, seconds=time.perf_counter() - start)
    return _finish(record, settings.divergence_threshold)


def train_sequential(
    specs: Sequence[RunSpec], settings: ToySettings, progress: ProgressCallback | None = None
) -> list[RunRecord]:
    """Train the runs one after another with a plain loop (the reference for the batched path)."""
    done = 0

    def on_step(estimate: float) -> None:
        nonlocal done
        done += 1
        if progress is not None and done % 50 == 0:
            progress(done, estimate)

    return [_train_one(spec, settings, on_step) for spec in specs]


_Values = Callable[[Tensor, Tensor, Tensor], tuple[Tensor, Tensor, Tensor]]


@dataclass
class _Subgroup:
    """Runs of the stacked model that share a bound, its options and K: one call of the bound."""

    values: _Values
    negatives: int
    rows: Tensor | slice  # rows of the stacked model (a slice of all when it is the whole model)


class _Group:
    """The runs of one batched model: stacked critics, their Adam, and the bound sub-groups."""

    def __init__(self, specs: Sequence[RunSpec], settings: ToySettings) -> None:
        self.specs = list(specs)
        self.device = torch.device(settings.device)
        self.stack = StackedCritics([make_run_critic(spec, settings) for spec in self.specs])
        self.optimiser = _adam(self.stack.parameters(), settings.lr)
        self.generators = [_data_generator(spec) for spec in self.specs]
        self.alive = list(range(len(self.specs)))  # positions in self.specs of the stack's rows
        # MINE's log moving average of mean(e^neg) per run (NaN: not started), by spec position
        self.log_averages = torch.full((len(self.specs),), float("nan"), device=self.device)
        self._make_subgroups()

    def _make_subgroups(self) -> None:
        rows_of: dict[tuple, list[int]] = {}
        for row, position in enumerate(self.alive):
            spec = self.specs[position]
            key = (spec.bound, spec.negatives, tuple(spec.bound_options().items()))
            rows_of.setdefault(key, []).append(row)
        self.subgroups = []
        for (bound, negatives, options), rows in rows_of.items():
            index = slice(None) if len(rows) == len(self.alive) else torch.tensor(rows, device=self.device)
            self.subgroups.append(_Subgroup(training_values(bound, dict(options)), negatives, index))
        self.alive_index = torch.tensor(self.alive, dtype=torch.long, device=self.device)

    def draw(self, task: tasks.CorrelatedGaussian, batch_size: int, pool: int) -> list[Tensor | None]:
        """x, y (R, B, d) and the pools (R, K, d) or None of the live runs, on the device."""
        draws = [_draw(task, batch_size, pool, self.generators[p]) for p in self.alive]
        return [
            None if parts[0] is None else torch.stack(parts).to(self.device)
            for parts in zip(*draws, strict=True)
        ]

    def losses(self, pos: Tensor, neg: Tensor) -> tuple[Tensor, Tensor]:
        """The summed loss of the live runs and each one's estimate (detached), MINE's averages
        updated."""
        mi = torch.empty(len(self.alive), device=self.device)
        total = pos.new_zeros(())
        for group in self.subgroups:
            positions = self.alive_index[group.rows]
            loss, group_mi, self.log_averages[positions] = group.values(
                pos[group.rows], neg[group.rows][..., : group.negatives], self.log_averages[positions]
            )
            mi[group.rows] = group_mi.detach()
            total = total + loss.sum()
        return total, mi

    def drop(self, rows: set[int]) -> None:
        """Remove runs (rows of the stacked model) with their optimiser state; training goes on."""
        self.alive = [position for row, position in enumerate(self.alive) if row not in rows]
        self.optimiser = self.stack.drop(rows, self.optimiser)
        if self.alive:
            self._make_subgroups()


def _save_stage(
    path: Path, group: _Group, step: int, last_check: int, estimates: Tensor, grad_norms: Tensor
) -> None:
    """Everything :func:`train_vectorised` needs to go on from ``step``, written atomically."""
    state = {
        "step": step, "last_check": last_check, "alive": list(group.alive),
        "weights": {name: value.detach().cpu() for name, value in group.stack.named_parameters().items()},
        "optimiser": group.optimiser.state_dict(), "generators": [g.get_state() for g in group.generators],
        "log_averages": group.log_averages.cpu(), "estimates": estimates.cpu(),
        "grad_norms": grad_norms.cpu(),
    }  # fmt: skip
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def _restored_stage(path: Path, group: _Group, estimates: Tensor, grad_norms: Tensor) -> tuple[int, int]:
    """The group put back as :func:`_save_stage` left it; (first step, last checked step), (0, 0)
    when there is no saved stage (or only an unreadable one: the cell starts afresh)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (FileNotFoundError, RuntimeError, EOFError, ValueError, OSError):
        return 0, 0
    gone = {row for row, position in enumerate(group.alive) if position not in state["alive"]}
    if gone:
        group.drop(gone)
    with torch.no_grad():
        for name, value in group.stack.named_parameters().items():
            value.copy_(state["weights"][name])
    group.optimiser.load_state_dict(state["optimiser"])
    for generator, saved in zip(group.generators, state["generators"], strict=True):
        generator.set_state(saved)
    group.log_averages.copy_(state["log_averages"])
    estimates.copy_(state["estimates"])
    grad_norms.copy_(state["grad_norms"])
    return state["step"], state["last_check"]


def train_vectorised(
    specs: Sequence[RunSpec],
    settings: ToySettings,
    progress: ProgressCallback | None = None,
    check_every: int | None = None,
    stages: Path | None = None,
) -> list[RunRecord]:
    """Train runs that share a critic and a pool size (see :func:`group_key`) as one batched model.

    Returns one :class:`RunRecord` per spec, in order. ``check_every`` steps (default: every step
    on CPU, every 50 on other devices, where reading the estimates waits for the device) the
    estimates are checked for divergence and diverged runs leave the batched model. With
    ``stages`` (a file), the state at the end of each stage but the last is saved there, and a run
    that finds the file continues from that stage: the same records as one run straight through.
    """
    specs = list(specs)
    if not specs:
        return []
    keys = {group_key(spec, settings.batch_size) for spec in specs}
    if len(keys) != 1:
        raise ValueError(f"train_vectorised needs one critic and one pool size, got {sorted(keys)}")
    group = _Group(specs, settings)
    check_every = check_every or (1 if group.device.type == "cpu" else 50)
    pool = pool_size(specs[0], settings.batch_size)
    stage_tasks = _stage_tasks(settings)
    shape = (len(specs), settings.total_steps)
    estimates = torch.full(shape, float("nan"), dtype=torch.float64, device=group.device)
    grad_norms = torch.full(shape, float("nan"), dtype=torch.float64, device=group.device)
    start = time.perf_counter()
    first, last_check = _restored_stage(stages, group, estimates, grad_norms) if stages else (0, 0)
    with Interruption() as interruption:  # a signal stops the loop between steps, never inside one
        for step in range(first, settings.total_steps):
            task = stage_tasks[step // settings.steps_per_stage]
            x, y, marginal = group.draw(task, settings.batch_size, pool)
            loss, mi = group.losses(*group.stack.scores(x, y, marginal))
            group.optimiser.zero_grad(set_to_none=True)
            loss.backward()
            estimates[group.alive_index, step] = mi.double()
            grad_norms[group.alive_index, step] = group.stack.grad_norms().double()
            # Runs are independent rows: a diverged run's NaN gradient touches only its own weights,
            # so the step is taken for all rows and diverged runs leave the model afterwards.
            group.optimiser.step()
            if progress is not None and (step + 1) % 50 == 0:  # the mean of the last 50 steps' estimates
                progress(step + 1, float(estimates[group.alive_index, step - 49 : step + 1].nanmean()))
            if (step + 1) % check_every == 0 or step + 1 == settings.total_steps:
                window = estimates[group.alive_index, last_check : step + 1]
                last_check = step + 1
                bad = ~(window.abs() <= settings.divergence_threshold).all(dim=1)  # NaN is bad too
                if bool(bad.any()):
                    group.drop({int(row) for row in torch.nonzero(bad).flatten()})
                    if not group.alive:
                        break
            if stages and (step + 1) % settings.steps_per_stage == 0 and step + 1 < settings.total_steps:
                _save_stage(stages, group, step + 1, last_check, estimates, grad_norms)
            interruption.raise_if_received()
    interruption.raise_if_received()  # one that came after the last step's check, before the handlers went
    seconds = time.perf_counter() - start
    return [
        _finish(RunRecord(spec, row_estimates, row_norms, seconds=seconds), settings.divergence_threshold)
        for spec, row_estimates, row_norms in zip(
            specs, estimates.cpu().numpy(), grad_norms.cpu().numpy(), strict=True
        )
    ]
