"""Helpers shared by the hostile-input tests: the ``fv`` command line run in-process, and hypothesis settings
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
