"""Progress on stderr: a tqdm bar on a terminal; anywhere else (a log file, a pipe, a CI log) a plain line
every ``INTERVAL`` seconds and one at the end, never a carriage return.

``progress_bar(total=..., initial=0, enabled=True, desc=..., unit=...)`` returns an object with the
part of tqdm's interface the trainers use: ``update(n)``, ``set_postfix(**values, refresh=False)``,
``close()`` and use as a context manager.
"""
from __future__ import annotations

import sys
import time

INTERVAL = 60.0  # seconds between plain progress lines


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def progress_bar(*, total: int, initial: int = 0, enabled: bool = True, desc: str = "", unit: str = "it",
                 file=None, interval: float = INTERVAL):
    """A tqdm bar when ``file`` (default stderr) is a terminal, plain lines otherwise, nothing if not
    ``enabled``."""
    file = sys.stderr if file is None else file
    if not enabled:
        return _Lines(total, initial, desc, unit, None, interval)
    if _isatty(file):
        from tqdm.auto import tqdm

        return tqdm(total=total, initial=initial, unit=unit, desc=desc, file=file, dynamic_ncols=True)
    return _Lines(total, initial, desc, unit, file, interval)


class _Lines:
    """Plain progress lines: ``desc: n/total unit (k/s), key=value`` at most every ``interval`` seconds."""

    def __init__(self, total, initial, desc, unit, file, interval):
        self.total, self.n, self.start_n, self.desc, self.unit = total, initial, initial, desc, unit
        self.file, self.interval = file, interval
        self.start = self.last = time.monotonic()
        self.postfix: dict = {}

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if self.file is not None and now - self.last >= self.interval:
            self.last = now
            self._line(now)

    def set_postfix(self, refresh: bool = False, **values) -> None:
        self.postfix = values

    def _line(self, now: float) -> None:
        rate = (self.n - self.start_n) / max(now - self.start, 1e-9)
        extra = "".join(f", {k}={v}" for k, v in self.postfix.items())
        print(f"{self.desc}: {self.n}/{self.total} {self.unit}s ({rate:.3g}/s){extra}", file=self.file, flush=True)

    def close(self) -> None:
        if self.file is not None and self.n > self.start_n and time.monotonic() - self.start >= self.interval:
            self._line(time.monotonic())
        self.file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
