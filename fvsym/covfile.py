"""The covariance of ``--cov FILE`` and ``--eigenvalues`` (``fv derive gaussian-loss``, ``fv mc --prior gaussian``):
a ``.npy`` (read by :mod:`fvsym.npyfile`, header first) or ``.csv`` / ``.txt`` rows of numbers, sized before it
is read, with one-line errors that never echo the file's content. Importable from :mod:`fvsym.cli` as before."""
from __future__ import annotations

from fvsym._validate import parse_fraction, parse_number_list
from fvsym.errors import DamagedFile, InputError, reworded


MAX_COV_LINE = 200_000  # characters of one row of a text covariance: 1023 numbers of up to ~195 characters


def load_covariance(path) -> list:
    """A covariance matrix from a file: ``.npy`` (numpy, loaded here only) or ``.csv`` / ``.txt`` (rows of
    numbers separated by commas or spaces; ``#`` comments). Sized before it is read: a ``.npy`` by its header
    (shape and dtype), a text file row by row (at most ``MAX_GAUSSIAN_DIM`` rows of bounded length). One-line
    errors for a missing, empty, damaged or too large file; they never echo the file's content (the path may
    be a link to another file)."""
    from pathlib import Path

    from fvsym.priors import MAX_GAUSSIAN_DIM

    p = Path(path)
    shown = _short_path(path)
    try:
        is_file = p.is_file()
    except (OSError, ValueError):  # a name too long, or holding a NUL byte
        is_file = False
    if not is_file:
        raise InputError(f"--cov: no such covariance file {shown} (or give isotropic, matched)")
    if p.suffix == ".npy":
        return _load_npy(p, shown, MAX_GAUSSIAN_DIM)
    if p.suffix not in (".csv", ".txt"):
        raise InputError(f"--cov {shown}: a covariance file must end in .npy, .csv or .txt")
    rows = []
    try:
        with open(p, "rb") as fh:
            for i in range(1, 10**9):
                raw = fh.readline(MAX_COV_LINE + 1)
                if not raw:
                    break
                if len(raw) > MAX_COV_LINE:
                    raise InputError(f"--cov {shown}, line {i}: longer than {MAX_COV_LINE} characters")
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise DamagedFile(f"--cov {shown}, line {i}: not text (a .csv or .txt file holds rows of "
                                     "numbers)") from None
                line = line.split("#", 1)[0].strip()
                if not line:
                    continue
                items = line.replace(",", " ").split()
                for j, x in enumerate(items, start=1):
                    try:
                        parse_fraction(x, "covariance entry")
                    except ValueError:
                        raise InputError(f"--cov {shown}, line {i}, item {j}: not a number (numbers such as 1, "
                                         "1/2, 0.3)") from None
                rows.append(items)
                if len(rows) > MAX_GAUSSIAN_DIM or len(items) > MAX_GAUSSIAN_DIM:
                    raise InputError(f"--cov {shown}: covariance dimension D must be <= {MAX_GAUSSIAN_DIM}, got "
                                     f"more than {MAX_GAUSSIAN_DIM} {'rows' if len(rows) > MAX_GAUSSIAN_DIM else 'columns'}")
    except OSError as exc:
        raise reworded(exc, f"--cov {shown}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    if not rows:
        raise InputError(f"--cov {shown}: the file holds no rows")
    return rows


def _short_path(path) -> str:
    """A path as an error line shows it: quoted, at most 80 characters (the middle cut)."""
    text = str(path)
    if len(text) > 80:
        text = text[:50] + "..." + text[-27:]
    return repr(text)


def _load_npy(p, shown: str, max_dim: int) -> list:
    """A ``.npy`` covariance, its header read first (``fvsym.npyfile``): the shape, dtype and data size are
    checked before the array is loaded."""
    from fvsym.npyfile import read_matrix

    def check(shape, nbytes):
        if max(shape) > max_dim:
            raise InputError(f"--cov {shown}: covariance dimension D must be <= {max_dim}, got shape {shape}")
        if shape[0] != shape[1] or shape[0] == 0:
            raise InputError(f"--cov {shown}: covariance must be a non-empty square matrix, got shape {shape}")

    arr = read_matrix(p, f"--cov {shown}", "a 2-d array", check)
    return [[repr(float(x)) for x in row] for row in arr.tolist()]


def covariance_of(cov, eigenvalues, dim=None):
    """``(cov, eigenvalues)`` for ``gaussian_loss`` / ``GaussianPrior`` from ``--cov`` (a name or a file)
    and ``--eigenvalues`` (text)."""
    if eigenvalues is not None:
        if cov not in (None, "isotropic"):
            raise InputError(f"give --cov or --eigenvalues, not both (got --cov {cov})")
        return "isotropic", parse_number_list(eigenvalues, "--eigenvalues")
    if cov is None or cov in ("isotropic", "matched"):
        return cov, None
    return load_covariance(cov), None
