"""Helpers shared by the hostile-input tests: the ``fv`` command line run in-process, a full disk, and hypothesis settings
scaled by the profiles of ``tests/conftest.py`` (``dev``, ``ci``, ``thorough``)."""
import contextlib
import io

from hypothesis import HealthCheck, settings

from bridges.cli import main


def fv(*argv):
    """``(exit code, stdout, stderr)`` of ``fv argv...`` run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def examples(n: int):
    """Settings for ``n`` examples at the ``dev`` profile (25 examples), scaled with the active profile."""
    scale = max(1, settings().max_examples // 25)
    return settings(max_examples=n * scale, deadline=None, suppress_health_check=list(HealthCheck),
                    derandomize=scale == 1)


class FullDisk:
    """A file opened on descriptor ``fd`` whose disk is full: every write raises ENOSPC (for
    ``bridges.store._open_tmp``, the atomic writer's temporary file)."""

    def __init__(self, fd):
        import os

        self.raw = os.fdopen(fd, "wb")

    def write(self, data):
        import errno

        raise OSError(errno.ENOSPC, "No space left on device")

    def __getattr__(self, name):
        return getattr(self.raw, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.raw.close()
