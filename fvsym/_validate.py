"""Argument checks shared by every public entry point of the three packages (fvsym, fvnum, bridges):
one-line ValueErrors naming the bad value.

- numbers: :func:`parse_fraction` (the one number parser: ``1/2``, ``0.3``, ``1e-3``; bounded length
  and exponent, so no input can hang the parser; every float from ``5e-324`` to ``1.8e308`` parses),
  :func:`to_exact` (exact sympy numbers), :func:`check_real` (finite floats in a range), :func:`check_int`,
  :func:`check_choice`, :func:`parse_int_list` (``1,2,3``). Each accepts ints, floats, Fractions, numpy
  and sympy numbers alike; an exact number of more than ``MAX_DIGITS`` digits is refused in the
  project's words (Python's own "Exceeds the limit (4300 digits)" never reaches the user), and so is a
  derived result too long to print (:func:`check_printable`);
- the command line: :func:`number_arg` and :func:`int_arg` are argparse ``type=`` functions built on
  the same checks, so every ``fv`` command parses numbers the same way;
- resources: :func:`available_memory` (from the OS), :func:`check_memory` and :func:`check_time`
  refuse, before any work, a job that would not fit, naming the limit and the largest size that fits.

sympy is imported only by the functions that build sympy numbers.
"""
from __future__ import annotations

import math
import os
import time
import re
from fractions import Fraction

MAX_NUMBER_CHARS = 100
MAX_EXPONENT = 350  # every float (5e-324 .. 1.8e308) parses; an exponent beyond +-350 is no sensible input
MAX_DIGITS = 4000  # an exact number's numerator and denominator (Python prints ints of up to 4300 digits)
_NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE]([+-]?\d+))?$")


# --- numbers ----------------------------------------------------------------------------------------
def parse_fraction(text, name: str) -> Fraction:
    """The one number parser: ``"1/2"``, ``"0.3"`` (exactly 3/10), ``"-2"``, ``"1e-3"`` -> Fraction.

    Refuses (one-line ValueError naming ``name`` and the text) anything else, texts longer than
    ``MAX_NUMBER_CHARS`` and decimal exponents beyond ``+-MAX_EXPONENT``."""
    raw = text
    text = str(text).strip()
    if not text or len(text) > MAX_NUMBER_CHARS:
        why = "empty" if not text else f"longer than {MAX_NUMBER_CHARS} characters"
        raise ValueError(f"{name} must be a number such as 1/2 or 0.5, got {_short(raw)} ({why})")
    parts = text.split("/")
    if len(parts) > 2:
        raise ValueError(f"{name} must be a number such as 1/2 or 0.5, got {_short(raw)}")
    values = []
    for part in parts:
        m = _NUMBER.match(part.strip())
        if m is None:
            raise ValueError(f"{name} must be a number such as 1/2 or 0.5, got {_short(raw)}")
        if m.group(1) is not None and abs(int(m.group(1))) > MAX_EXPONENT:
            raise ValueError(f"{name} must have a decimal exponent within +-{MAX_EXPONENT}, got {_short(raw)}")
        values.append(Fraction(part.strip()))
    if len(values) == 2:
        if values[1] == 0:
            raise ValueError(f"{name} must be a number, got {_short(raw)} (division by zero)")
        return values[0] / values[1]
    return values[0]


def _short(value) -> str:
    """``repr(value)`` cut to about 60 characters; numbers too long to print (Python refuses ints of over
    4300 digits) are described by their size."""
    big = _digits(value)
    if big is not None and big > 60:
        return f"{type(value).__name__} with {big} digits"
    try:
        text = repr(value)
    except ValueError:  # an object holding an int too long to print
        return f"a {type(value).__name__} too long to print"
    return text if len(text) <= 60 else text[:40] + "..." + text[-10:]


def _text(value) -> str:
    """``str(value)`` (``3/2``, not ``Fraction(3, 2)``), cut like :func:`_short` when long."""
    big = _digits(value)
    if big is not None and big > 60:
        return _short(value)
    text = str(value)
    return text if len(text) <= 60 else text[:40] + "..." + text[-10:]


def _digits(value):
    """Decimal digits (about) of the larger of numerator and denominator of an exact number, else None."""
    num = getattr(value, "numerator", None)
    den = getattr(value, "denominator", None)
    if isinstance(value, bool) or not isinstance(num, int) or not isinstance(den, int):
        p, q = getattr(value, "p", None), getattr(value, "q", None)  # sympy Rational
        if not isinstance(p, int) or not isinstance(q, int):
            return None
        num, den = p, q
    return int(max(abs(num), abs(den), 1).bit_length() * 0.30103) + 1


