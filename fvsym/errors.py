"""The project's typed errors, one module for the three packages (``fvsym`` is the bottom layer, so ``fvnum``
and ``bridges`` raise the same classes, imported from here: ``from fvsym.errors import InputError``).

Every class is a :class:`ValueError`, so callers that catch ``ValueError`` (and tests that expect it) keep
working; a caller that must tell them apart catches the class:

- :class:`InputError`: a value outside its domain, a bad option or a name not known (one line naming the value);
- :class:`DomainError` (an :class:`InputError`): a formula evaluated, or a limit or series taken, outside
  its domain (:mod:`fvsym._formula`);
- :class:`ResourceRefused`: a job priced over the time cap or the memory available, or past its cap while
  running (:mod:`fvsym.guards.limits`), in the library's words; the command line names its flag instead;
- :class:`DamagedFile`: a file that is not what it claims (a run configuration, a cell, a checkpoint, a
  training result): one line naming the file.

Standard library only."""
from __future__ import annotations


class InputError(ValueError):
    """A value the function cannot take: one line naming the value and what would be taken."""


class DomainError(InputError):
    """A Formula asked for a value, a limit or a series outside its domain (the symbols' ranges in
    ``fvsym._symbols.DOMAINS`` and the formula's ``constraints``): one line naming the value and the domain."""


class ResourceRefused(ValueError):
    """A job refused before work because its price is over a limit (the time cap, the memory available), or
    stopped past its time cap. ``limit`` is ``"time"`` or ``"memory"``."""

    def __init__(self, message: str, *, limit: str = "time"):
        super().__init__(message)
        self.limit = limit


class DamagedFile(ValueError):
    """A file that is not what it claims (truncated, not JSON, the wrong shape or checksum, another
    configuration's): one line naming the file. ``path`` is the file, where known."""

    def __init__(self, message: str, *, path=None):
        super().__init__(message)
        self.path = path


def reworded(exc: BaseException, message: str) -> ValueError:
    """The refusal ``exc`` said again in ``message`` (a caller adding where it happened), keeping its class:
    one of the typed errors stays of its class with its fields (``limit``, ``path``); anything else (a plain
    ``ValueError`` of a third-party reader) becomes an :class:`InputError`."""
    cls = type(exc) if isinstance(exc, (InputError, ResourceRefused, DamagedFile)) else InputError
    new = cls.__new__(cls)
    ValueError.__init__(new, message)
    new.__dict__.update(getattr(exc, "__dict__", {}) if cls is type(exc) else {})
    return new


__all__ = ["DamagedFile", "DomainError", "InputError", "ResourceRefused"]
