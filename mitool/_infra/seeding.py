"""Random draws from a generator of one's own: ``with seeded(seed):`` sends every random torch
operation that the current thread runs without a generator (the initialisation of each new
``nn.Module``'s parameters, ``torch.randn``, ...) to a CPU ``torch.Generator`` seeded with ``seed``.

An estimate builds its networks inside it, so their initial weights depend on the seed alone, and
two estimates in two threads neither share nor disturb torch's process-wide generator (which they
never touch). It works as a :class:`~torch.utils._python_dispatch.TorchDispatchMode`: torch keeps the
stack of such modes per thread, so only the thread that entered the block sees it. Each operation
tagged ``nondeterministic_seeded`` whose generator argument is empty is run with the block's
generator instead (through its ``.generator`` overload where the plain one has no generator
argument: ``aten.randn.default`` -> ``aten.randn.generator``); one that cannot take a generator is
refused. A CPU generator seeded with ``s`` draws the numbers that ``torch.manual_seed(s)`` makes
the process-wide CPU generator draw, so the weights are those built after ``torch.manual_seed(s)``.
Build on the CPU (and move the module after the block): the generator is a CPU one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["seeded"]


class _FromGenerator(TorchDispatchMode):
    """The mode of :func:`seeded`: random operations without a generator draw from ``generator``."""

    def __init__(self, generator: torch.Generator) -> None:
        super().__init__()
        self.generator = generator

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = dict(kwargs or {})
        if torch.Tag.nondeterministic_seeded in func.tags and kwargs.get("generator") is None:
            if not any(argument.name == "generator" for argument in func._schema.arguments):
                overload = getattr(func.overloadpacket, "generator", None)
                if overload is None:
                    raise RuntimeError(f"{func} draws from torch's process-wide generator and takes no other")
                func = overload
            kwargs["generator"] = self.generator
        return func(*args, **kwargs)


@contextmanager
def seeded(seed: int) -> Iterator[torch.Generator]:
    """Within the block, this thread's random torch operations without a generator draw from a CPU
    generator seeded with ``seed`` (yielded), not from the process-wide one (see the module).

    >>> import torch
    >>> with seeded(3):
    ...     layer = torch.nn.Linear(2, 2)
    >>> _ = torch.manual_seed(3)
    >>> torch.equal(layer.weight, torch.nn.Linear(2, 2).weight)
    True
    """
    generator = torch.Generator().manual_seed(seed)
    with _FromGenerator(generator):
        yield generator