def _check_digits(value, name: str) -> None:
    d = _digits(value)
    if d is not None and d > MAX_DIGITS:
        kind = "an integer" if isinstance(value, int) else f"a {type(value).__name__}"
        raise ValueError(f"{name} must be an exact number of at most {MAX_DIGITS} digits in numerator and "
                         f"denominator, got {kind} with {d} digits")


def plain_error(exc) -> str:
    """The message of an error met while reading a file, in the project's words where Python's own would
    leak (its limit of 4300 digits on an int, met by a damaged JSON or TOML number)."""
    text = str(exc)
    if "Exceeds the limit" in text and "digits" in text:
        return "a number of more than 4300 digits"
    return text


def check_printable(expr, what: str, hint: str = "") -> None:
    """Refuse (one-line ValueError) a derived exact result holding a number too long to print in full
    (more than ``MAX_DIGITS`` digits; Python itself stops at 4300), before it is printed."""
    import sympy as sp

    atoms = expr.atoms(sp.Rational) if isinstance(expr, sp.Basic) else ()
    longest = max((_digits(a) or 0 for a in atoms), default=0)
    if longest > MAX_DIGITS:
        raise ValueError(f"{what} holds an exact number of about {longest} digits, more than the "
                         f"{MAX_DIGITS} that are printed{hint}")


def _finite_float(value: float, name: str) -> float:
    if value != value or value in (math.inf, -math.inf):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return value


def to_exact(value, name: str):
    """Parse ``value`` (int, float, Fraction, sympy number, or a string such as "1/2" or "0.3").

    Strings, Fractions and floats become exact sympy Rationals; a float is read by its shortest
    decimal form (``0.3 -> 3/10``, what ``repr`` prints), so exact answers stay exact.
    Sympy expressions (symbols) are returned unchanged; NaN, infinities and complex numbers are refused.
    """
    import sympy as sp

    if isinstance(value, sp.Basic):
        if value.is_number and (value.has(sp.nan, sp.zoo, sp.oo, -sp.oo) or value.is_real is False):
            raise ValueError(f"{name} must be a finite real number, got {_short(value)}")
        if isinstance(value, sp.Rational):
            _check_digits(value, name)
        return value
    if isinstance(value, bool) or value is None or (hasattr(value, "dtype") and value.dtype.kind == "b"):
        raise ValueError(f"{name} must be a number, got {_short(value)}")
    if isinstance(value, int):
        _check_digits(value, name)
        return sp.Integer(int(value))
    if isinstance(value, Fraction):
        _check_digits(value, name)
        return sp.Rational(value.numerator, value.denominator)
    if isinstance(value, float):  # also numpy.float64, a float subclass (its repr is "np.float64(0.5)")
        return sp.Rational(Fraction(repr(_finite_float(float(value), name))))
    if isinstance(value, str):
        f = parse_fraction(value, name)
        return sp.Rational(f.numerator, f.denominator)
    if isinstance(value, complex):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    if hasattr(value, "dtype") and getattr(value, "shape", None) == ():  # numpy scalars
        kind = value.dtype.kind
        if kind in "iu":
            return sp.Integer(int(value))
        if kind == "f":  # float32, float16, longdouble: the shortest decimal of the value as a float
            return to_exact(float(value), name)
        if kind == "c":
            raise ValueError(f"{name} must be a real number, got {_short(value)}")
    raise ValueError(f"{name} must be a number, got {type(value).__name__} {_short(value)}")


def check_real(value, name: str, low: float = -math.inf, high: float = math.inf, *, open_low: bool = False,
               open_high: bool = False, shown: str | None = None, float_in_range: bool = True) -> float:
    """A finite float in ``[low, high]`` (ends open with ``open_low``/``open_high``); strings go through
    :func:`parse_fraction` (``"1/2"`` is 0.5). Accepts ints, floats, Fractions, numpy and sympy numbers.
    Exact numbers are compared with the range exactly, and (unless ``float_in_range`` is False, for
    callers that keep the exact number) so is their float: ``1e-400`` lies in (0, 1), its float 0 does not."""
    if isinstance(value, bool) or value is None or (hasattr(value, "dtype") and value.dtype.kind == "b"):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if isinstance(value, str):
        value = parse_fraction(value, name)
    if isinstance(value, complex) or (hasattr(value, "dtype") and value.dtype.kind == "c"):
        raise ValueError(f"{name} must be a real number, got {_short(value)}")
    exact = None  # ints, Fractions, sympy Rationals and numpy ints, as a Fraction
    if isinstance(value, (int, Fraction)) or getattr(value, "is_Rational", False) is True:
        _check_digits(value, name)
        exact = Fraction(int(value.numerator), int(value.denominator))
    elif hasattr(value, "dtype") and value.dtype.kind in "iu":
        exact = Fraction(int(value))
    try:
        x = float(exact if exact is not None else value)
    except OverflowError:
        raise ValueError(f"{name} is too large, got {_short(value)}") from None
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {type(value).__name__} {_short(value)}") from None
    _finite_float(x, name)
    candidates = (x,) if exact is None else (exact, x) if float_in_range else (exact,)
    for v in candidates:  # the number itself, then its float
        below = v < low or (open_low and v == low)
        above = v > high or (open_high and v == high)
        if below or above:
            break
    if below or above:
        got = shown or (f"{x:g}" if exact is None or v is exact else _text(value))
        if v is not exact and exact is not None:
            got += f" (as a float: {x:g})"
        if math.isfinite(low) and math.isfinite(high) and high - low <= 1e6:
            lo = ("(" if open_low else "[") + f"{low:g}"
            hi = f"{high:g}" + (")" if open_high else "]")
            raise ValueError(f"{name} must lie in {lo}, {hi}, got {got}")
        if below:
            raise ValueError(f"{name} must be {'>' if open_low else '>='} {low:g}, got {got}")
        raise ValueError(f"{name} must be {'<' if open_high else '<='} {high:g}, got {got}")
    return x


