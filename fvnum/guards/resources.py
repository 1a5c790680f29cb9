"""Resource guards of the ``fv`` commands and the Python API: the guards themselves live in :mod:`fvsym.guards.limits`
(the bottom layer, so ``fv derive`` uses them without an arrow up; import them from there); this module adds the
command line's :class:`watchdog`, which ends a command past its cap in one line.

Standard library only, so every layer, the command line included, can use it without loading numba.
"""
from __future__ import annotations

import os
import sys
import threading
import time

from fvsym.guards.limits import _max_seconds, format_seconds

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
    GIL (every kernel of ``fvnum.mc._kernels`` is ``nogil``), so the thread runs while they work. Results are
    written atomically (a temporary file, then ``os.replace``), so the exit never leaves a half-written file.

    Installed once, by the command line, where it applies the cap (``bridges.cli.main``); library calls keep
    refusing in their own words (:func:`check_time`, :func:`check_deadline`). Outside a :class:`time_limit`, or
    with ``active`` False, it watches nothing. ``exit`` and ``stream`` are for tests (defaults: ``os._exit`` and ``sys.stderr``)."""

    def __init__(self, command: str, *, active: bool = True, exit=None, stream=None, writes: bool = True):
        self.command, self.active, self._exit, self._stream = command, bool(active), exit, stream
        self.writes = bool(writes)  # whether the command writes files as it goes (else it prints at its end)
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
                f"limit of {format_seconds(cap)} (fv --max-seconds S raises it); "
                + ("the files written so far are complete" if self.writes else
                   "nothing was written (it prints its results when it finishes)"))

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
