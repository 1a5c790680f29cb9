"""Resource guards of the ``fv`` commands and the Python API: the time cap of the running command
(``fv --max-seconds S``, env ``FV_MAX_SECONDS``) and the memory the OS has left, each checked before any
work; a job that would not fit is refused with one line naming the limit and the largest size that fits.

Standard library only (and :mod:`fvsym._validate`), so every layer, the command line included, can use it
without loading numba.
"""
from __future__ import annotations

import os
import sys
import threading
import time

from fvsym._validate import check_real

DEFAULT_MAX_SECONDS = 3600.0
DEFAULT_LONG_SECONDS = 86400.0  # the default cap of the commands that train (train, compare, studies, sweeps)
_max_seconds: list[tuple[float, float]] = []  # (cap, monotonic start) of the command running now


def max_seconds() -> float:
    """The time cap of one command: ``fv --max-seconds S``, else env ``FV_MAX_SECONDS``, else the
    command's default (one hour; a day for the commands that train)."""
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
                f"{format_seconds(self.cap)} (fv --max-seconds S raises it)")


def time_over():
    """A watch on the running command's deadline (``over()`` is None while within the cap, else the
    seconds past it; ``over.message(what)`` the one-line report), or None outside a :class:`time_limit`
    (the Python API has no deadline)."""
    return _Over(*_max_seconds[-1]) if _max_seconds else None


def check_deadline(what: str) -> None:
    """Raise a one-line ``ValueError`` if the running command is past its cap (between units of work)."""
    over = time_over()
    if over is not None and over() is not None:
        raise ValueError(over.message(what) + "; finished work is kept: run again to resume")


WATCH_GRACE_S = 2.0  # the watchdog fires this long past the cap, or WATCH_GRACE_SHARE of the cap if longer
WATCH_GRACE_SHARE = 0.05


def watch_grace(cap: float) -> float:
    """Seconds past the cap before :class:`watchdog` ends the command: ``max(WATCH_GRACE_S, 5% of the cap)``,
    so the commands that stop on their own at the cap (training keeps its checkpoint, studies stop between
    cells) do so first, and none outlives its cap by more than 10% or a few seconds."""
    return max(WATCH_GRACE_S, WATCH_GRACE_SHARE * float(cap))


class watchdog:
    """``with time_limit(s), watchdog("fv bounds"): ...``: the time cap watched during work, not only priced.

    A daemon thread waits until the running :class:`time_limit`'s cap plus :func:`watch_grace`; if the block
    has not ended by then it prints the command's one line on stderr (``COMMAND: error: stopped after T, past
    the limit of CAP (fv --max-seconds S raises it) ...``), flushes, ends the child processes of
    ``multiprocessing`` (a local cluster's workers) and leaves with exit code 2 through ``os._exit``: numba
    kernels and torch operations do not return to the interpreter for a signal handler, but they release the
    GIL (every kernel of ``fvnum._kernels`` is ``nogil``), so the thread runs while they work. Results are
    written atomically (a temporary file, then ``os.replace``), so the exit never leaves a half-written file.

    Installed once, by the command line, where it applies the cap (``bridges.cli.main``); library calls keep
    refusing in their own words (:func:`check_time`, :func:`check_deadline`). Outside a :class:`time_limit`, or
    with ``active`` False, it watches nothing. ``exit`` and ``stream`` are for tests (defaults: ``os._exit`` and ``sys.stderr``)."""

    def __init__(self, command: str, *, active: bool = True, exit=None, stream=None):
        self.command, self.active, self._exit, self._stream = command, bool(active), exit, stream
        self._stop = threading.Event()
        self._thread = None
        self.fired = False

    def __enter__(self):
        if self.active and _max_seconds:
            cap, start = _max_seconds[-1]
            self._thread = threading.Thread(target=self._watch, args=(cap, start), name="fv-watchdog", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        return False

    def _watch(self, cap: float, start: float) -> None:
        deadline = start + cap + watch_grace(cap)
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                self._fire(cap, start)
                return
            self._stop.wait(min(left, 60.0))

    def message(self, cap: float, start: float) -> str:
        return (f"{self.command}: error: stopped after {format_seconds(time.monotonic() - start)}, past the "
                f"limit of {format_seconds(cap)} (fv --max-seconds S raises it); the files written so far "
                f"are complete")

    def _fire(self, cap: float, start: float) -> None:
        self.fired = True
        stream = self._stream if self._stream is not None else sys.stderr
        for fh in (sys.stdout, stream):
            try:
                fh.flush()
            except Exception:  # noqa: BLE001 - a closed or broken stream: nothing more to say on it
                pass
        try:
            stream.write("\n" if getattr(stream, "isatty", lambda: False)() else "")  # past a progress bar
            stream.write(self.message(cap, start) + "\n")
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
        if self._exit is not None:
            self._exit(2)
            return
        _end_children()
        os._exit(2)


def _end_children() -> None:
    """Terminate the live ``multiprocessing`` children (a local cluster's worker processes), if any."""
    mp = sys.modules.get("multiprocessing")
    if mp is None:
        return
    try:
        children = mp.active_children()
    except Exception:  # noqa: BLE001 - nothing to end
        return
    for child in children:
        try:
            child.terminate()
        except Exception:  # noqa: BLE001
            pass


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
    """Refuse (one-line ValueError) a job that needs ``need`` bytes when less is available."""
    avail = available_memory()
    if need > avail:
        raise ValueError(f"{what} needs about {format_bytes(need)} of memory, more than the "
                         f"{format_bytes(avail)} available{hint}")


def check_time(what: str, seconds: float, hint: str = "") -> None:
    """Refuse a job estimated to take longer than :func:`max_seconds` (``fv --max-seconds S`` raises it)."""
    cap = max_seconds()
    if seconds > cap:
        raise ValueError(f"{what} would take about {format_seconds(seconds)}, over the limit of "
                         f"{format_seconds(cap)} (fv --max-seconds S raises it){hint}")


def fits_memory(need: float) -> bool:
    return need <= available_memory()


def fits_time(seconds: float) -> bool:
    return seconds <= max_seconds()