def check_alpha(alpha):
    """Exact ``alpha`` in (0, 1), or a positive Symbol."""
    import sympy as sp

    a = to_exact(alpha, "alpha")
    if a.is_number:
        if a.is_real is not True or not (0 < a < 1):
            raise ValueError(f"alpha must lie in (0, 1), got {_text(alpha)}")
    elif not isinstance(a, sp.Symbol):
        raise ValueError(f"alpha must be a number in (0, 1) or a Symbol, got {alpha!r}")
    return a


def check_tau(tau):
    t = to_exact(tau, "tau")
    if t.is_number and not t >= 0:
        raise ValueError(f"tau must be >= 0, got {_text(tau)}")
    return t


def check_int(value, name: str, minimum: int = 0, maximum: int | None = None) -> int:
    """An integer in ``[minimum, maximum]``: ints, numpy and sympy integers, and integral floats or
    Fractions (``4.0``, ``np.float32(4)``, ``Fraction(4)``); bools and strings are refused."""
    if isinstance(value, (bool, str, bytes)) or (hasattr(value, "dtype") and value.dtype.kind == "b"):
        raise ValueError(f"{name} must be an integer, got {_short(value)}")
    integral = integer_value(value)
    if integral is None and not hasattr(value, "__index__"):
        integral = _integral(value)
    if integral is None:
        raise ValueError(f"{name} must be an integer, got {_short(value)}")
    value = integral
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {_short(value)}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {_short(value)}")
    return value


def integer_value(value):
    """``int(value)`` for an integer of any kind (int, numpy or sympy integer, an integral Fraction), else
    None (bools, floats, strings, arrays: each caller decides about those)."""
    if isinstance(value, (bool, str, bytes)) or (hasattr(value, "dtype") and value.dtype.kind == "b"):
        return None
    if isinstance(value, Fraction):
        return value.numerator if value.denominator == 1 else None
    if hasattr(value, "__index__") and getattr(value, "shape", ()) == ():
        try:
            return int(value.__index__())
        except TypeError:
            return None
    return None


def _integral(value):
    """``value`` as an int when it is a finite number with no fractional part, else None."""
    if isinstance(value, Fraction):
        return value.numerator if value.denominator == 1 else None
    if isinstance(value, complex) or (hasattr(value, "dtype") and value.dtype.kind not in "f"):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return int(x) if math.isfinite(x) and x.is_integer() else None


def check_choice(value, name: str, choices) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of {', '.join(map(str, choices))}")
    return value


