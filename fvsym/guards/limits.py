"""The guards of the three packages: the time cap of the running job and the memory the OS has left, each
checked before any work; a job that would not fit is refused with one line (:class:`~fvsym.errors.ResourceRefused`)
naming its estimate, the limit and the largest size that fits.

The cap is :class:`time_limit`'s (else env ``FV_MAX_SECONDS``, else one hour); refusals say so in the library's
words (:data:`TIME_CAP_NOTE`), and the command line, which sets the cap from ``fv --max-seconds S``, names
its flag instead (``fvsym.cli.cli_words``). The prices themselves sit beside the algorithms they price
(``fvsym.guards.costs``, ``fvnum.guards.limits``, ``bridges.prices.cost``).

Standard library only (and :mod:`fvsym._validate`), so every layer, the command line included, can use it
without loading numba; ``fvnum.guards.resources`` re-exports it and adds the command line's watchdog.
"""
from __future__ import annotations

import os
import time

from fvsym._validate import check_real
from fvsym.errors import ResourceRefused

TIME_CAP_NOTE = "the time cap: time_limit(S) or env FV_MAX_SECONDS raises it"  # the library's words for the cap

DEFAULT_MAX_SECONDS = 3600.0
DEFAULT_LONG_SECONDS = 86400.0  # the default cap of the commands that train (train, compare, studies, sweeps)
_max_seconds: list[tuple[float, float]] = []  # (cap, monotonic start) of the command running now


def max_seconds() -> float:
    """The time cap of the running job: the innermost :class:`time_limit`'s (``fv --max-seconds S`` sets it on
    the command line), else env ``FV_MAX_SECONDS``, else one hour."""
    if _max_seconds:
        return _max_seconds[-1][0]
    return _env_seconds() or DEFAULT_MAX_SECONDS


def _env_seconds():
    env = os.environ.get("FV_MAX_SECONDS")
    return check_real(env, "FV_MAX_SECONDS", 0, open_low=True) if env else None


class time_limit:
    """``with time_limit(s): ...``: the cap that :func:`check_time` applies inside the block, and the
    deadline (counted from the block's start) that :func:`time_over` watches. ``s`` None: env
    ``FV_MAX_SECONDS``, else ``default`` (else :data:`DEFAULT_MAX_SECONDS`)."""

    def __init__(self, seconds, default=None):
        self.seconds = None if seconds is None else check_real(seconds, "max_seconds", 0, open_low=True)
        self.default = default

    def __enter__(self):
        cap = self.seconds if self.seconds is not None else (_env_seconds() or self.default or DEFAULT_MAX_SECONDS)
        _max_seconds.append((float(cap), time.monotonic()))
        return self

    def __exit__(self, *exc):
        _max_seconds.pop()
        return False


def seconds_used() -> float:
    """Seconds since the running command's :class:`time_limit` began (0 outside one)."""
    return time.monotonic() - _max_seconds[-1][1] if _max_seconds else 0.0


def seconds_left() -> float:
    """Seconds the running command has left under its cap (its whole cap outside a :class:`time_limit`)."""
    return max_seconds() - seconds_used()


class _Over:
    """``over()``: the seconds the running command is past its cap, or None while it is within it."""

    def __init__(self, cap: float, start: float):
        self.cap, self.start = cap, start

    def __call__(self):
        late = time.monotonic() - self.start - self.cap
        return late if late > 0 else None

    def message(self, what: str) -> str:
        return (f"{what} after {format_seconds(time.monotonic() - self.start)}, past the limit of "
                f"{format_seconds(self.cap)} ({TIME_CAP_NOTE})")


def time_over():
    """A watch on the running command's deadline (``over()`` is None while within the cap, else the
    seconds past it; ``over.message(what)`` the one-line report), or None outside a :class:`time_limit`
    (the Python API has no deadline)."""
    return _Over(*_max_seconds[-1]) if _max_seconds else None


def check_deadline(what: str) -> None:
    """Raise a one-line :class:`ResourceRefused` if the running job is past its cap (between units of work)."""
    over = time_over()
    if over is not None and over() is not None:
        raise ResourceRefused(over.message(what) + "; finished work is kept: run again to resume")


def available_memory() -> int:
    """Bytes this process may still allocate: the OS's available memory (psutil if installed, else
    ``os.sysconf``), no more than the address-space limit ``RLIMIT_AS`` if one is set."""
    avail = None
    try:
        import psutil

        avail = int(psutil.virtual_memory().available)
    except Exception:  # noqa: BLE001 - psutil is optional
        try:
            avail = _meminfo_available()
        except OSError:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY and soft > 0:
            avail = min(avail, max(soft - _address_space_used(), 0))
    except (ImportError, OSError, ValueError):
        pass
    return int(avail)


def _meminfo_available() -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise OSError("no MemAvailable in /proc/meminfo")


def _address_space_used() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def format_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1024 or unit == "PB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.3g} PB"  # pragma: no cover


def format_seconds(s: float) -> str:
    if s < 120:
        return f"{s:.3g} s"
    if s < 7200:
        return f"{s / 60:.3g} min"
    return f"{s / 3600:.3g} h" if s < 1e7 else f"{s / 3.15e7:.2g} years"


def largest_fitting(name: str, values, fits) -> str:
    """``"; the largest {name} that fits is V"`` for the largest ``V`` of the increasing ``values`` with
    ``fits(V)``, or ``"; no {name} fits"``."""
    best = None
    for v in values:
        if fits(v):
            best = v
        else:
            break
    return f"; the largest {name} that fits is {best}" if best is not None else f"; no {name} fits"


def check_memory(what: str, need: float, hint: str = "") -> None:
    """Refuse (one-line :class:`ResourceRefused`) a job that needs ``need`` bytes when less is available."""
    avail = available_memory()
    if need > avail:
        raise ResourceRefused(f"{what} needs about {format_bytes(need)} of memory, more than the "
                              f"{format_bytes(avail)} available{hint}", limit="memory")


def check_time(what: str, seconds: float, hint: str = "") -> None:
    """Refuse (one-line :class:`ResourceRefused`) a job estimated to take longer than :func:`max_seconds`."""
    cap = max_seconds()
    if seconds > cap:
        raise ResourceRefused(f"{what} would take about {format_seconds(seconds)}, over the limit of "
                              f"{format_seconds(cap)} ({TIME_CAP_NOTE}){hint}")


def fits_memory(need: float) -> bool:
    return need <= available_memory()


def fits_time(seconds: float) -> bool:
    return seconds <= max_seconds()
