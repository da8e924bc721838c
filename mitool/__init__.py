"""mitool: mutual-information bounds as pure functions of critic scores, critic networks, and
tasks with analytic MI.

    from mitool import bounds, critics, tasks
    result = bounds.infonce(pos, neg)     # result.loss to minimise, result.mi in nats

Importing ``mitool`` loads nothing heavy: its submodules are imported when first reached
(``mitool.bounds``, ``mitool.critics``, ...), and torch when first used.
"""

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("mitool")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = ["__version__", "bounds", "critics", "tasks"]


def __getattr__(name: str) -> object:
    if name in ("bounds", "critics", "tasks"):
        return import_module(f"mitool.{name}")
    raise AttributeError(f"module 'mitool' has no attribute {name!r}")