def parse_int_list(text, name: str, minimum: int | None = None, maximum: int | None = None) -> list[int]:
    """``"1,2,3"`` -> [1, 2, 3]; an empty item (``1,,2``), a non-integer or a value outside
    ``[minimum, maximum]`` is a one-line ValueError."""
    items = str(text).split(",")
    out = []
    for i, item in enumerate(items):
        item = item.strip()
        if not re.fullmatch(r"[+-]?\d{1,19}", item):
            what = "an empty item" if not item else f"item {_short(item)}"
            raise ValueError(f"{name} must be comma-separated integers such as 1,2,3, got {_short(text)} ({what})")
        v = int(item)
        if (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
            raise ValueError(f"{name}: {v} is outside {minimum}..{maximum}, got {_short(text)}")
        out.append(v)
    return out


# --- argparse types -----------------------------------------------------------------------------------
def number_arg(name: str, *, exact: bool = False, low: float = -math.inf, high: float = math.inf,
               open_low: bool = False, open_high: bool = False):
    """An argparse ``type=``: parses with :func:`parse_fraction` and checks the range; returns a float,
    or with ``exact`` the validated text (an exact rational such as ``1/2`` stays exact)."""
    import argparse

    def parse(text):
        try:
            value = parse_fraction(text, name)
            check_real(value, name, low, high, open_low=open_low, open_high=open_high, shown=str(text).strip(),
                       float_in_range=not exact)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return str(text).strip() if exact else float(value)

    parse.__name__ = "number"
    return parse


def int_arg(name: str, minimum: int | None = None, maximum: int | None = None):
    """An argparse ``type=`` for integers in ``[minimum, maximum]`` (at most 19 digits)."""
    import argparse

    def parse(text):
        t = str(text).strip()
        if not re.fullmatch(r"[+-]?\d{1,19}", t):
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {_short(text)}")
        v = int(t)
        if minimum is not None and v < minimum:
            raise argparse.ArgumentTypeError(f"{name} must be >= {minimum}, got {v}")
        if maximum is not None and v > maximum:
            raise argparse.ArgumentTypeError(f"{name} must be <= {maximum}, got {v}")
        return v

    parse.__name__ = "integer"
    return parse


# --- resources ----------------------------------------------------------------------------------------
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


# --- designs and readings -------------------------------------------------------------------------------
def check_node_list(values, name: str, maximum: int, minimum: int = 1) -> list[int]:
    """A list of heap node numbers in ``minimum..maximum`` (ints only: no strings, floats or bools)."""
    out = []
    for v in values:
        n = integer_value(v)
        if n is None and not isinstance(v, (bool, str, bytes)):
            n = _integral(v)
        if n is None:
            raise ValueError(f"{name} must list node numbers (integers), got {_short(v)}")
        v = n
        if not minimum <= v <= maximum:
            raise ValueError(f"{name} node {_short(v)} is outside the tree (nodes {minimum}..{maximum})")
        out.append(v)
    return out


def check_tree_readings(depth: int, scales, nodes, phi, rtol: float = 1e-9) -> None:
    """Noiseless (``tau = 0``) readings ``phi`` (n, B) of coordinate ``nodes`` (n, B; 0 = no reading) of a
    tree prior must be produced by some leaf: each reading is ``0`` (the path avoids the node) or
    ``+-a_k`` (it passes, sign = the branch), and together they must leave at least one leaf.
    One-line ValueError naming the first impossible sample. ``O(B K)`` per sample."""
    import numpy as np

    scales = np.asarray(scales, dtype=float)
    nodes = np.asarray(nodes)
    phi = np.asarray(phi, dtype=float)
    for i in range(phi.shape[0]):
        on, zeros = {}, set()
        for n, x in zip(nodes[i].tolist(), phi[i].tolist()):
            if n == 0:
                continue
            a = scales[int(n).bit_length() - 1]
            if abs(x) <= rtol * a:
                zeros.add(int(n))
            elif abs(abs(x) - a) <= rtol * a:
                s = 1 if x > 0 else -1
                if on.get(int(n), s) != s:
                    raise ValueError(f"readings of sample {i} are impossible without noise: node {n} read both signs")
                on[int(n)] = s
            else:
                raise ValueError(f"reading {x!r} of node {n} (sample {i}) is impossible without noise (tau = 0): "
                                 f"it must be 0 or +-{a:g}")
        if not _tree_consistent(depth, on, zeros):
            raise ValueError(f"readings of sample {i} are impossible without noise (tau = 0): no leaf of the tree "
                             f"produces them")


def _tree_consistent(depth: int, on: dict, zeros: set) -> bool:
    region = 1  # the subtree the path must end in
    if on:
        deepest = max(on, key=lambda n: n.bit_length())
        for n, s in on.items():  # every passed node is an ancestor of the deepest, on the right branch
            shift = deepest.bit_length() - n.bit_length()
            if deepest >> shift != n:
                return False
            below = 2 * n + (0 if s > 0 else 1)
            if shift and deepest >> (shift - 1) != below:
                return False
        region = 2 * deepest + (0 if on[deepest] > 0 else 1)
        for z in zeros:  # a zero on the forced path is impossible
            shift = region.bit_length() - z.bit_length()
            if shift >= 1 and region >> shift == z:
                return False
    if region.bit_length() > depth:  # a single leaf: nothing below to exclude
        return True
    inside = {z for z in zeros if z.bit_length() >= region.bit_length()
              and z >> (z.bit_length() - region.bit_length()) == region}

    def covered(n):  # every leaf below n is excluded by a zero reading
        if n in inside:
            return True
        if n.bit_length() >= depth or not any(z.bit_length() > n.bit_length()
                                              and z >> (z.bit_length() - n.bit_length()) == n for z in inside):
            return False
        return covered(2 * n) and covered(2 * n + 1)

    return not covered(region)
