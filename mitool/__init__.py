"""mitool: mutual-information bounds as pure functions of critic scores, critic networks, and
tasks with analytic MI.

    from mitool import bounds, critics, tasks
    result = bounds.infonce(pos, neg)     # result.loss to minimise, result.mi in nats
"""

from importlib.metadata import PackageNotFoundError, version

from mitool import bounds, critics, tasks

try:
    __version__ = version("mitool")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = ["__version__", "bounds", "critics", "tasks"]
