"""Modules imported at their first use, so that importing mitool (and its command line) stays fast.

``torch = lazy_import("torch")`` binds a module object whose code runs the first time one of its
attributes is read (:class:`importlib.util.LazyLoader`): a module whose torch work happens inside
its functions (the table of bounds, the tasks, the maps) can then be imported, and its tables read,
without loading torch (about 2 s). A module that is already imported is returned as it is.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

__all__ = ["lazy_import"]


def lazy_import(name: str) -> ModuleType:
    """The top-level module ``name`` (no dots: finding a submodule would import its parents),
    executed at its first attribute access; at once if it is already imported. Reach submodules
    as attributes at use (``torch.nn.functional.softplus``)."""
    if name in sys.modules:
        return sys.modules[name]
    if "." in name:
        raise ValueError(f"lazy_import takes a top-level module name, got {name!r}")
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
