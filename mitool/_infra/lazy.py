"""Modules imported at their first use, so that importing mitool (and its command line) stays fast.

``torch = lazy_import("torch")`` binds a stand-in module whose first attribute read imports torch
(about 2 s): a module whose torch work happens inside its functions (the table of bounds, the
tasks, the maps) can then be imported, and its tables read, without loading torch. A module that is
already imported is returned as it is.

The stand-in is not put in ``sys.modules``: its first read of a name imports the module with
``importlib.import_module``, under one re-entrant lock for all stand-ins, and reads the name from
the imported module; the value is kept on the stand-in, so the next read of it is a plain lookup
(a name the module rebinds later keeps its first value there). Threads that reach a stand-in
together are therefore safe: one imports, the others wait for the whole module, and none reads a
module whose code is still running (which :class:`importlib.util.LazyLoader` allows: it runs the
code into the very object that other threads read).

A module that cannot be imported (not installed, or blocked) is found missing at that first read,
not at ``lazy_import``: the read raises the ModuleNotFoundError, so a module that binds
``torch = lazy_import("torch")`` imports, and serves every route that needs no torch, without it.
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType
from typing import Any

__all__ = ["lazy_import"]

_IMPORTING = threading.RLock()
"""Held while a stand-in imports its module (re-entrant: the module may reach another stand-in)."""


class _LazyModule(ModuleType):
    """The stand-in for the module of the same name (see the module docstring)."""

    def __getattr__(self, attr: str) -> Any:  # called only for names not yet kept on the stand-in
        with _IMPORTING:  # import_module also waits for an import that another thread began
            module = importlib.import_module(self.__name__)
        value = getattr(module, attr)
        setattr(self, attr, value)
        return value

    def __dir__(self) -> list[str]:
        return dir(importlib.import_module(self.__name__))

    def __repr__(self) -> str:
        return f"<lazily imported module {self.__name__!r}>"


def lazy_import(name: str) -> ModuleType:
    """The top-level module ``name`` (no dots: finding a submodule would import its parents),
    imported at the first read of one of its attributes; at once if it is already imported. Reach
    submodules as attributes at use (``torch.nn.functional.softplus``). A missing module raises
    its ModuleNotFoundError at that first read."""
    module = sys.modules.get(name)
    if module is not None:  # None there is a blocked module: the stand-in's read reports it
        return module
    if "." in name:
        raise ValueError(f"lazy_import takes a top-level module name, got {name!r}")
    return _LazyModule(name)
