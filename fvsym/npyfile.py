"""A two-dimensional ``.npy`` array read safely: the header first (shape, dtype, data size checked before any
data is read; never a pickle), one-line errors that never echo the file's content. Used by ``--cov FILE.npy``
(``fvsym.cli``) and ``--atoms FILE.npy`` (``fvnum.priors.atoms``); numpy is imported when a file is read."""
from __future__ import annotations

from typing import Callable
from fvsym.errors import DamagedFile, InputError, reworded


def read_matrix(p, label: str, what: str, check_shape: Callable[[tuple, int], None]):
    """The 2-d numeric array in the ``.npy`` file ``p`` (a ``pathlib.Path``), as numpy stores it.

    ``label`` starts every error line (e.g. ``"--cov 'c.npy'"``); ``what`` names the array wanted in the error
    for a wrong rank or dtype (e.g. ``"a 2-d array"``); ``check_shape(shape, nbytes)`` raises for a shape the
    caller refuses (sizes, limits, memory) before the data is read."""
    import numpy as np
    from numpy.lib import format as npy

    bad = f"{label}: not a readable .npy array"
    try:
        size = p.stat().st_size
        with open(p, "rb") as fh:
            try:
                version = npy.read_magic(fh)
            except (ValueError, EOFError):
                raise DamagedFile(f"{bad} (empty or no .npy header)" if size < 6 else f"{bad} (no .npy header)") \
                    from None
            try:
                if version == (1, 0):
                    shape, fortran, dtype = npy.read_array_header_1_0(fh, max_header_size=10_000)
                elif version in ((2, 0), (3, 0)):
                    shape, fortran, dtype = npy.read_array_header_2_0(fh, max_header_size=10_000)
                else:
                    raise DamagedFile("version")
            except Exception:  # numpy parses the header text with tokenize and ast: any of their errors
                raise DamagedFile(f"{bad} (a damaged .npy header)") from None
            header_end = fh.tell()
            if len(shape) != 2 or dtype.kind not in "iuf" or dtype.hasobject:
                raise InputError(f"{label}: need {what} of numbers, got shape {tuple(shape)[:4]}, "
                                 f"dtype {str(dtype)[:40]}")
            need = shape[0] * shape[1] * dtype.itemsize
            check_shape(tuple(shape), need)
            if size - header_end < need:
                raise DamagedFile(f"{bad} (the data is cut short: {size - header_end} of {need} bytes)")
            arr = np.frombuffer(fh.read(need), dtype=dtype)
    except OSError as exc:
        raise reworded(exc, f"{label}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    return arr.reshape(shape, order="F" if fortran else "C")
