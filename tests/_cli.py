"""Helpers shared by the tests: the ``fv`` command line run in-process, its one-line refusals, a full disk, hypothesis settings
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
    ``bridges.runs.store._open_tmp``, the atomic writer's temporary file)."""

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


def one_line(code, err, *fragments):
    """The one line a refused command wrote (exit code 2, no traceback), holding every fragment."""
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, err)
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def one_message(excinfo, *fragments):
    """The message of a refusal raised in Python (``pytest.raises``): one short line holding every fragment."""
    msg = str(excinfo.value)
    assert "\n" not in msg and 0 < len(msg) < 300, msg
    for fragment in fragments:
        assert fragment in msg, msg
    return msg


def default_number(value):
    """A default compared as a number where it is one (``"1/100"`` equals ``0.01``), else as given."""
    from fractions import Fraction

    from fvsym._validate import parse_fraction

    if isinstance(value, str):
        try:
            return parse_fraction(value, "default")
        except ValueError:
            return value
    if isinstance(value, float):
        return Fraction(value).limit_denominator(10**12)
    return value


def public_modules(pkg: str):
    """``(module name, parsed source)`` of each public module of a package (no ``_`` module, no command line
    module), read from the source without importing it."""
    import ast
    import importlib
    from pathlib import Path

    root = Path(importlib.import_module(pkg).__file__).parent
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if any(p.startswith("_") for p in parts) or parts[-1] in ("cli", "commands", "study_commands"):
            continue
        yield ".".join((pkg, *parts)), ast.parse(path.read_text())
