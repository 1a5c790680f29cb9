"""The atoms of a finite prior as arrays (docs/theory.md section 6; :mod:`fvnum.priors.atoms`): their checks
(:func:`check_atoms`, :func:`check_weights`: finite, within the guards, one-line errors naming the value), the
``.npy`` reader (:func:`read_atoms`, sized before it is read) and the atoms by their content (:func:`atoms_digest`,
the store of this process by digest: a training run's key and its run folder). Its names are importable from
:mod:`fvnum.priors.atoms` too.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from fvsym._validate import _short
from fvsym.errors import DamagedFile, InputError, reworded

MAX_ATOMS = 10**8  # atoms of one prior (the guards price the work on them before that)
MAX_DIM = 10**6
VALUE_RANGE = 1e75  # |atom entries| below this: losses and their squares stay normal floats


# --- validation and the .npy reader ---------------------------------------------------------------------
def check_atoms(atoms) -> np.ndarray:
    """A finite (M, D) float array, M, D >= 1, within the guards (one-line errors naming the value)."""
    if isinstance(atoms, (str, bytes)) or not hasattr(atoms, "__len__"):
        raise InputError(f"atoms must be an (M, D) array of numbers, got {type(atoms).__name__} {_short(atoms)}")
    shape = getattr(atoms, "shape", None)
    if shape is not None and len(shape) == 2 and shape[0] * shape[1] > MAX_ATOMS * 16:
        raise InputError(f"atoms of shape {tuple(shape)} are too many numbers (at most {MAX_ATOMS * 16})")
    try:
        arr = np.array(atoms, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"atoms must be an (M, D) array of numbers, got {_short(atoms)}") from None
    if arr.ndim != 2:
        raise InputError(f"atoms must be an (M, D) array, got shape {arr.shape}")
    M, D = arr.shape
    if M < 1 or D < 1:
        raise InputError(f"atoms must have M >= 1 rows and D >= 1 columns, got shape {arr.shape}")
    if M > MAX_ATOMS or D > MAX_DIM:
        raise InputError(f"atoms of shape {arr.shape}: at most {MAX_ATOMS} atoms of dimension at most {MAX_DIM}")
    bad = ~np.isfinite(arr)
    if bad.any():
        m, d = map(int, np.argwhere(bad)[0])
        raise InputError(f"atoms must be finite, got {arr[m, d]} at atom {m}, coordinate {d + 1}")
    big = np.abs(arr) >= VALUE_RANGE
    if big.any():
        m, d = map(int, np.argwhere(big)[0])
        raise InputError(f"atom entries must be below {VALUE_RANGE:g} in size, got {arr[m, d]:.3g} at atom {m}")
    return arr


def check_weights(weights, M: int, what: str = "atom") -> np.ndarray:
    if isinstance(weights, (str, bytes)) or not hasattr(weights, "__len__"):
        raise InputError(f"weights must be {M} non-negative numbers, got {_short(weights)}")
    try:
        w = np.array(weights, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"weights must be {M} non-negative numbers, got {_short(weights)}") from None
    if w.shape != (M,):
        raise InputError(f"weights must be {M} numbers (one per {what}), got shape {w.shape}")
    if not np.isfinite(w).all():
        i = int(np.argmin(np.isfinite(w)))
        raise InputError(f"weights must be finite, got {w[i]} at {what} {i}")
    if (w < 0).any():
        i = int(np.argmax(w < 0))
        raise InputError(f"weights must be non-negative, got {w[i]:.6g} at {what} {i}")
    if not w.sum() > 0:
        raise InputError("weights must sum to more than 0, got all zeros")
    return w


def read_atoms(path) -> np.ndarray:
    """An (M, D) ``.npy`` array of atoms, its header read first: shape, dtype and data size are checked before
    the data is read (never pickles; ``fvsym.npyfile``). One-line errors for a missing, empty, damaged or wrongly
    shaped file; they never echo the file's content."""
    from fvsym.npyfile import read_matrix

    p = Path(str(path))
    shown = repr(str(path)) if len(str(path)) <= 80 else repr(str(path)[:50] + "..." + str(path)[-27:])
    try:
        is_file = p.is_file()
    except (OSError, ValueError):
        is_file = False
    if not is_file:
        raise InputError(f"no such atoms file {shown}")
    if p.suffix != ".npy":
        raise InputError(f"atoms file {shown}: must be a .npy array (numpy.save of an (M, D) array)")
    def check(shape, nbytes):
        if shape[0] < 1 or shape[1] < 1:
            raise InputError(f"atoms file {shown}: need M >= 1 atoms of dimension D >= 1, got shape {shape}")
        if shape[0] > MAX_ATOMS or shape[1] > MAX_DIM:
            raise InputError(f"atoms file {shown}: shape {shape} is over the limits (M <= {MAX_ATOMS}, "
                             f"D <= {MAX_DIM})")
        from fvsym.guards.limits import check_memory

        check_memory(f"atoms file {shown} of shape {shape}", 3.0 * nbytes)

    return read_matrix(p, f"atoms file {shown}", "an (M, D) array", check).astype(float)


# --- atoms by their content (a training run's key and its run folder) ------------------------------------
_BY_DIGEST: dict = {}  # sha256 -> (M, D) read-only atoms this process has read or drawn (content-addressed)


def atoms_digest(atoms) -> str:
    """The SHA-256 (hex) of atoms as float64 with their shape: what a training run's key holds for atoms read
    from a file (two different files never share a key; the same numbers saved twice do)."""
    arr = np.ascontiguousarray(np.asarray(atoms, dtype=np.float64))
    h = hashlib.sha256(f"atoms {arr.shape} float64\n".encode())
    h.update(arr.tobytes())
    return h.hexdigest()


def remember_atoms(atoms) -> str:
    """Keep ``atoms`` (validated) under their digest for :func:`atoms_by_digest`; returns the digest."""
    arr = check_atoms(atoms)
    arr.flags.writeable = False
    digest = atoms_digest(arr)
    _BY_DIGEST.setdefault(digest, arr)
    return digest


def atoms_by_digest(digest: str) -> np.ndarray | None:
    """The atoms of ``digest`` read or drawn before in this process (:func:`remember_atoms`), or None."""
    return _BY_DIGEST.get(digest)


def read_atoms_file(path, digest: str | None = None) -> tuple[np.ndarray, str]:
    """``(atoms, digest)`` of an ``(M, D)`` ``.npy`` file: read by :func:`read_atoms` (sized first), checked by
    :func:`check_atoms` (finite, within the guards) and remembered; with ``digest``, a file whose content differs
    is refused in one line (the run was trained on other atoms)."""
    arr = read_atoms(path)
    try:
        arr = check_atoms(arr)
    except ValueError as exc:
        raise reworded(exc, f"atoms file {str(path)[:80]!r}: {exc}") from None
    found = remember_atoms(arr)
    if digest is not None and found != digest:
        raise DamagedFile(f"atoms file {str(path)[:80]!r} holds other atoms (SHA-256 {found[:12]}...) than the run's "
                         f"({str(digest)[:12]}...)")
    return _BY_DIGEST[found], found
