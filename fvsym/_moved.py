"""Modules that moved into rooms (issue 46): the old dotted path still imports, as the new module itself,
with a ``DeprecationWarning`` that names the new path. Each package installs its own table at import
(``install({"fvnum.keyed_patching": "fvnum.patching.keyed", ...})``); standard library only."""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str):
        self.new = new

    def create_module(self, spec):
        warnings.warn(f"{spec.name} moved to {self.new}; import it from there (the old path will be removed)",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.new)  # the module itself: one object under both names

    def exec_module(self, module):  # already executed under its new name
        pass


class _MovedFinder(importlib.abc.MetaPathFinder):
    def __init__(self, moved: dict[str, str]):
        self.moved = dict(moved)

    def find_spec(self, name, path=None, target=None):
        new = self.moved.get(name)
        if new is None:
            return None
        return importlib.util.spec_from_loader(name, _Alias(new))


def install(moved: dict[str, str]) -> None:
    """Make every old name of ``moved`` (old dotted path -> new) import the new module, once per process."""
    for finder in sys.meta_path:
        if isinstance(finder, _MovedFinder):
            finder.moved.update(moved)
            return
    sys.meta_path.append(_MovedFinder(moved))


def room_getattr(room: str, implementation: str, submodules):
    """``__getattr__`` of a room named like the module it replaced (``fvnum.keys`` -> ``fvnum.keys.families``):
    that module's names load on first use (PEP 562), so importing the room's other modules stays light; the
    room's own submodules are never shadowed by a name of the implementation."""
    subs = frozenset(submodules)

    def __getattr__(name):
        if name in subs or name.startswith("__"):
            raise AttributeError(f"module {room!r} has no attribute {name!r}")
        try:
            return getattr(importlib.import_module(implementation), name)
        except AttributeError:
            raise AttributeError(f"module {room!r} has no attribute {name!r}") from None

    return __getattr__
